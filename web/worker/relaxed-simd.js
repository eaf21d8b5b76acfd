// Which build of an engine module to start: its relaxed SIMD twin (gpt2-engine-relaxed.wasm and
// gpt2-engine-mt-relaxed.wasm: f32 prompts through FMA; scripts/relax-wasm.mjs makes them) where
// this browser has relaxed SIMD, else the plain one. Used by worker.js and scripts/bench-ours.mjs.

// A module whose one function is f32x4.relaxed_madd: valid only where relaxed SIMD is.
const kProbe = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 123, 1, 123, 3, 2, 1, 0,
  10, 13, 1, 11, 0, 32, 0, 32, 0, 32, 0, 253, 133, 2, 11]);

export const hasRelaxedSimd = (() => {
  try { return WebAssembly.validate(kProbe); } catch { return false; }
})();

// Starts an Emscripten module factory with `options`, on the relaxed twin where there is relaxed
// SIMD; if that fails (a host given only part of the site, say), on the plain build, so the
// page still works. Resolves to {Module, relaxed, relaxedError}: relaxedError says why the twin
// did not start, if it was tried (f32 prompts then run at about 0.6x, so the page says so).
export async function startEngineModule(create, options = {}) {
  if (hasRelaxedSimd) {
    try {
      const locateFile = (file, dir) => dir + file.replace(/\.wasm$/, '-relaxed.wasm');
      return {Module: await create({...options, locateFile}), relaxed: true, relaxedError: ''};
    } catch (e) {
      const relaxedError = String(e?.message ?? e);
      console.warn(`gpt2: the relaxed SIMD engine could not start (${relaxedError}); using the plain one`);
      return {Module: await create(options), relaxed: false, relaxedError};
    }
  }
  return {Module: await create(options), relaxed: false, relaxedError: ''};
}
