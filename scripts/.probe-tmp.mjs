import binaryen from 'binaryen';
const m = new binaryen.Module();
m.setFeatures(binaryen.Features.SIMD128 | binaryen.Features.RelaxedSIMD);
m.setMemory(1, 1, 'memory');
const v = (off) => m.v128.load(off, 1, m.i32.const(0));
const dot = (a, b, c) => binaryen._BinaryenSIMDTernary(m.ptr, binaryen.RelaxedDotI8x16I7x16AddSToVecI32x4, a, b, c);
m.addFunction('zero', binaryen.none, binaryen.none, [], m.v128.store(48, 1, m.i32.const(0), dot(v(0), v(16), m.v128.const(new Array(16).fill(0)))));
m.addFunction('frommem', binaryen.none, binaryen.none, [], m.v128.store(48, 1, m.i32.const(0), dot(v(0), v(16), v(32))));
m.addFunctionExport('zero', 'zero'); m.addFunctionExport('frommem', 'frommem');
if (!m.validate()) throw new Error('invalid');
const bytes = m.emitBinary();
const { instance } = await WebAssembly.instantiate(bytes);
const mem = new Uint8Array(instance.exports.memory.buffer);
mem.set([-128,-128,127,127, 1,2,3,4, 5,6,7,8, -9,-10,-11,-12].map(x => x & 255), 0);
mem.set([15,15,15,15, 1,1,1,1, 2,2,2,2, 100,100,100,100], 16);
for (const f of ['zero', 'frommem']) {
  for (let i = 0; i < 30000; ++i) instance.exports[f]();
  console.log(f, Array.from(new Int32Array(instance.exports.memory.buffer, 48, 4)));
}
console.log('exact [-15, 10, 52, -4200]');
