#!/usr/bin/env node
// Usage: node scripts/relax-wasm.mjs [--inline-only] [--named] <module.wasm>
//
// Gives a linked engine module its relaxed SIMD twin (src/kernels/relaxed_simd.h says why this
// is done after linking). The kernels call marker functions, exported under the names below;
// this replaces each marker's body with the instruction it stands for and inlines it into
// every caller, writing
//   <module>.wasm          plain SIMD128 (a multiply and an add), for every browser;
//   <module>-relaxed.wasm  f32x4.relaxed_madd, for browsers that validate relaxed SIMD.
// Everything else in the module is left as Emscripten wrote it, apart from what binaryen's
// inliner optimizes in the functions it inlines into. A module with no markers (one that does
// not link the kernels) is left alone.
//
// --inline-only (the test modules): inline the markers without then optimizing the functions
// they went into. Binaryen's optimizing inliner re-optimizes every function it inlines anything
// into, and over the whole test module (linked at -O1, so full of small calls) that took 37 s
// of each of the two passes, the slowest step of the WebAssembly build. Without it the twin
// computes the same (each marker is still one instruction over its arguments); the branch a
// gpt2_wasm_relaxed() picks is then folded by the browser's compiler instead.
//
// --named: also write <module>-named.wasm and <module>-relaxed-named.wasm, the same code with
// the link's function names kept, for a profiler to name the kernels (scripts/bench-profile.mjs);
// the site never ships them.
import fs from 'node:fs';
import binaryen from 'binaryen';

// name -> (module, params as locals) => [plain body, relaxed body]
const MARKERS = {
  gpt2_wasm_madd: (m, a, b, c) => [
    m.f32x4.add(m.f32x4.mul(a, b), c),
    binaryen._BinaryenSIMDTernary(m.ptr, binaryen.RelaxedMaddVecF32x4, a, b, c),
  ],
  gpt2_wasm_dot_i8x16_i7x16_add: (m, a, b, c) => [
    dotI8Signed(m),
    binaryen._BinaryenSIMDTernary(m.ptr, binaryen.RelaxedDotI8x16I7x16AddSToVecI32x4, a, b, c),
  ],
  gpt2_wasm_relaxed: (m) => [m.i32.const(0), m.i32.const(1)],
};

// Markers whose plain body is more than the inliner takes (setAlwaysInlineMaxSize below), and
// which the plain module never runs: the kernels call them only where gpt2_wasm_relaxed() is 1.
const OUT_OF_LINE_WHEN_PLAIN = new Set(['gpt2_wasm_dot_i8x16_i7x16_add']);

// The plain body of gpt2_wasm_dot_i8x16_i7x16_add (params a, b, c): c + each 4-byte group's dot,
// b signed, exact: the bytes widened to int16, their pair dots, and each two adjacent pair dots
// added by picking the even and the odd lanes of the low and high halves' results.
function dotI8Signed(m) {
  const v = (i) => m.local.get(i, binaryen.v128);
  const pairs = (half) => m.i32x4.dot_i16x8_s(m.i16x8[`extend_${half}_i8x16_s`](v(0)),
                                              m.i16x8[`extend_${half}_i8x16_s`](v(1)));
  const lanes = (first) => [0, 1, 2, 3].flatMap((l) => {
    const lane = first + 2 * l;  // of the 8 int32 lanes of [low, high]
    return [0, 1, 2, 3].map((byte) => 4 * lane + byte);
  });
  const pick = (first) => m.i8x16.shuffle(pairs('low'), pairs('high'), lanes(first));
  return m.i32x4.add(v(2), m.i32x4.add(pick(0), pick(1)));
}

const FEATURES = binaryen.Features.MVP | binaryen.Features.Atomics |
  binaryen.Features.MutableGlobals | binaryen.Features.NontrappingFPToInt |
  binaryen.Features.SIMD128 | binaryen.Features.BulkMemory | binaryen.Features.BulkMemoryOpt |
  binaryen.Features.SignExt;

// The transformed module's bytes: [without names, with names] (the second only if `named`).
function transform(bytes, relaxed, optimize, named) {
  const m = binaryen.readBinary(bytes);
  m.setFeatures(FEATURES | (relaxed ? binaryen.Features.RelaxedSIMD : 0));
  const names = [];
  for (const [name, bodies] of Object.entries(MARKERS)) {
    const fn = m.getFunction(name);
    if (!fn) continue;
    names.push(name);
    const info = binaryen.getFunctionInfo(fn);
    const params = binaryen.expandType(info.params);
    const args = params.map((type, i) => m.local.get(i, type));
    const body = bodies(m, ...args)[relaxed ? 1 : 0];
    for (let i = m.getNumExports() - 1; i >= 0; i--) {
      const exp = binaryen.getExportInfo(m.getExportByIndex(i));
      if (exp.kind === binaryen.ExternalFunction && exp.value === name) m.removeExport(exp.name);
    }
    m.removeFunction(name);
    m.addFunction(name, info.params, info.results, [], body);
  }
  if (names.length === 0) return null;
  if (names.length !== Object.keys(MARKERS).length) {
    throw new Error(`only ${names.length} of ${Object.keys(MARKERS).length} markers found`);
  }
  // Each marker is now one instruction over its parameters; inline all of them.
  binaryen.setOptimizeLevel(3);
  binaryen.setShrinkLevel(0);
  binaryen.setAlwaysInlineMaxSize(8);
  m.runPasses([optimize ? 'inlining-optimizing' : 'inlining', 'remove-unused-module-elements']);
  for (const name of names) {
    // A marker still in the module was not inlined somewhere: that call would cost more than
    // the instruction it stands for.
    if (m.getFunction(name) && (relaxed || !OUT_OF_LINE_WHEN_PLAIN.has(name))) {
      throw new Error(`${name} is still called after inlining`);
    }
  }
  if (!m.validate()) throw new Error('binaryen rejects the transformed module');
  binaryen.setDebugInfo(false);
  const out = [m.emitBinary()];
  if (named) {
    binaryen.setDebugInfo(true);
    out.push(m.emitBinary());
    binaryen.setDebugInfo(false);
  }
  m.dispose();
  return out;
}

const args = process.argv.slice(2);
const optimize = !args.includes('--inline-only');
const named = args.includes('--named');
const paths = args.filter((a) => !['--inline-only', '--named'].includes(a));
const path = paths[0];
if (paths.length !== 1 || !path.endsWith('.wasm')) {
  console.error('usage: node scripts/relax-wasm.mjs [--inline-only] [--named] <module.wasm>');
  process.exit(2);
}
const bytes = fs.readFileSync(path);
const relaxed = transform(bytes, true, optimize, named);
if (relaxed === null) process.exit(0);
const plain = transform(bytes, false, optimize, named);
const base = path.replace(/\.wasm$/, '');
fs.writeFileSync(`${base}-relaxed.wasm`, relaxed[0]);
fs.writeFileSync(path, plain[0]);
if (named) {
  fs.writeFileSync(`${base}-named.wasm`, plain[1]);
  fs.writeFileSync(`${base}-relaxed-named.wasm`, relaxed[1]);
}
