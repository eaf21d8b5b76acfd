// Linked into every engine module with --post-js (src/bindings/CMakeLists.txt). Engine's and
// Converter's methods report a C++ error by value (js_calls.h ErrorsByValue: a JS exception thrown
// through wasm frames would leak them); each is wrapped here, once the class is registered, to
// throw it as a JS Error after the wasm call has returned and cleaned up.
addOnPostRun(function () {
  for (const cls of ['Engine', 'Converter']) {
    const proto = Module[cls].prototype;
    const takeError = proto['takeError'];
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = proto[name];
      if (name === 'constructor' || name === 'takeError' || typeof method !== 'function') continue;
      proto[name] = function (...args) {
        const result = method.apply(this, args);
        const message = takeError.call(this);
        if (message) throw new Error(message);
        return result;
      };
    }
  }
});
