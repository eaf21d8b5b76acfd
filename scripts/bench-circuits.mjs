#!/usr/bin/env node
// The circuits lab's costs (issue "Circuits lab"), in prefills of the same tokens measured in the
// same process: our wasm engine under Node, one thread (the page's module, as bench-wasm-node.mjs),
// a GPT-2-small-shaped Q8_0 file with GPT-2's tokenizer. By CPU time (user + system), so time
// spent descheduled on a shared machine does not count.
//   head detection (detectHeads on `gpt2 heads`'s 50 default ids: 101 tokens)   target <= 2
//   path patching, every one of the 144 heads a sender to the logits, 16 tokens    target <= 80
//   the quantization lens against a Q4_0 twin on 16 tokens, less its lens windows  target <= 3
//
//   node --no-experimental-fetch scripts/bench-circuits.mjs [--runs 3]
import fs from 'node:fs';

import {arg, benchModel, cpuTimed, engineFactory, loadEngine, median, printMachine} from './node-engine.mjs';

const kRuns = Number(arg('runs', '3'));
const file = benchModel('gpt2');
printMachine();
const {engine, info} = await loadEngine(engineFactory(), fs.readFileSync(file));
// A prefill of n tokens, capture off (the unit).
const prefillMs = (ids) => median(Array.from({length: kRuns + 1}, () => {
  engine.reset();
  engine.setCapture(false);
  return cpuTimed(() => engine.prefill(ids)).ms;
}).slice(1));

// Head detection.
const headIds = Array.from(engine.defaultHeadIds());
const seq = [50256, ...headIds, ...headIds];
const unit101 = prefillMs(seq);
const heads = median(Array.from({length: kRuns}, () => cpuTimed(() => engine.detectHeads(headIds)).ms));
console.log(`head detection, ${seq.length} tokens: ${heads.toFixed(0)} CPU ms = ${(heads / unit101).toFixed(2)} prefills ` +
            `(${unit101.toFixed(0)} ms each; target <= 2)`);

// Path patching: 16 tokens, two of them changed in the corrupted prompt.
const clean = Array.from({length: 16}, (_, i) => 1000 + 37 * i);
const corrupted = clean.map((id, i) => (i === 5 || i === 11 ? id + 1 : id));
const unit16 = prefillMs(clean);
const sweep = median(Array.from({length: kRuns}, () => cpuTimed(() => {
  const {total} = engine.startPathPatch(clean, corrupted, 'logits', -1, -1, {});
  let done = 0;
  while (done < total) done = engine.continueJob();
  const cells = engine.jobResults(0);
  engine.endJob();
  if (cells.values.length !== info.n_layer * info.n_head) throw new Error(`${cells.values.length} cells`);
}).ms));
console.log(`path patching, ${info.n_layer * info.n_head} senders to the logits, 16 tokens: ${sweep.toFixed(0)} CPU ms = ` +
            `${(sweep / unit16).toFixed(1)} prefills (${unit16.toFixed(0)} ms each; target <= 80)`);

// The quantization lens: 2 runs, the two models' logit lenses over every block and position,
// and the loaded model's captured run; the lens windows are timed alone on the captured run.
engine.quantizeSecond('q4_0');
const lens = median(Array.from({length: kRuns}, () => cpuTimed(() => engine.compareSecond(clean)).ms));
engine.reset();
engine.setCapture(true);
engine.prefill(clean);
const windows = median(Array.from({length: kRuns}, () => cpuTimed(() => engine.logitLens(0, clean.length, 1, 0, info.n_layer)).ms));
engine.dropSecond();
console.log(`quantization lens against Q4_0, 16 tokens: ${lens.toFixed(0)} CPU ms = ${(lens / unit16).toFixed(1)} prefills; ` +
            `less two models' lens windows (${windows.toFixed(0)} ms each): ${((lens - 2 * windows) / unit16).toFixed(1)} ` +
            'prefills (target <= 3)');
engine.delete();
