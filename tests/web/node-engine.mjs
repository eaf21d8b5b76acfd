// The page's engine (the same embind.cc) built for Node, apart from fixtures.mjs so that a child
// process running only the engine (wasm-run.mjs) does not load the browser drivers.
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

export const kNodeModule = path.resolve(path.dirname(fileURLToPath(import.meta.url)),
                                        '../../build/wasm/web/gpt2-engine-node.cjs');

// A fresh module of it (a fresh wasm heap). The wasm bytes are handed over: Node 20's global
// fetch would otherwise be tried on a file path (Emscripten 3.1.6). twin '-relaxed': its relaxed
// SIMD twin (scripts/relax-wasm.mjs), which Node 20 runs with --experimental-wasm-relaxed-simd.
export function nodeModule(twin = '') {
  const factory = createRequire(import.meta.url)(kNodeModule);
  return factory({wasmBinary: fs.readFileSync(kNodeModule.replace(/\.cjs$/, `${twin}.wasm`))});
}
