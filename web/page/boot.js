// Starts the engine's Web Worker (worker/worker.js) as early as the page allows. index.html
// loads this module before app.js, so it runs as soon as the document is parsed, while app.js's
// ~20 modules are still being fetched (~300 ms of a cached reload): the wasm engine compiles
// meanwhile. Only when the page is already cross-origin isolated (a return visit under the
// service worker): otherwise isolation.js may still reload the page, and app.js starts the
// worker once that is settled. Messages the worker sends before app.js listens are kept.

// ?threads=N on the page's URL is passed on to the worker (it only matters when the page is
// cross-origin isolated; see worker.js), as is ?debug=1.
function engineWorkerUrl() {
  const params = new URLSearchParams(location.search);
  const url = new URL('../worker/worker.js', import.meta.url);
  if (params.get('threads')) url.searchParams.set('threads', params.get('threads'));
  if (params.get('debug')) url.searchParams.set('debug', '1');
  return url;
}

let started = null;
if (self.crossOriginIsolated) {
  const worker = new Worker(engineWorkerUrl(), {type: 'module'});
  const queued = [];
  worker.onmessage = worker.onerror = (event) => queued.push(event);
  started = {worker, queued};
}

// The engine's worker and the events (messages, errors) it sent before the caller set
// worker.onmessage and worker.onerror, to be handled first, in order. Call once.
export function startEngineWorker() {
  const s = started ?? {worker: new Worker(engineWorkerUrl(), {type: 'module'}), queued: []};
  started = null;
  return s;
}
