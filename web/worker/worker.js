// The Web Worker that owns the engine, so the page's thread never blocks: it starts the wasm
// module, loads models and swaps them, and hands every other message to its part, one at a
// time and in order. The messages are written down in protocol.js; the parts:
//   worker-load.js     download, Cache API copy, resume per part, manifests, local files
//   worker-convert.js  GPT-2 small from Hugging Face, converted to GGUF in the engine
//   worker-jobs.js     generation, inspection, experiments, sweeps, patching, attribution, export
//   worker-sae.js      sparse autoencoders: loaded (converted, cached) into the model, read
//   worker-graph.js    attribution graphs: transcoders loaded, the graph computed, checked
//   worker-under.js    which interventions the engine holds: set again before a request that
//                      carries others (the page's store owns them), the capture run again for reads
//
// Two builds of the engine: gpt2-engine.js (single-threaded, works everywhere) and
// gpt2-engine-mt.js (pthreads over a SharedArrayBuffer). Browsers only give a page
// SharedArrayBuffer when it is cross-origin isolated (served with COOP: same-origin and
// COEP: require-corp), so the threaded build is used exactly then. The thread count is
// min(navigator.hardwareConcurrency, 4) (more threads than cores only add contention; beyond 4
// the per-token matmuls of GPT-2 small are too short to split further), or the `threads`
// query parameter of this worker's URL (the page forwards its own ?threads=N).

import {ErrorKind, Msg, errorMessage} from '../shared/protocol.js';
import {startEngineModule} from './relaxed-simd.js';
import {createHfConverter} from './worker-convert.js';
import {createJobs} from './worker-jobs.js';
import {createGraph} from './worker-graph.js';
import {createDashboards} from './worker-dashboard.js';
import {createLoader} from './worker-load.js';
import {createSae} from './worker-sae.js';
import {createUnder} from './worker-under.js';

let Module = null;
let engine = null;  // serves the loaded model (the jobs hold it too, through attach)
let info = null;
let queue = Promise.resolve();

const post = (msg, transfer) => self.postMessage(msg, transfer || []);

// Lets queued messages (stop, inspect) run between tokens without the 4 ms clamp of nested
// setTimeout.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()?.();
function yieldToEvents() {
  return new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
}

const loader = createLoader({post});
const hfConverter = createHfConverter({post, yieldToEvents, loader});
let queuedCount = 0;  // messages in the queue, not yet started
// What the engine computes under, known to the jobs and the SAEs' part alike (the jobs attach it).
const under = createUnder();
const jobs = createJobs({post, yieldToEvents, busy: () => queuedCount > 0, under});
// The SAEs' downloads report their progress apart from the model's.
const saeLoader = createLoader({post: (m) => post(m.type === Msg.progress ? {...m, type: Msg.saeProgress} : m)});
const sae = createSae({post, yieldToEvents, loader: saeLoader, module: () => Module, under});
const graphLoader = createLoader({post: (m) => post(m.type === Msg.progress ? {...m, type: Msg.transcodersProgress} : m)});
const graph = createGraph({post, yieldToEvents, loader: graphLoader, module: () => Module, under});
const dashboards = createDashboards({post, yieldToEvents});

// ---- Start ----------------------------------------------------------------------------------

const kMaxDefaultThreads = 4;
const kMaxThreads = 16;
const isolated = self.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';

function chooseThreads() {
  if (!isolated) return 1;
  const asked = Number(new URL(self.location.href).searchParams.get('threads'));
  if (Number.isInteger(asked) && asked >= 1) return Math.min(asked, kMaxThreads);
  return Math.max(1, Math.min(navigator.hardwareConcurrency || 1, kMaxDefaultThreads));
}
let threads = chooseThreads();
// Seconds the threaded module may take to start (compile, and load its pthread workers, each
// of which fetches gpt2-engine-mt.worker.js) before the single-threaded one is used instead:
// a pthread worker that fails to load never settles the factory's promise.
const kThreadedStartSeconds = 30;

