// Linked into every engine module with --post-js (src/bindings/CMakeLists.txt). The methods of
// Engine and Converter report a C++ error by value: the call returns normally and the message
// waits in takeError()
// (see ErrorsByValue in embind.cc; a JS exception thrown through wasm frames would leak them).
// Here each method is wrapped once the runtime has registered the class, so every caller (the
// page's worker, the Node tests, the bench) still gets the same JS Error as before, now thrown
// from JavaScript after the wasm call has returned and cleaned up.
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
