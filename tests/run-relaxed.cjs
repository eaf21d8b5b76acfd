// Runs an Emscripten test program (a non-modular build, e.g. build/wasm/gpt2_tests.js) on its
// relaxed SIMD twin (<name>-relaxed.wasm; scripts/relax-wasm.mjs) instead of its plain module:
//   node --experimental-wasm-relaxed-simd tests/run-relaxed.cjs build/wasm/gpt2_tests.js [args]
// (Node 20 has relaxed SIMD behind that flag.) Such a program names its module in its own code
// and takes no options from outside, so this runs its code with the name changed.
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const [script, ...args] = process.argv.slice(2);
if (!script) {
  console.error('usage: node --experimental-wasm-relaxed-simd tests/run-relaxed.cjs <program.js> [args]');
  process.exit(2);
}
const file = path.resolve(script);
const name = path.basename(file, '.js');
const source = fs.readFileSync(file, 'utf8');
const relaxed = source.split(`"${name}.wasm"`).join(`"${name}-relaxed.wasm"`);
if (relaxed === source) throw new Error(`${script} does not name ${name}.wasm`);
process.argv = [process.argv[0], file, ...args];  // as if run directly
const program = vm.runInThisContext(
    `(function (exports, require, module, __filename, __dirname) {${relaxed}\n})`, {filename: file});
program(module.exports, require, module, file, path.dirname(file));