async function startThreaded() {
  // Dynamic import: a static one would fetch both builds. The threaded module's pthread
  // workers (gpt2-engine-mt.worker.js) import it again by a URL relative to themselves.
  // A pthread worker whose script is missing fails silently (the factory just never resolves),
  // so check the likeliest cause, a host given only part of the site, up front; both requests
  // at once (each is a round trip through the service worker).
  const [{default: createGpt2Engine}, probe] = await Promise.all([
    import('./gpt2-engine-mt.js'), fetch(new URL('./gpt2-engine-mt.worker.js', import.meta.url))]);
  if (!probe.ok) throw new Error(`gpt2-engine-mt.worker.js: ${probe.status} ${probe.statusText}`.trim());
  let timer;
  const timedOut = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`it did not start within ${kThreadedStartSeconds} s`)),
                       kThreadedStartSeconds * 1000);
  });
  // gpt2PoolSize: Web Workers made before the module starts (see src/bindings/CMakeLists.txt);
  // the calling thread is the first of `threads`. At least one, since 0 means "default".
  try {
    return await Promise.race([startEngineModule(createGpt2Engine, {gpt2PoolSize: Math.max(1, threads - 1)}),
                               timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

async function init() {
  try {
    let note = '';
    let started = null;
    if (isolated) {
      try {
        started = await startThreaded();
      } catch (e) {
        // Still a working page: fall back to one thread and say why.
        note = 'the threaded engine could not start: ' + errorMessage(e);
        console.warn('gpt2 worker: ' + note + '; using the single-threaded engine');
        threads = 1;
      }
    }
    if (!started) started = await startEngineModule((await import('./gpt2-engine.js')).default);
    Module = started.Module;
    engine = new Module.Engine();
    jobs.attach(engine, null);
    post({type: Msg.ready, threads, isolated, note, relaxed: started.relaxed, relaxedError: started.relaxedError});
  } catch (e) {
    post({type: Msg.error, kind: ErrorKind.load, message: 'The WebAssembly engine could not start: ' + errorMessage(e) +
          ' (this page needs a browser with WebAssembly SIMD, e.g. Chrome 91+, Firefox 89+, Safari 16.4+).'});
  }
}
const ready = init();
// With the page's ?debug=1, tests read the wasm module's memory from here (a Playwright worker
// handle evaluates in this global scope; Module itself is this module's private binding).
if (new URL(self.location.href).searchParams.get('debug')) {
  self.gpt2Debug = {memoryStats: () => Module?.memoryStats()};
}

// ---- Loading a model, swapping it for the previous one ------------------------------------------

// Turns the engine's messages into what a person can act on, keeping the engine's detail.
function explainLoadError(e) {
  const m = errorMessage(e);
  if (/magic|not a gguf/i.test(m)) return `This is not a GGUF model file (${m}).`;
  if (/tensor type|has type/i.test(m)) return `The model uses a tensor type this page does not support ` +
      `(it supports f32, f16, q8_0 and q4_0): ${m}`;
  if (/out of bounds|truncated|past the end|incomplete|extends beyond|outside the file/i.test(m)) {
    return `The model file is damaged or incomplete (${m}). Download it again or clear the cache.`;
  }
  return m;
}

// Each load goes into a fresh Engine; the one serving the current model is replaced only when
// the new file has loaded, so a failed load leaves the previous model loaded and usable. Two
// models fit in wasm memory side by side only while they are small: above this the previous
// one is freed first (and a failure then leaves none). The threaded module has just enough
// pthreads for one Session's ThreadPool, so there the previous model is always freed first.
const kKeepPreviousBytes = 512 * 1024 * 1024;
const keepPrevious = (total) => threads === 1 && info && info.file_bytes + total <= kKeepPreviousBytes;
let modelSource = null;  // {source, name} of the loaded model, to show it again after a failure

// Frees the loaded model first when it and `total` more bytes would not fit side by side.
function makeRoom(total) {
  if (info && !keepPrevious(total)) {
    jobs.detach();
    engine.delete();
    engine = new Module.Engine();
    info = null;
    jobs.attach(engine, null);
    sae.attach(engine, null);
    graph.attach(engine, null);
    dashboards.attach(engine, null);
  }
}

async function handleLoad(msg) {
  let target = null;
  try {
    await ready;
    if (!Module) return;
    jobs.dropSecond();  // the quantization lens's twin of the current model
    target = new Module.Engine();
    const beginLoad = target.beginLoad.bind(target);
    target.beginLoad = (total) => {  // the size is known only here
      makeRoom(total);
      beginLoad(total);
    };
    const loaded = msg.type === Msg.getGpt2
        ? await hfConverter.getGpt2(msg.hf, msg.weights, target, {Converter: Module.Converter, threads, makeRoom, id: msg.model})
        : msg.file ? await loader.loadFromFile(msg.file, target, threads) : await loader.loadFromUrl(msg.url, target, threads);
    jobs.detach();
    engine.delete();
    engine = target;
    target = null;
    info = loaded.info;
    modelSource = {source: loaded.source, name: loaded.name};
    jobs.attach(engine, info);
    sae.attach(engine, info);
    graph.attach(engine, info);
    // The model as a dashboard's file names it: the file's name (`gpt2 dashboard`'s --model).
    const fileName = loaded.name || decodeURIComponent(new URL(msg.url || msg.model || 'model', location.href)
        .pathname.split('/').pop());
    dashboards.attach(engine, info, fileName);
    jobs.warmUp();
    // The module's memory never shrinks, so its size here is the most the load (a conversion
    // included) has used.
    post({type: Msg.model, info, source: loaded.source, name: loaded.name, cacheWarning: loaded.note,
          storing: !!loaded.store, memoryBytes: Module.HEAP8.buffer.byteLength});
    if (loaded.store) storeInBackground(loaded.store);
  } catch (e) {
    post({type: Msg.error, kind: ErrorKind.load, message: explainLoadError(e)});
    // The page forgets its model on a load error; the worker still has it: say so.
    if (info) post({type: Msg.model, info, ...modelSource, restored: true});
  } finally {
    target?.delete();
  }
}

// ---- The cache ----------------------------------------------------------------------------------

// A converted model is written into the cache while the queue goes on (the writes one after the
// other); 'cache' with stored: true says when it is there, an 'error' of kind cache when it failed.
let storing = Promise.resolve();
function storeInBackground(store) {
  storing = storing.then(store).then(async (warning) => {
    if (warning) post({type: Msg.error, kind: ErrorKind.cache, message: warning});
    post({type: Msg.cache, stored: !warning, ...(await loader.cacheSummary())});
  }).catch(() => {});
}

async function handleClearCache() {
  try {
    await storing;  // else a write under way would put its model back after the clear
    await loader.clearCache();
    post({type: Msg.cache, cleared: true, ...(await loader.cacheSummary())});
  } catch (e) {
    post({type: Msg.error, kind: ErrorKind.cache, message: 'Could not clear the cache: ' + errorMessage(e)});
  }
}

// ---- Dispatch ---------------------------------------------------------------------------------

// Handled the moment they arrive, even while a job runs.
const immediate = {
  [Msg.stop]: () => jobs.stop(),
  [Msg.cancelJob]: () => { jobs.cancel(); graph.cancel(); dashboards.cancel(); },
  [Msg.cacheInfo]: () => loader.cacheSummary().then((s) => post({type: Msg.cache, ...s})),
};

// Run one at a time, in order, once the engine has started.
const queued = {
  [Msg.load]: handleLoad,
  [Msg.getGpt2]: handleLoad,
  [Msg.clearCache]: handleClearCache,
  [Msg.generate]: jobs.generate,
  [Msg.inspect]: jobs.inspect,
  [Msg.attentionMap]: jobs.attentionMap,
  [Msg.experiment]: jobs.experiment,
  [Msg.headSweep]: jobs.headSweep,
  [Msg.patching]: jobs.patching,
  [Msg.pathPatch]: jobs.pathPatch,
  [Msg.pathPatchPaths]: jobs.pathPatchPaths,
  [Msg.attribute]: jobs.attribute,
  [Msg.saliency]: jobs.saliency,
  [Msg.atp]: jobs.atp,
  [Msg.scoreSaliency]: jobs.scoreSaliency,
  [Msg.atpExact]: jobs.atpExact,
  [Msg.exportBlock]: jobs.exportBlock,
  [Msg.heads]: jobs.heads,
  [Msg.quantLens]: jobs.quantLens,
  [Msg.saeLoad]: sae.load,
  [Msg.saeDrop]: sae.drop,
  [Msg.saeFeatures]: sae.features,
  [Msg.saeStrip]: sae.strip,
  [Msg.transcodersLoad]: graph.load,
  [Msg.transcodersDrop]: graph.drop,
  [Msg.graphCompute]: graph.compute,
  [Msg.graphCheck]: graph.check,
  [Msg.graphCard]: graph.card,
  [Msg.graphQk]: graph.qk,
  [Msg.dashboard]: dashboards.compute,
};

// Messages that only read the captured run: the logit lens window they interrupt stays valid.
const readsCapture = new Set([Msg.inspect, Msg.attentionMap, Msg.exportBlock]);

self.onmessage = (event) => {
  const msg = event.data;
  if (Object.hasOwn(immediate, msg.type)) {
    immediate[msg.type]();
    return;
  }
  // A cancel sent after a job's message (even before the job starts) cancels it.
  if ([Msg.headSweep, Msg.patching, Msg.pathPatch, Msg.pathPatchPaths].includes(msg.type)) jobs.clearCancel();
  if ([Msg.graphCompute, Msg.transcodersLoad].includes(msg.type)) graph.clearCancel();
  if (msg.type === Msg.dashboard) dashboards.clearCancel();
  const handler = Object.hasOwn(queued, msg.type) ? queued[msg.type] : null;
  ++queuedCount;
  queue = queue.then(async () => {
    --queuedCount;
    await ready;
    if (!engine || !handler) return;
    if (!readsCapture.has(msg.type)) jobs.dropBackground();
    await handler(msg);
    if (queuedCount === 0) await jobs.background();
  });
};
