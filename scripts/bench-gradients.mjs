#!/usr/bin/env node
// The gradients' costs against the issue's targets (GPT-2-small-shaped Q8_0, wasm, one thread,
// the page's int8 activations): tests/model/backward_profile_test.cc's hidden profile run in the
// WebAssembly test build under Node, its phases in prefills of the same 64 tokens, printed as
// rows with their targets:
//   a backward over 64 tokens                      <= 1.5 prefills
//   a full atp (both runs and the backward)        <= 4
//   integrated gradients, 16 steps                 <= 40
//   what the backward keeps at 128 tokens          <= 100 MB
// Wall time of the profile (std::clock in wasm), so run it on a quiet machine.
//   node --no-experimental-fetch scripts/bench-gradients.mjs [--runs 3] [--tests build/wasm/gpt2_tests.js]
// (--tests build/native/gpt2_tests: the same natively.)
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import {arg, median, printMachine, repoRoot} from './node-engine.mjs';

const tests = path.resolve(repoRoot, arg('tests', 'build/wasm/gpt2_tests.js'));
if (!fs.existsSync(tests)) {
  console.log(`gradients: ${path.relative(repoRoot, tests)} is missing (build the wasm test suite first)`);
  process.exit(0);
}
printMachine();
// A native build's gpt2_tests runs the same profile natively (to compare).
const command = tests.endsWith('.js') ? [process.execPath, ['--no-experimental-fetch', tests]] : [tests, []];
const kRuns = Number(arg('runs', '3'));
const outs = [];
for (let i = 0; i < kRuns; ++i) {
  const run = spawnSync(command[0], [...command[1], '[profile][gradients_profile]'],
                        {cwd: repoRoot, encoding: 'utf8', maxBuffer: 1 << 24});
  if (run.status !== 0) {
    console.log((run.stdout || '') + (run.stderr || ''));
    console.log(`gradients: the profile failed (status ${run.status})`);
    process.exit(0);
  }
  outs.push(run.stdout);
}
const out = outs[0];
// Each row is the median over the runs (each run's phases are in prefills of its own prefill).
const prefills = (phase) => median(outs.map((o) => {
  const m = o.match(new RegExp(`^${phase.replace(/[()]/g, '\\$&')}\\s+[\\d.]+ ms =\\s+([\\d.]+) prefills`, 'm'));
  return m ? Number(m[1]) : NaN;
}));
const mb = Number((out.match(/^saved at 128 tokens: ([\d.]+) MB/m) || [])[1]);
const target = (out.match(/^==== (.*)$/m) || [])[1] || '';
console.log(`gradients (${target.trim()}; median of ${kRuns} runs):`);
const rows = [
  ['backward over 64 tokens', prefills('backward'), 1.5, 'prefills'],
  ['full atp (both runs and the backward)', prefills('atp (both runs and the backward)'), 4, 'prefills'],
  ['ig, 16 steps', prefills('saliency ig, 16 steps'), 40, 'prefills'],
  ['what the backward keeps, 128 tokens', mb, 100, 'MB'],
  ['why this head attends here (one score\'s backward)', prefills('score backward (block 6\'s score)'), NaN, 'prefills'],
];
console.log('| measure | figure | target | |\n|---|---:|---:|---|');
for (const [what, value, bound, unit] of rows) {
  const met = Number.isNaN(bound) ? '' : value <= bound ? 'met' : '**not met**';
  console.log(`| ${what} | ${Number.isNaN(value) ? '?' : value.toFixed(2)} ${unit} | ` +
              `${Number.isNaN(bound) ? '' : `≤ ${bound}`} | ${met} |`);
}
