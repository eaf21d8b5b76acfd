#!/usr/bin/env node
// One build of the page's module against another, in turns, in headless Chromium: the way to tell
// whether a kernel change moved prefill on a guest whose speed drifts by a third between runs
// (BENCHMARKS-history.md "Issue 35 (tools that compose)"). Each build gets a page of its own in one
// browser, one thread, a GPT-2-small-shaped model per weight type; then --rounds rounds, each
// build's --prefills prefills of a 128-token prompt, alternating which build goes first. Prints
// each round's tokens/s and the median over rounds of each build and of their per-round ratio.
//
//   node scripts/bench-turns.mjs --base build/bench/base/gpt2-engine.js
//                                [--engine build/wasm/web/gpt2-engine.js] [--builds relaxed]
//                                [--types q8_0] [--rounds 8] [--prefills 4] [--prompt-tokens 128]
// --base and --engine name the modules' .js (under the repository); --builds plain|relaxed picks
// the .wasm beside it (gpt2-engine.wasm or gpt2-engine-relaxed.wasm). Copy a build aside first:
//   mkdir -p build/bench/base && cp build/wasm/web/gpt2-engine* build/bench/base/
// --decode N adds N greedy decode steps after each prefill and reports decode tokens/s too.
// --capture turns activation capture on for the new side only; with --base the same module as
// --engine, that measures what capture costs a prefill (issue 37's capture on / off).
import path from 'node:path';

import * as H from '../tests/web/wllama-harness.mjs';
import * as Ours from './bench-ours.mjs';
import { arg, benchModel, printMachine } from './node-engine.mjs';

const kRoot = H.repoRoot;
const kBase = arg('base', 'build/bench/base/gpt2-engine.js');
const kEngine = arg('engine', 'build/wasm/web/gpt2-engine.js');
const kTypes = arg('types', 'q8_0').split(',');
const kBuild = arg('builds', 'relaxed');
const kRounds = Number(arg('rounds', '8'));
const kPrefills = Number(arg('prefills', '4'));
const kPromptTokens = Number(arg('prompt-tokens', '128'));
const kCapture = process.argv.includes('--capture');
const kDecode = Number(arg('decode', '0'));
const kSuffix = { plain: '', relaxed: '-relaxed' }[kBuild];
if (kSuffix === undefined) throw new Error(`--builds: ${kBuild} is not plain or relaxed`);

const promptText = Ours.repeatedPrompt(kPromptTokens);

printMachine();
const served = Object.fromEntries(kTypes.map((t) => [`/__model/${t}.gguf`, benchModel('gpt2', t)]));
const { server, origin } = await H.startServer(served);
const browser = await H.launchChromium();
const median = Ours.median;
try {
  for (const type of kTypes) {
    const sides = [];
    for (const [name, js, capture] of [['base', kBase, false], ['new', kEngine, kCapture]]) {
      const page = await browser.context.newPage();
      await page.goto(origin + '/');
      const loaded = await page.evaluate(Ours.loadEngines, { engineUrl: '/' + path.relative(kRoot, path.resolve(kRoot, js)),
        modelUrl: `/__model/${type}.gguf`, promptText, threads: [1], wasmSuffix: kSuffix });
      await page.evaluate(Ours.timedPrefills, { n: 2, tokens: kPromptTokens, capture });  // V8 tiers up
      console.log(`${type} ${name} (${js}, ${kBuild}${capture ? ', capture on' : ''}): ${loaded.info.simd}, ` +
          `int8 prefill ${loaded.info.int8_prefill}`);
      sides.push({ name, page, capture, tokS: [], decodeTokS: [] });
    }
    const ratios = [], decodeRatios = [];
    for (let r = 0; r < kRounds; ++r) {
      const order = r % 2 ? [...sides].reverse() : sides;
      for (const side of order) {
        const got = await side.page.evaluate(Ours.timedPrefills, { n: kPrefills, tokens: kPromptTokens, capture: side.capture, decode: kDecode });
        side.tokS.push(kPromptTokens / (median(got.ms) / 1e3));
        if (kDecode) side.decodeTokS.push(kDecode / (median(got.decodeMs) / 1e3));
      }
      ratios.push(sides[1].tokS[r] / sides[0].tokS[r]);
      if (kDecode) decodeRatios.push(sides[1].decodeTokS[r] / sides[0].decodeTokS[r]);
      console.log(`  round ${r + 1}: base ${sides[0].tokS[r].toFixed(1)}, new ${sides[1].tokS[r].toFixed(1)} tok/s (${ratios[r].toFixed(3)}x)` +
          (kDecode ? `; decode base ${sides[0].decodeTokS[r].toFixed(1)}, new ${sides[1].decodeTokS[r].toFixed(1)} (${decodeRatios[r].toFixed(3)}x)` : ''));
    }
    console.log(`${type} prefill, median of ${kRounds} rounds: base ${median(sides[0].tokS).toFixed(1)}, ` +
        `new ${median(sides[1].tokS).toFixed(1)} tok/s; new / base ${median(ratios).toFixed(3)}x`);
    if (kDecode) {
      console.log(`${type} decode (${kDecode} tokens), median of ${kRounds} rounds: base ${median(sides[0].decodeTokS).toFixed(1)}, ` +
          `new ${median(sides[1].decodeTokS).toFixed(1)} tok/s; new / base ${median(decodeRatios).toFixed(3)}x`);
    }
    for (const side of sides) await side.page.close();
  }
} finally {
  await browser.close();
  server.close();
}
