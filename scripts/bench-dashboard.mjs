#!/usr/bin/env node
// Feature dashboards' costs (issue 50, "Speed"): the GPT-2-small-shaped Q8_0 model with random
// weights and the 12 random transcoders of scripts/bench-graph.mjs (24,576 features a block, Q8_0,
// about 70 firing a token), over --tokens tokens (default 100 k) of English text: Debian's licence
// texts and its packages' copyright files, documents in a .txt corpus, windows of 128 tokens.
// Three selections, as the issue states them:
//   a graph's features   1,000 features drawn across the 12 blocks     target <= 1.3 x the prefill
//   one block's          block 6, 24,576 features                      target <= 1.6 x
//   every block's        295 k features                                target <= 4.5 x,
//                                                                      state <= 400 MB
// each as `gpt2 dashboard`'s CPU time over prefilling the same tokens: the windows as prompts of
// [50256] + 128 tokens, timed by `gpt2 bench --prompt-tokens 129` on the same model and thread
// count (CPU time: the machine this was written on is shared, and wall times there swing). The dashboard's time is split as the CLI reports it: running the windows (the
// forward and the encoders) and finishing the features (bands, histograms, and the logit tables:
// a [features, 768] x [768, 50257] product, for every block more arithmetic than the corpus's
// forward). State: the CLI's peak of what the job holds (lab/dashboard.h state_bytes), and peak RSS.
//
// Native only for now (the page's module runs the same job, lab/dashboard_file.h, but is not
// timed here yet). 1 thread, int8
// activations (the page's arithmetic).
//   node scripts/bench-dashboard.mjs [--tokens 100000] [--threads 1] [--only graph,block,all]
import {execFileSync, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import {arg, benchModel, benchTranscoders, printMachine, repoRoot} from './node-engine.mjs';

const kTokens = Number(arg('tokens', '100000'));
const kThreads = arg('threads', '1');
const kOnly = arg('only', 'graph,block,all').split(',');
const kContext = 128;
const dir = path.join(repoRoot, 'build/bench/dashboard');
const gpt2 = path.join(repoRoot, 'build/native/gpt2');
const model = benchModel('gpt2');
const transcoders = benchTranscoders();

// The corpus: whole files, in a fixed order, until there is text enough (--max-tokens cuts it).
fs.mkdirSync(dir, {recursive: true});
const corpus = path.join(dir, 'corpus.txt');
const kCorpusBytes = 8 * Math.max(kTokens, 100000);  // ~4 bytes a token: twice what is needed
if (!fs.existsSync(corpus) || fs.statSync(corpus).size < kCorpusBytes) {
  const files = [];
  for (const f of fs.readdirSync('/usr/share/common-licenses').sort()) files.push(path.join('/usr/share/common-licenses', f));
  for (const d of fs.readdirSync('/usr/share/doc').sort()) files.push(path.join('/usr/share/doc', d, 'copyright'));
  const docs = [];
  let bytes = 0;
  for (const f of files) {
    if (bytes > kCorpusBytes) break;
    try {
      if (!fs.statSync(f).isFile()) continue;
      const text = fs.readFileSync(f, 'utf8').trim();
      if (text) {
        docs.push(text);
        bytes += text.length;
      }
    } catch { /* a package without a copyright file */ }
  }
  fs.writeFileSync(corpus, docs.join('\n<|endoftext|>\n') + '\n');
}

// A command's stdout, peak RSS in MB and CPU seconds (GNU time's %M in KB, %U + %S, on stderr's
// last line).
function runNative(args) {
  const r = spawnSync('/usr/bin/time', ['-f', '%M %U %S', gpt2, ...args], {encoding: 'utf8', maxBuffer: 1 << 30});
  if (r.status !== 0) throw new Error(`gpt2 ${args[0]} failed: ${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  const [rss, user, sys] = lines[lines.length - 1].split(' ').map(Number);
  return {stdout: r.stdout, rssMb: rss / 1024, cpuS: user + sys};
}

printMachine();
// The prefill of a window ([50256] + 128 tokens) in CPU time, as the difference of `gpt2 bench`
// runs of 2 and 12 prefills (load and setup cancel): this 2-core machine is shared, and CPU time
// is what another process's work does not stretch. Its wall time (best of 12) beside it.
const prefills = (n) => runNative(['bench', '--model', model, '--prompt-tokens', String(kContext + 1),
                                   '--decode-tokens', '0', '--threads', kThreads, '--activations', 'int8',
                                   '--repeats', String(n)]);
function prefillCpuMs() {
  const few = prefills(2), many = prefills(12);
  const ms = 1000 * (many.cpuS - few.cpuS) / 10;
  const wallMs = 1000 * Number(new RegExp(`prefill: ${kContext + 1} tokens in ([0-9.]+) s`).exec(many.stdout)[1]);
  console.log(`prefill of ${kContext + 1} tokens: ${ms.toFixed(1)} ms of CPU (wall, best of 12: ` +
              `${wallMs.toFixed(1)} ms), ${kThreads} thread(s), int8 activations`);
  return {ms, rssMb: many.rssMb};
}
// Measured again after each dashboard (others' work on a shared machine moves even CPU time, by
// the caches it shares): each ratio is over the mean of the measures before and after it.
let before = prefillCpuMs();
const bench = before;

// 1,000 features across the blocks, drawn with a fixed LCG's high bits (its low bits repeat
// with a short period) (a graph's features: any blocks).
let state = 12345;
const next = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state >>> 8;
};
const features = new Set();
while (features.size < 1000) features.add(`${next() % 12}_${next() % 24576}`);
const selections = {
  graph: ['--features', [...features].join(',')],
  block: ['--blocks', '6'],
  all: [],
};
const targets = {graph: 1.3, block: 1.6, all: 4.5};
for (const name of kOnly) {
  const t0 = performance.now();
  const run = runNative(['dashboard', '--model', model, '--transcoders', transcoders, '--corpus', corpus,
                         '--max-tokens', String(kTokens), '--context', String(kContext), '--threads', kThreads,
                         '--activations', 'int8', ...selections[name]]);
  const wall = (performance.now() - t0) / 1000;
  const line = run.stdout.trim().split('\n').pop();
  const m = new RegExp('dashboard: (\\d+) features, (\\d+) windows, (\\d+) tokens: windows (\\d+) ms, features (\\d+) ms ' +
                     '\\(cpu (\\d+) ms, (\\d+) ms\\), state peak ([0-9.]+) MB').exec(line);
  if (!m) throw new Error(`unexpected output: ${line}`);
  const [nFeatures, nWindows, nTokens, windowsWall, featuresWall, windowsMs, featuresMs, stateMb] = m.slice(1).map(Number);
  const after = prefillCpuMs();
  const prefillMs = (before.ms + after.ms) / 2;
  before = after;
  // Every window as a prompt of [50256] + its tokens, at the rate of a 129-token prefill.
  const prefill = (nTokens + nWindows) / (kContext + 1) * prefillMs;
  console.log(`${name}: ${nFeatures} features over ${nWindows} windows (${nTokens} tokens), CPU time: windows ${windowsMs} ms ` +
              `(${(windowsMs / prefill).toFixed(2)} x the prefill of ${prefill.toFixed(0)} ms), features ${featuresMs} ms, ` +
              `together ${((windowsMs + featuresMs) / prefill).toFixed(2)} x (target <= ${targets[name]}); wall ` +
              `${windowsWall} + ${featuresWall} ms; state peak ${stateMb.toFixed(0)} MB, peak RSS ${run.rssMb.toFixed(0)} MB ` +
              `(the model's bench: ${bench.rssMb.toFixed(0)} MB), ${wall.toFixed(0)} s in all`);
}
