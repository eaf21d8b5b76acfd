// The page's in-engine conversion (Module.Converter, src/bindings/embind.cc over
// convert/convert.h) against the native gpt2-convert on the same checkpoint: byte-equal
// GGUF files for every type the page offers, clear errors for bad input, and the wasm heap's
// peak while converting a checkpoint laid out like GPT-2 small (548 MB) under the 1.2 GB.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {before, describe, test} from 'node:test';
import {kRoot} from './browser.mjs';
import {makeCheckpoint} from './fake-hf.mjs';
import {kNative, kNodeModule, modelDir, nodeModule} from './fixtures.mjs';

const kConvert = path.join(kNative, 'gpt2-convert');
const skip = (!fs.existsSync(kNodeModule) && 'build/wasm not built') ||
             (!fs.existsSync(kConvert) && 'build/native not built');
const kPeakLimit = 1.2e9;  // bytes of wasm memory, the bound

// A fresh module per checkpoint: wasm memory never shrinks, so the heap's size after a
// conversion is its peak during it.
const loadModule = nodeModule;

function writeCheckpoint(dir, files) {
  fs.mkdirSync(dir, {recursive: true});
  for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), bytes);
}

function nativeConvert(dir, type) {
  const out = path.join(dir, `native-${type}.gguf`);
  execFileSync(kConvert, ['--input', dir, '--output', out, '--type', type, '--quiet']);
  return fs.readFileSync(out);
}

// Feeds the files to a Converter in uneven chunks, as a download delivers them.
// replanFrom: plan() with that type first, then again with `type` (the second replaces the first).
function convertInWasm(Module, files, type, replanFrom) {
  const c = new Module.Converter();
  try {
    c.setConfig(files['config.json'].toString('utf8'));
    c.setVocabulary(files['vocab.json'].toString('utf8'), files['merges.txt'].toString('utf8'));
    const st = files['model.safetensors'];
    c.beginCheckpoint(st.length);
    for (let i = 0, n = 1000; i < st.length; i += n, n = Math.min(n * 3 + 7, 16 << 20)) {
      c.appendChunk(st.subarray(i, i + n));
    }
    if (replanFrom) c.plan(replanFrom);
    const plan = c.plan(type);
    let done = 0;
    while (done < plan.tensors) done = c.convertNext();
    return {plan, gguf: c.takeOutput()};
  } finally {
    c.delete();
  }
}

describe('in-engine conversion (Module.Converter)', {skip}, () => {
  let Module, files, dir;
  before(async () => {
    Module = await loadModule();
    files = makeCheckpoint(kRoot);
    dir = path.join(modelDir('convert-embind'), 'small');
    writeCheckpoint(dir, files);
  });

  for (const type of ['q8_0', 'q4_0', 'f16']) {
    test(`${type}: the same bytes as gpt2-convert`, () => {
      const {plan, gguf} = convertInWasm(Module, files, type);
      const native = nativeConvert(dir, type);
      assert.equal(plan.bytes, native.length);
      assert.equal(plan.tensors, 16);
      assert.equal(plan.name, '');  // not GPT-2 small's shape: no general.name
      assert.ok(Buffer.from(gguf).equals(native), `wasm ${gguf.length} bytes vs native ${native.length}`);
    });
  }

  test('a second plan() replaces the first', () => {
    const {gguf} = convertInWasm(Module, files, 'q8_0', 'f16');
    assert.ok(Buffer.from(gguf).equals(nativeConvert(dir, 'q8_0')));
  });

  test('bad input gives clear errors, never a trap', () => {
    const c = new Module.Converter();
    try {
      assert.throws(() => c.plan('q8_0'), /plan needs setConfig and setVocabulary first/);
      assert.throws(() => c.setConfig('{"model_type": "llama"}'), /model_type is not "gpt2"/);
      c.setConfig(files['config.json'].toString('utf8'));
      assert.throws(() => c.setVocabulary('[1, 2]', ''), /not an object mapping token strings to ids/);
      c.setVocabulary(files['vocab.json'].toString('utf8'), files['merges.txt'].toString('utf8'));
      assert.throws(() => c.appendChunk(new Uint8Array(4)), /appendChunk called before beginCheckpoint/);
      assert.throws(() => c.beginCheckpoint(5e9), /limited to 4 GB/);
      const st = files['model.safetensors'];
      c.beginCheckpoint(st.length);
      c.appendChunk(st.subarray(0, 1000));
      assert.throws(() => c.plan('q8_0'), /incomplete: received 1000 of \d+ bytes/);
      assert.throws(() => c.appendChunk(new Uint8Array(st.length)), /larger than announced/);
      c.appendChunk(st.subarray(1000));
      assert.throws(() => c.plan('q5_1'), /unknown output type 'q5_1'/);
      // A checkpoint that does not fit its config.json: one block too many in the config.
      c.setConfig(files['config.json'].toString('utf8').replace('"n_layer": 1', '"n_layer": 2'));
      assert.throws(() => c.plan('q8_0'), /missing tensor 'h\.1\.ln_1\.weight'/);
      assert.throws(() => c.convertNext(), /convertNext called before plan/);
      // Damaged bytes: a header length past the end of the file.
      c.setConfig(files['config.json'].toString('utf8'));
      const damaged = Buffer.from(st);
      damaged.writeBigUInt64LE(BigInt(st.length * 2));
      c.beginCheckpoint(damaged.length);
      c.appendChunk(damaged);
      assert.throws(() => c.plan('q8_0'), /model\.safetensors/);
    } finally {
      c.delete();
    }
  });
});

// GPT-2 small's layout: 12 blocks, width 768, 1024 positions, the 50257-token vocabulary and
// the real file's causal-mask buffers; 548 MB of safetensors. F16, the largest output the page
// offers, is the worst case for the heap.
describe('conversion of a GPT-2-small-shaped checkpoint', {skip}, () => {
  test('byte-equal to gpt2-convert, named "GPT-2 small", wasm heap under 1.2 GB', async () => {
    const files = makeCheckpoint(kRoot, {nLayer: 12, nEmbd: 768, nHead: 12, nCtx: 1024, masks: true});
    const dir = path.join(modelDir('convert-embind'), 'gpt2-small');
    writeCheckpoint(dir, files);
    const Module = await loadModule();
    const {plan, gguf} = convertInWasm(Module, files, 'f16');
    const peak = Module.HEAP8.buffer.byteLength;
    console.log(`GPT-2-small-shaped checkpoint (${files['model.safetensors'].length} bytes) -> ` +
                `f16 GGUF (${gguf.length} bytes): wasm heap peak ${(peak / 2 ** 20).toFixed(0)} MiB`);
    assert.ok(peak < kPeakLimit, `wasm heap reached ${peak} bytes`);
    assert.equal(plan.name, 'GPT-2 small');
    assert.equal(plan.tensors, 2 + 12 * 12 + 2);
    const native = nativeConvert(dir, 'f16');
    assert.ok(Buffer.from(gguf).equals(native), `wasm ${gguf.length} bytes vs native ${native.length}`);
    fs.rmSync(dir, {recursive: true, force: true});
  });
});
