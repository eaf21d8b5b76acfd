// The Web Worker that owns the engine: downloads (with the Cache API), loads, generates and
// reads activations, so the page's thread never blocks. Protocol (all messages are objects with
// a `type`):
//   page -> worker
//     {type:'load', url}             a .gguf URL, or a .json manifest {"parts":[...],"size":N}
//     {type:'load', file}            a File from <input type=file> or drag and drop
//     {type:'get-gpt2', hf, weights}   GPT-2 small from Hugging Face: the cached conversion if there
//                                    is one, else model.safetensors, config.json, vocab.json and
//                                    merges.txt from hf/openai-community/gpt2/resolve/main/<file>,
//                                    converted to `weights` ('q8_0' | 'q4_0' | 'f16') by the
//                                    engine's Converter (gpt2-convert's code) and cached as a GGUF
//     {type:'generate', prompt, temperature, topK, topP, seed, maxTokens, capture, interventions}
//                                    interventions: engine.setInterventions's spec (src/bindings/
//                                    embind.cc), applied to this and every later run; {} = plain;
//                                    meanAblation: knocked-out heads take their mean output over
//                                    the prompt in the plain model (promptHeadMeans)
//     {type:'experiment', interventions, position, prompt, temperature, topK, topP, seed, maxTokens}
//                                    "Run again": the plain and the intervened model side by side
//                                    at `position` and in the text they generate with the same seed;
//                                    the capture is left holding the intervened conversation
//     {type:'stop'}
//     {type:'inspect', position, layer, head, lens}   activations for the token at `position`
//     {type:'head-sweep', position, target, interventions}  "which heads matter": knock out each
//                                    head in turn (plain model otherwise; zeroed, or with
//                                    interventions.meanAblation replaced by its mean over the prompt)
//                                    and measure the target's log-probability at `position`;
//                                    interventions: restored after
//     {type:'patching', clean, corrupted, interventions}  activation patching: two prompts of the same
//                                    token length; the clean stream entering each block at each
//                                    position patched into the corrupted run, one at a time
//     {type:'cancel-job'}            cancels a head sweep or patching job: received at once, it stops
//                                    the job after the engine call running (about 4 prefills of work)
//     {type:'export', layer}         the chosen block's captured tensors, by TransformerLens names
//     {type:'attribute', position, target, interventions}  direct logit attribution of the
//                                    conversation at `position` for `target` (re-runs it)
//     {type:'attention-map', layer, head}  one head's full [P, P] attention
//     {type:'clear-cache'}
//   worker -> page
//     {type:'ready', threads, isolated, note, relaxed}  the wasm module is compiled; threads the
//                                                    kernels will use, isolated: the page is
//                                                    cross-origin isolated (so threads are possible);
//                                                    note: why threads are off although isolated;
//                                                    relaxed: the relaxed SIMD build runs
//     {type:'progress', phase, loaded, total, file}  phase: 'download' | 'cache' | 'file' | 'parse' |
//                                                    'convert' (loaded/total: tensors); file: the
//                                                    Hugging Face file being downloaded, if any
//     {type:'model', info, source}                   source: 'network' | 'cache' | 'file' | 'hf'
//                                                    ('hf': downloaded from Hugging Face and converted)
//     {type:'prompt', ids, pieces}                   the prompt's tokens
//     {type:'token', id, text, index}                one sampled token (text: decoded UTF-8 so far)
//     {type:'stats', promptTokens, prefillMs, blockMs, generated, tokensPerSecond, reason}
//                                                    blockMs: Float64Array [n_layer], each block's
//                                                    measured time in the prefill (engine.blockTimes)
//     {type:'activations', ...}                      see Inspect()
//     {type:'attention-map', layer, head, positions, map}
//     {type:'lens-start', begin, end}; {type:'lens', begin, end, topK, nLayer, ids, probs, pieces}
//     {type:'experiment', position, nLayer, fromBlock, kl, before: {ids, probs}, after: {ids,
//       probs, probsBefore}, text: {before: ids, after: ids}, pieces: {id: text}}
//                                                    top 10 at position before and after (probsBefore:
//                                                    the plain model's probability of each after id),
//                                                    KL(before || after) over the whole vocabulary
//     {type:'sweep-progress', done, total}
//     {type:'sweep', position, target, base, heads: [{layer, head, logProb, drop}], done, total,
//       cancelled, ms}                               base: the plain model's log-probability; heads
//                                                    ranked by drop = base - logProb, largest first;
//                                                    ms: the job's time in the worker
//     {type:'export', layer, tensors: [{name, shape, data: Float32Array}]}  shapes with TransformerLens's
//                                                    batch dimension of 1 (e.g. [1, n_head, P, P])
//     {type:'patching-progress', done, total}
//     {type:'patching', nLayer, positions, answer, other, pieces, cleanDiff, corruptedDiff,
//       recovered: Float32Array [nLayer, positions], done, total, cancelled, ms}
//                                                    answer/other: the clean and the corrupted run's
//                                                    top token; diff = log p(answer) - log p(other)
//                                                    (the logit difference); recovered: the share of
//                                                    the clean difference a patch brings back
//     {type:'attribution', position, target, names, values: Float64Array, logit}
//                                                    names in `gpt2 attribute`'s order
//     {type:'cache', entries, bytes}                 after clear-cache / on request
//     {type:'error', kind, message}                  kind: 'load' | 'generate' | 'inspect' | 'cache' |
//                                                    'experiment' | 'sweep' | 'export' | 'attribute' |
//                                                    'patching'
//
// Two builds of the engine: gpt2-engine.js (single-threaded, works everywhere) and
// gpt2-engine-mt.js (pthreads over a SharedArrayBuffer). Browsers only give a page
// SharedArrayBuffer when it is cross-origin isolated (served with COOP: same-origin and
// COEP: require-corp), so the threaded build is used exactly then. The thread count is
// min(navigator.hardwareConcurrency, 4) (more threads than cores only add contention; beyond 4
// the per-token matmuls of GPT-2 small are too short to split further), or the `threads`
// query parameter of this worker's URL (the page forwards its own ?threads=N).

import {hfCacheKey, hfFileUrl, kHfWeights} from './hf.js';
import {startEngineModule} from './relaxed-simd.js';

const kCacheName = 'gpt2-models-v1';
const kEndOfText = 50256;
// The logit lens costs n_layer * positions * n_embd * n_vocab multiply-adds; keep a window
// around ~3e9 (a few seconds of wasm SIMD) and at most this many positions.
const kLensBudget = 3e9;
const kLensMaxPositions = 64;

let Module = null;
let engine = null;
let info = null;
let busy = false;           // a load or generation is running
let stopRequested = false;
let cancelJob = false;      // a head sweep or patching job is to stop
let lastTokens = [];        // prompt + generated ids of the last generation
let lastPrompt = [];        // the prompt ids of the last generation
let conversation = [];      // the ids the engine has run (and captured) of the last generation
let queue = Promise.resolve();

const post = (msg, transfer) => self.postMessage(msg, transfer || []);

function errorMessage(e) {
  return (e && e.message) ? e.message : String(e);
}

// Lets queued messages (stop, inspect) run between tokens without the 4 ms clamp of nested
// setTimeout.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()?.();
function yieldToEvents() {
  return new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
}

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
    post({type: 'ready', threads, isolated, note, relaxed: started.relaxed});
  } catch (e) {
    post({type: 'error', kind: 'load', message: 'The WebAssembly engine could not start: ' + errorMessage(e) +
          ' (this page needs a browser with WebAssembly SIMD, e.g. Chrome 91+, Firefox 89+, Safari 16.4+).'});
  }
}
const ready = init();
// With the page's ?debug=1, tests read the wasm module's memory from here (a Playwright worker
// handle evaluates in this global scope; Module itself is this module's private binding).
if (new URL(self.location.href).searchParams.get('debug')) {
  self.gpt2Debug = {memoryStats: () => Module?.memoryStats()};
}

// ---- Loading --------------------------------------------------------------------------------

function describeFetchError(url, e) {
  return `Could not download the model from ${url}: the address is unreachable ` +
         `(${errorMessage(e)}). Check the URL and your connection.`;
}

async function openCache() {
  try { return await caches.open(kCacheName); } catch { return null; }  // e.g. not a secure context
}

// Times a dropped connection is picked up again with an HTTP Range request, per file.
const kMaxResumes = 3;

// Bodies are read into one reused buffer where the stream allows it (a byte stream's BYOB
// reader, as fetch, Cache API and File bodies are in current browsers), else chunk by chunk.
// Each chunk of a default reader is fresh memory that the OS maps in page by page, and on some
// machines that costs more than the copy: a 137 MB model from the Cache API took 550-700 ms in
// fresh chunks and 170-180 ms into one reused 8 MB buffer (Chromium 156, 2026-12-02).
const kReadBufferBytes = 8 << 20;
let spareReadBuffer = null;  // kept between loads: mapping it in again would cost the same

// A reader whose read() resolves like a default reader's ({done, value: Uint8Array}); value is
// valid until the next read. release() hands the buffer back for the next body.
function bodyReader(body) {
  let reader;
  try {
    reader = body.getReader({mode: 'byob'});
  } catch {
    const plain = body.getReader();
    return {read: () => plain.read(), release: () => {}};
  }
  let buffer = spareReadBuffer || new ArrayBuffer(kReadBufferBytes);
  spareReadBuffer = null;
  return {
    async read() {
      const r = await reader.read(new Uint8Array(buffer));  // transfers buffer into the stream
      if (r.value) buffer = r.value.buffer;                // ... and back
      return r.done ? {done: true} : r;
    },
    release() {  // a buffer whose read failed stays in the stream (detached here): not kept
      if (buffer.byteLength === kReadBufferBytes) spareReadBuffer = buffer;
    },
  };
}

// Streams a Response body into `target` (an Engine), reporting progress; returns bytes read.
// resume(bytesOfThisBody, cause), when given, returns the rest of the body after a dropped
// connection (or throws a clear error); without it a drop is reported as such.
async function pump(target, body, phase, loadedBefore, total, resume, file) {
  let reader = bodyReader(body);
  let loaded = loadedBefore;
  let lastPost = 0;
  let resumes = 0;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (!resume || resumes >= kMaxResumes) {
        throw new Error(`The download was interrupted after ${loaded} of ${total} bytes ` +
                        `(${errorMessage(e)}). Check your connection and load the model again.`);
      }
      ++resumes;
      reader = bodyReader(await resume(loaded - loadedBefore, e));
      continue;
    }
    if (chunk.done) break;
    target.appendChunk(chunk.value);
    loaded += chunk.value.length;
    const now = performance.now();
    if (now - lastPost > 50 || loaded === total) {
      post({type: 'progress', phase, loaded, total, file});
      lastPost = now;
    }
  }
  reader.release();  // (after a failure the next body gets a new buffer)
  post({type: 'progress', phase, loaded, total, file});
  return loaded - loadedBefore;
}

// One URL's bytes: from the cache if there (and readCache), else from the network.
async function fetchPartInfo(url, cache, readCache, signal) {
  const hit = cache && readCache ? await cache.match(url) : null;
  if (hit) return {response: hit, source: 'cache'};
  let response;
  try {
    response = await fetch(url, {cache: 'no-store', signal});
  } catch (e) {
    throw new Error(describeFetchError(url, e));
  }
  if (!response.ok) {
    throw new Error(`Could not download the model from ${url}: the server answered ` +
                    `${response.status} ${response.statusText || ''}`.trim() + '.');
  }
  return {response, source: 'network'};
}

// The rest of `url` from byte `offset` on, after its connection dropped: an HTTP Range request,
// conditional on the file being the same one (If-Range with its ETag or Last-Modified), else a
// clear error. A server that ignores Range answers 200 with the whole file: not resumable.
async function resumePart(url, first, offset, cause, signal) {
  const headers = {Range: `bytes=${offset}-`};
  const validator = first.headers.get('ETag') || first.headers.get('Last-Modified');
  if (validator) headers['If-Range'] = validator;
  let r = null;
  try {
    r = await fetch(url, {cache: 'no-store', headers, signal});
  } catch { /* reported below */ }
  const range = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(r?.headers.get('Content-Range') || '');
  const length = contentLength(first);
  if (r && r.status === 206 && range && Number(range[1]) === offset &&
      (!length || range[2] === '*' || Number(range[2]) === length)) {
    return r.body;
  }
  r?.body?.cancel().catch(() => {});
  const why = !r ? 'the server is unreachable' : r.status === 200
      ? 'the server does not resume downloads (no HTTP Range support) or the file changed'
      : `the server answered ${r.status}`;
  throw new Error(`The connection dropped after ${offset} bytes of ${url} (${errorMessage(cause)}), and ` +
                  `the download could not be resumed: ${why}. Load the model again.`);
}

function contentLength(response) {
  const n = Number(response.headers.get('Content-Length'));
  // A compressed transfer's Content-Length counts compressed bytes: not usable as the size.
  const encoded = (response.headers.get('Content-Encoding') || 'identity') !== 'identity';
  return Number.isFinite(n) && n > 0 && !encoded ? n : 0;
}

async function readManifest(url, cache, readCache, signal) {
  const {response, source} = await fetchPartInfo(url, cache, readCache, signal);
  const text = await (source === 'network' ? response.clone() : response).text();
  let manifest;
  try { manifest = JSON.parse(text); } catch {
    throw new Error(`${url} is not a model manifest (expected JSON like {"parts":["model.gguf.part0"],"size":123}).`);
  }
  if (!Array.isArray(manifest.parts) || manifest.parts.length === 0 ||
      !manifest.parts.every((p) => typeof p === 'string') || !(manifest.size > 0)) {
    throw new Error(`${url} is not a model manifest: it needs "parts" (a list of file names) and "size" (total bytes).`);
  }
  return {manifest, response, source};
}

// Only a complete file that the engine has parsed stays in the Cache API. Network bodies are
// teed into cache.put as they stream in; if anything fails before finishLoad succeeds (a drop,
// a short or oversized body, a parse error) every entry of this model is deleted again.
async function loadFromUrl(url, target) {
  const absolute = new URL(url, self.location.href).href;
  const cache = await openCache();
  const notes = [];
  if (!cache) {
    notes.push('The browser cache is not available to this page, so the model was loaded without ' +
               'caching; it will be downloaded again next time.');
  }
  let result;
  try {
    result = await downloadInto(target, absolute, cache, true);
  } catch (e) {
    if (!e.fromCache) throw e;
    // A cached copy that does not load (damaged on disk, or stored by an older version): it is
    // gone from the cache now; fetch the file again once.
    notes.push(`The cached copy of the model could not be used (${errorMessage(e)}); it was deleted ` +
               'and the model downloaded again.');
    result = await downloadInto(target, absolute, cache, false);
  }
  if (result.cacheError) {
    notes.push('The model could not be stored in the browser cache (' + result.cacheError +
               '); it will be downloaded again next time.');
  }
  return {info: result.info, source: result.source, note: notes.join(' ')};
}

async function downloadInto(target, absolute, cache, readCache) {
  const abort = new AbortController();
  const pending = [];  // [url, cache.put promise]: settled before success is declared
  const sources = new Set();
  let urls = [absolute];
  try {
    let parts;
    let total;
    if (/\.json(\?|#|$)/i.test(absolute)) {
      const {manifest, response, source} = await readManifest(absolute, cache, readCache, abort.signal);
      sources.add(source);
      if (source === 'network' && cache) pending.push([absolute, cache.put(absolute, response)]);
      parts = manifest.parts.map((p) => new URL(p, absolute).href);
      urls = [absolute, ...parts];
      total = manifest.size;
    } else {
      parts = [absolute];
    }
    // Open the first part to learn the size of a single file before allocating.
    let first = await fetchPartInfo(parts[0], cache, readCache, abort.signal);
    if (total === undefined) {
      total = contentLength(first.response);
      if (!total) {
        // No usable size (compressed or chunked response): read it whole first, then copy.
        const blob = await first.response.blob();
        first = {response: new Response(blob), source: first.source, blob};
        total = blob.size;
      }
    }
    target.beginLoad(total);
    post({type: 'progress', phase: first.source === 'cache' ? 'cache' : 'download', loaded: 0, total});
    let loaded = 0;
    for (let i = 0; i < parts.length; ++i) {
      const part = i === 0 ? first : await fetchPartInfo(parts[i], cache, readCache, abort.signal);
      sources.add(part.source);
      const network = part.source === 'network';
      let body = part.response.body;
      if (network && cache && !part.blob) {
        const [a, b] = body.tee();
        body = a;
        const headers = {'Content-Type': 'application/octet-stream'};
        const len = part.response.headers.get('Content-Length');
        if (len) headers['Content-Length'] = len;
        pending.push([parts[i], cache.put(parts[i], new Response(b, {headers}))]);
      }
      if (network && cache && part.blob) {
        pending.push([parts[i], cache.put(parts[i], new Response(part.blob))]);
      }
      const resume = network && !part.blob
          ? (offset, cause) => resumePart(parts[i], part.response, offset, cause, abort.signal) : null;
      loaded += await pump(target, body, network ? 'download' : 'cache', loaded, total, resume);
    }
    if (loaded !== total) {
      throw new Error(`The model download is incomplete: received ${loaded} of ${total} bytes.`);
    }
    post({type: 'progress', phase: 'parse', loaded, total});
    const info = target.finishLoad(threads);
    const failed = (await Promise.allSettled(pending.map(([, p]) => p))).find((r) => r.status === 'rejected');
    // A model cached in part would be read back half from the network next time: all or nothing.
    if (failed && cache) await Promise.allSettled(urls.map((u) => cache.delete(u)));
    return {info, source: sources.has('network') ? 'network' : 'cache',
            cacheError: failed ? errorMessage(failed.reason) : ''};
  } catch (e) {
    // Stops the teed cache writes too (an aborted body rejects its cache.put).
    abort.abort();
    await Promise.allSettled(pending.map(([, p]) => p));
    if (cache) await Promise.allSettled(urls.map((u) => cache.delete(u)));
    const error = e instanceof Error ? e : new Error(errorMessage(e));
    error.fromCache = sources.has('cache');
    throw error;
  }
}

async function loadFromFile(file, target) {
  if (!(file.size > 0)) throw new Error(`${file.name} is empty.`);
  target.beginLoad(file.size);
  post({type: 'progress', phase: 'file', loaded: 0, total: file.size});
  const loaded = await pump(target, file.stream(), 'file', 0, file.size, null);
  if (loaded !== file.size) throw new Error(`Could only read ${loaded} of ${file.size} bytes of ${file.name}.`);
  post({type: 'progress', phase: 'parse', loaded, total: file.size});
  return {info: target.finishLoad(threads), source: 'file', name: file.name, note: ''};
}

// ---- GPT-2 small from Hugging Face ----------------------------------------------------------

// The cached conversion if there is one (no request at all); else download, convert in the
// engine, load, and cache the GGUF only once the engine has parsed it.
async function getGpt2(hf, weights, target) {
  if (!kHfWeights.includes(weights)) throw new Error(`Unknown weight type "${weights}" (q8_0, q4_0 or f16).`);
  const key = hfCacheKey(hf, weights);
  const cache = await openCache();
  const notes = [];
  if (cache && await cache.match(key)) {
    try {
      const result = await downloadInto(target, key, cache, true);
      return {info: result.info, source: 'cache', note: ''};
    } catch (e) {
      if (!e.fromCache) throw e;
      notes.push(`The cached conversion could not be used (${errorMessage(e)}); it was deleted and made again.`);
    }
  }
  const gguf = await downloadAndConvert(hf, weights);
  target.beginLoad(gguf.length);
  target.appendChunk(gguf);
  post({type: 'progress', phase: 'parse', loaded: gguf.length, total: gguf.length});
  const info = target.finishLoad(threads);
  if (!cache) {
    notes.push('The browser cache is not available to this page, so the converted model will be ' +
               'downloaded and converted again next time.');
  } else {
    try {
      await cache.put(key, new Response(gguf, {headers: {'Content-Type': 'application/octet-stream',
                                                         'Content-Length': String(gguf.length)}}));
    } catch (e) {
      await cache.delete(key).catch(() => {});
      notes.push('The converted model could not be stored in the browser cache (' + errorMessage(e) +
                 '); it will be downloaded and converted again next time.');
    }
  }
  return {info, source: 'hf', note: notes.join(' ')};
}

async function downloadAndConvert(hf, weights) {
  const abort = new AbortController();
  const converter = new Module.Converter();
  try {
    const text = async (name) => {
      const {response} = await fetchPartInfo(hfFileUrl(hf, name), null, false, abort.signal);
      post({type: 'progress', phase: 'download', loaded: 0, total: 0, file: name});
      return response.text();
    };
    converter.setConfig(await text('config.json'));
    converter.setVocabulary(await text('vocab.json'), await text('merges.txt'));
    const url = hfFileUrl(hf, 'model.safetensors');
    const first = await fetchPartInfo(url, null, false, abort.signal);
    let body = first.response.body;
    let total = contentLength(first.response);
    let resume = (offset, cause) => resumePart(url, first.response, offset, cause, abort.signal);
    if (!total) {  // no usable size (compressed): read it whole first
      const blob = await first.response.blob();
      total = blob.size;
      body = blob.stream();
      resume = null;
    }
    makeRoom(total);
    converter.beginCheckpoint(total);
    const loaded = await pump(converter, body, 'download', 0, total, resume, 'model.safetensors');
    if (loaded !== total) {
      throw new Error(`The download of model.safetensors is incomplete: received ${loaded} of ${total} bytes.`);
    }
    const plan = converter.plan(weights);
    let lastPost = 0;
    for (let done = 0; done < plan.tensors;) {
      done = converter.convertNext();
      const now = performance.now();
      if (now - lastPost > 50 || done === plan.tensors) {
        post({type: 'progress', phase: 'convert', loaded: done, total: plan.tensors});
        lastPost = now;
        await yieldToEvents();
      }
    }
    return converter.takeOutput();
  } catch (e) {
    abort.abort();
    throw e;
  } finally {
    converter.delete();
  }
}

// A short throwaway run right after loading. The browser compiles wasm functions with a quick
// baseline compiler first and optimises them once they are hot; without this the user's first
// generation ran 2-3x slower than the next ones. Costs a few tokens' time at load.
function warmUp() {
  try {
    engine.reset();
    engine.setCapture(false);
    const n = Math.min(8, info.n_ctx - 4);
    engine.prefill(Array.from({length: n}, (_, i) => (i * 101) % info.n_vocab));
    for (let i = 0; i < 4; ++i) engine.step((i * 37) % info.n_vocab);
  } catch (e) {
    // Warming up is only an optimisation; a real run reports any real problem.
  } finally {
    engine.reset();
  }
}

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
    engine.delete();
    engine = new Module.Engine();
    info = null;
  }
}

async function handleLoad(msg) {
  busy = true;
  let target = null;
  try {
    await ready;
    if (!Module) return;
    target = new Module.Engine();
    const beginLoad = target.beginLoad.bind(target);
    target.beginLoad = (total) => {  // the size is known only here
      makeRoom(total);
      beginLoad(total);
    };
    const loaded = msg.type === 'get-gpt2' ? await getGpt2(msg.hf, msg.weights, target)
        : msg.file ? await loadFromFile(msg.file, target) : await loadFromUrl(msg.url, target);
    engine.delete();
    engine = target;
    target = null;
    info = loaded.info;
    modelSource = {source: loaded.source, name: loaded.name};
    warmUp();
    post({type: 'model', info, source: loaded.source, name: loaded.name, cacheWarning: loaded.note});
  } catch (e) {
    post({type: 'error', kind: 'load', message: explainLoadError(e)});
    // The page forgets its model on a load error; the worker still has it: say so.
    if (info) post({type: 'model', info, ...modelSource, restored: true});
  } finally {
    target?.delete();
    busy = false;
  }
}

// ---- Generation -----------------------------------------------------------------------------

function bytesToPieces(ids) {
  const d = new TextDecoder('utf-8');
  return Array.from(ids, (id) => d.decode(engine.tokenBytes(id)));
}

async function handleGenerate(msg) {
  if (!info) { post({type: 'error', kind: 'generate', message: 'Load a model first.'}); return; }
  busy = true;
  stopRequested = false;
  conversation = [];
  const decoder = new TextDecoder('utf-8');
  let reason = 'max-tokens';
  let generated = 0;
  let prefillMs = 0;
  let blockMs = new Float64Array(0);  // each block's share of the prefill, ms
  let decodeMs = 0;
  let promptIds = [];
  try {
    promptIds = Array.from(engine.tokenize(msg.prompt));
    if (promptIds.length === 0) throw new Error('The prompt is empty: type at least one character.');
    if (promptIds.length > info.n_ctx) {
      throw new Error(`The prompt is ${promptIds.length} tokens long, longer than the model's context of ` +
                      `${info.n_ctx} tokens. Shorten it.`);
    }
    const spec = engineSpec(msg.interventions, promptIds);
    lastPrompt = promptIds;
    engine.reset();
    engine.setCapture(!!msg.capture);
    engine.setInterventions(spec);
    engine.setSampling(msg.temperature, msg.topK, msg.topP, msg.seed);
    post({type: 'prompt', ids: promptIds, pieces: bytesToPieces(promptIds)});
    lastTokens = promptIds.slice();
    const t0 = performance.now();
    engine.prefill(promptIds);
    prefillMs = performance.now() - t0;
    blockMs = engine.blockTimes();
    const maxTokens = Math.max(0, msg.maxTokens | 0);
    const t1 = performance.now();
    for (let i = 0; i < maxTokens; ++i) {
      const id = engine.sample();
      generated++;
      lastTokens.push(id);
      const text = decoder.decode(engine.tokenBytes(id), {stream: true});
      post({type: 'token', id, text, index: i});
      if (id === kEndOfText) { reason = 'end-of-text'; break; }
      await yieldToEvents();
      if (stopRequested) { engine.stop(); reason = 'stopped'; break; }
      if (engine.position() >= info.n_ctx) { reason = 'context-full'; break; }
      // The last token is fed too, so its activations can be inspected like the others.
      engine.step(id);
    }
    decodeMs = performance.now() - t1;
    conversation = lastTokens.slice(0, engine.position());
    const tail = decoder.decode();
    if (tail) post({type: 'token', id: -1, text: tail, index: -1});
  } catch (e) {
    post({type: 'error', kind: 'generate', message: errorMessage(e)});
    reason = 'error';
  } finally {
    busy = false;
  }
  post({type: 'stats', promptTokens: promptIds.length, prefillMs, blockMs, generated,
        decodeMs, tokensPerSecond: generated > 0 && decodeMs > 0 ? generated / (decodeMs / 1000) : 0,
        reason, captured: engine.capturedPositions()});
}

// ---- Activations ----------------------------------------------------------------------------

// Everything the page's views need for one picked token (position p), copied out of wasm
// memory (views die when memory grows) and transferred.
function inspect(position) {
  const P = engine.capturedPositions();
  if (P === 0) throw new Error('No activations were captured: tick "capture activations" and generate.');
  const p = Math.max(0, Math.min(P - 1, position | 0));
  const L = info.n_layer;
  const attention = [];       // [L] of Float32Array [H, p + 1]
  const mlp = [];             // [L] of {hist, top}
  for (let l = 0; l < L; ++l) {
    attention.push(engine.attention(l, p).slice());
    mlp.push(summariseMlp(engine.mlpActivations(l, p)));
  }
  const residualNorms = engine.residualNorms();
  const lnStats = engine.layerNormStats();
  // [L, 4] at p: ln_1 out, attention out, ln_2 out, MLP out (Engine::SublayerNorms)
  const all = engine.sublayerNorms(), sublayerNorms = new Float32Array(L * 4);
  for (let l = 0; l < L; ++l) sublayerNorms.set(all.subarray((l * P + p) * 4, (l * P + p + 1) * 4), l * 4);
  const top = engine.topProbs(p);
  const transfer = [...attention.map((a) => a.buffer), residualNorms.buffer, lnStats.buffer, sublayerNorms.buffer];
  post({type: 'activations', position: p, positions: P, tokens: lastTokens.slice(0, P + 1),
        pieces: bytesToPieces(lastTokens.slice(0, Math.min(lastTokens.length, P + 1))),
        attention, residualNorms, lnStats, sublayerNorms, mlp, topIds: Array.from(top.ids), topProbs: Array.from(top.probs),
        topPieces: bytesToPieces(Array.from(top.ids).filter((i) => i >= 0))}, transfer);
  return p;
}

// Histogram with fixed edges (GELU outputs lie in [-0.17, +inf)) and the strongest neurons.
function summariseMlp(view) {
  const n = view.length;
  let min = Infinity, max = -Infinity, sum = 0, active = 0;
  for (let i = 0; i < n; ++i) {
    const v = view[i];
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;
    if (v > 0) active++;
  }
  const bins = 40;
  const lo = Math.min(-0.2, min), hi = Math.max(1, max);
  const hist = new Array(bins).fill(0);
  for (let i = 0; i < n; ++i) {
    const b = Math.min(bins - 1, Math.floor(((view[i] - lo) / (hi - lo)) * bins));
    hist[b]++;
  }
  const order = Array.from({length: n}, (_, i) => i);
  order.sort((a, b) => Math.abs(view[b]) - Math.abs(view[a]) || a - b);
  const top = order.slice(0, 12).map((i) => ({neuron: i, value: view[i]}));
  return {hist, lo, hi, min, max, mean: sum / n, active, n, top};
}

async function lens(position) {
  const P = engine.capturedPositions();
  const p = Math.max(0, Math.min(P - 1, position | 0));
  const perPosition = info.n_layer * info.n_embd * info.n_vocab;
  const width = Math.max(1, Math.min(P, kLensMaxPositions, Math.floor(kLensBudget / perPosition)));
  // A window ending at the picked token (or starting at 0 when everything fits).
  const end = Math.min(P, Math.max(p + 1, width));
  const begin = Math.max(0, end - width);
  post({type: 'lens-start', begin, end});
  const topK = 10;
  const r = engine.logitLens(begin, end, topK);
  const ids = Array.from(r.ids);
  const uniq = [...new Set(ids.filter((i) => i >= 0))];
  const pieces = Object.fromEntries(uniq.map((id, k) => [id, bytesToPieces([id])[0]]));
  post({type: 'lens', begin, end, topK, nLayer: info.n_layer, ids, probs: Array.from(r.probs), pieces});
}

// [P, P] attention of one head (row = query, column = key; NaN above the diagonal).
function attentionMap(layer, head) {
  const P = engine.capturedPositions();
  const H = info.n_head;
  const l = Math.max(0, Math.min(info.n_layer - 1, layer | 0));
  const h = Math.max(0, Math.min(H - 1, head | 0));
  const map = new Float32Array(P * P).fill(NaN);
  for (let q = 0; q < P; ++q) {
    map.set(engine.headAttention(l, h, q), q * P);  // a view: read before the next engine call
  }
  post({type: 'attention-map', layer: l, head: h, positions: P, map}, [map.buffer]);
}

async function handleInspect(msg) {
  try {
    if (msg.layer !== undefined && engine.capturedPositions() > 0) attentionMap(msg.layer, msg.head);
    const p = inspect(msg.position);
    await yieldToEvents();
    if (msg.lens !== false) await lens(p);
  } catch (e) {
    post({type: 'error', kind: 'inspect', message: errorMessage(e)});
  }
}

// ---- Experiments ------------------------------------------------------------------------------

// Mean ablation: a knocked-out head outputs its mean over the prompt's positions in the plain
// model instead of zero (TransformerLens's mean ablation over the one prompt there is). One
// captured plain prefill of the prompt; leaves the engine reset.
function promptHeadMeans(promptIds) {
  engine.setInterventions({});
  engine.reset();
  engine.setCapture(true);
  engine.prefill(promptIds);
  const means = engine.headMeans();
  engine.reset();
  return means;
}

// The engine's interventions for the page's: with meanAblation they carry the means (then the
// engine is left reset).
function engineSpec(iv, promptIds) {
  if (!iv?.meanAblation || !iv.ablateHeads?.length || !promptIds.length) return {...iv, meanAblation: false};
  return {...iv, meanAblation: false, headMeans: promptHeadMeans(promptIds)};
}

// The whole next-token distribution at a captured position (float64 for the sums below).
function fullDistribution(p) {
  return Float64Array.from(engine.finalProbs(p));
}

function topOf(dist, k) {
  const order = Array.from(dist.keys()).sort((a, b) => dist[b] - dist[a] || a - b).slice(0, k);
  return {ids: order, probs: order.map((i) => dist[i])};
}

// KL(p || q) in nats; a token the intervened model gives no probability (underflow) is
// floored at 1e-30 so a finite number is shown.
function klDivergence(p, q) {
  let kl = 0;
  for (let i = 0; i < p.length; ++i) {
    if (p[i] > 0) kl += p[i] * Math.log(p[i] / Math.max(q[i], 1e-30));
  }
  return Math.max(0, kl);
}

// Generates from promptIds with the current interventions and sampling (capture off); returns
// the sampled ids.
async function sampleIds(promptIds, msg) {
  engine.reset();
  engine.setCapture(false);
  engine.setSampling(msg.temperature, msg.topK, msg.topP, msg.seed);
  engine.prefill(promptIds);
  const ids = [];
  for (let i = 0; i < msg.maxTokens; ++i) {
    const id = engine.sample();
    ids.push(id);
    if (id === kEndOfText || engine.position() >= info.n_ctx) break;
    engine.step(id);
    if (i % 8 === 7) await yieldToEvents();
  }
  return ids;
}

async function handleExperiment(msg) {
  try {
    if (!info || !conversation.length) throw new Error('Generate some text first, then run the experiment.');
    const promptIds = Array.from(engine.tokenize(msg.prompt));
    if (!promptIds.length) throw new Error('The prompt is empty: type at least one character.');
    const spec = engineSpec(msg.interventions, promptIds);
    engine.setInterventions({});
    const textBefore = await sampleIds(promptIds, msg);
    engine.setInterventions(spec);
    const textAfter = await sampleIds(promptIds, msg);
    // The conversation the page shows, plain, then re-run under the interventions: the re-run
    // reuses the cache and the stream before the first changed block.
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    engine.prefill(conversation);
    const p = Math.max(0, Math.min(conversation.length - 1, msg.position | 0));
    const before = fullDistribution(p);
    engine.setInterventions(spec);
    const fromBlock = engine.rerun();
    const after = fullDistribution(p);
    const topBefore = topOf(before, 10), topAfter = topOf(after, 10);
    const ids = new Set([...topBefore.ids, ...topAfter.ids, ...textBefore, ...textAfter]);
    const pieces = Object.fromEntries([...ids].map((id) => [id, bytesToPieces([id])[0]]));
    post({type: 'experiment', position: p, nLayer: info.n_layer, fromBlock, kl: klDivergence(before, after),
          before: topBefore, after: {...topAfter, probsBefore: topAfter.ids.map((i) => before[i])},
          text: {before: textBefore, after: textAfter}, pieces});
  } catch (e) {
    post({type: 'error', kind: 'experiment', message: errorMessage(e)});
  }
}

// Splits items (in the order the job runs them) into consecutive groups of about `budget` work
// each (workOf(item): its work in full re-runs of the prompt), at least one item per group:
// each group is one engine call, so a call lasts about `budget` prefills, which bounds how long
// a cancel or a progress update waits, while the probes of a call share the unembedding's pass.
function groupsByWork(items, workOf, budget) {
  const groups = [];
  let group = [], work = 0;
  for (const item of items) {
    if (group.length && work + workOf(item) > budget) {
      groups.push(group);
      group = [];
      work = 0;
    }
    group.push(item);
    work += workOf(item);
  }
  if (group.length) groups.push(group);
  return groups;
}
const kCallBudget = 4;  // prefills of the prompt per engine call of a job (~0.6 s for GPT-2 small, 32 tokens)

// Each head knocked out alone and the target's log-probability at `p` measured by the engine
// (Engine::AblatedLogProbs: only positions 0..p run again, from the head's block, without
// capture), ranked by how much it drops. The blocks go from the last down, so each probe's
// block is the first its cache differs in and no block before it runs again.
async function handleHeadSweep(msg) {
  const L = info?.n_layer, H = info?.n_head, total = L * H;
  const heads = [];
  const started = performance.now();
  let restore = {};
  try {
    if (!info || !conversation.length || engine.capturedPositions() !== conversation.length) {
      throw new Error('Generate some text with "capture activations" on first.');
    }
    const p = Math.max(0, Math.min(conversation.length - 1, msg.position | 0));
    const target = msg.target | 0;
    if (target < 0 || target >= info.n_vocab) throw new Error(`The target token id ${target} is not in the vocabulary.`);
    const spec = engineSpec(msg.interventions, lastPrompt);
    const means = msg.interventions?.meanAblation ? spec.headMeans || promptHeadMeans(lastPrompt) : new Float32Array(0);
    // The plain run of the conversation, captured: every probe starts from its stream.
    engine.setInterventions({});
    if (engine.capturedPositions() === conversation.length) {
      engine.rerun();
    } else {  // promptHeadMeans ran the prompt instead
      engine.reset();
      engine.setCapture(true);
      engine.prefill(conversation);
    }
    restore = spec;
    const base = engine.ablatedLogProb(L, 0, p, target, means);
    const order = [];
    for (let l = L - 1; l >= 0; --l) for (let h = 0; h < H; ++h) order.push([l, h]);
    for (const group of groupsByWork(order, ([l]) => (L - l) / L, kCallBudget)) {
      if (cancelJob) break;
      const logProbs = engine.ablatedLogProbs(group, p, target, means);
      group.forEach(([l, h], i) => heads.push({layer: l, head: h, logProb: logProbs[i], drop: base - logProbs[i]}));
      post({type: 'sweep-progress', done: heads.length, total});
      await yieldToEvents();
    }
    heads.sort((a, b) => b.drop - a.drop || a.layer - b.layer || a.head - b.head);
    post({type: 'sweep', position: p, target, base, heads, done: heads.length, total, cancelled: cancelJob,
          ms: performance.now() - started});
  } catch (e) {
    post({type: 'error', kind: 'sweep', message: errorMessage(e)});
  } finally {
    // Leave the engine as the page shows it: the conversation under the page's interventions.
    try {
      if (info && conversation.length && engine.capturedPositions() === conversation.length) {
        engine.setInterventions(restore);
        engine.rerun();
      }
    } catch (e) {
      post({type: 'error', kind: 'sweep', message: errorMessage(e)});
    }
  }
}

// Activation patching: for every block l and position p, the corrupted prompt re-run with the
// residual stream entering block l at p replaced by the clean run's. The engine re-runs only
// positions p.. from block l (Engine::PatchedLogProbs); going down the positions, then down the
// blocks, keeps each re-run to what the previous one changed. The logit difference of the two
// runs' answers is log p(answer) - log p(other): the softmax's normaliser cancels.
async function handlePatching(msg) {
  const started = performance.now();
  try {
    if (!info) throw new Error('Load a model first.');
    const clean = Array.from(engine.tokenize(msg.clean || '')), corrupted = Array.from(engine.tokenize(msg.corrupted || ''));
    if (!clean.length || !corrupted.length) throw new Error('Type a clean and a corrupted prompt.');
    if (clean.length !== corrupted.length) {
      throw new Error(`The clean prompt is ${clean.length} tokens and the corrupted one ${corrupted.length}: ` +
                      'patching needs the same number of tokens (change a word for another of one token).');
    }
    if (clean.length > info.n_ctx) throw new Error(`The prompts are longer than the model's context of ${info.n_ctx} tokens.`);
    const L = info.n_layer, T = clean.length, total = L * T;
    engine.setInterventions({});
    engine.reset();
    engine.setCapture(true);
    // Each prompt's top token, then the two log-probability differences measured as the
    // patched runs' are (in double, from the logits), so a patch that restores all gives 1.
    engine.prefill(corrupted);
    const other = engine.topProbs(T - 1).ids[0];
    const diff = (a) => engine.ablatedLogProb(L, 0, T - 1, a, false) -
                        engine.ablatedLogProb(L, 0, T - 1, other, false);
    engine.reset();
    engine.prefill(clean);
    const cleanResid = Array.from({length: L}, (_, l) => engine.residual(l).slice());
    const answer = engine.topProbs(T - 1).ids[0];
    if (answer === other) {
      throw new Error('Both prompts predict the same next token, so there is no difference to bring back: ' +
                      'choose a corrupted prompt whose most likely next token differs.');
    }
    const cleanDiff = diff(answer);
    engine.reset();
    engine.prefill(corrupted);
    const corruptedDiff = diff(answer);
    const recovered = new Float32Array(total).fill(NaN);
    let done = 0;
    const cells = [];
    for (let l = L - 1; l >= 0; --l) for (let p = T - 1; p >= 0; --p) cells.push([l, p]);
    // A group never spans two blocks: one engine call patches one block's stream.
    const groups = groupsByWork(cells, ([l, p]) => ((L - l) / L) * ((T - p) / T), kCallBudget)
        .flatMap((g) => [...new Set(g.map(([l]) => l))].map((l) => g.filter(([m]) => m === l)));
    for (const group of groups) {
      if (cancelJob) break;
      const l = group[0][0], positions = group.map(([, p]) => p);
      const logProbs = engine.patchedLogProbsAt(l, positions, cleanResid[l], [answer, other]);
      positions.forEach((p, i) => {
        recovered[l * T + p] = (logProbs[2 * i] - logProbs[2 * i + 1] - corruptedDiff) / (cleanDiff - corruptedDiff);
      });
      done += positions.length;
      post({type: 'patching-progress', done, total});
      await yieldToEvents();
    }
    post({type: 'patching', nLayer: L, positions: T, answer, other, cleanDiff, corruptedDiff, recovered, done, total,
          cancelled: cancelJob, ms: performance.now() - started, pieces: bytesToPieces(corrupted), answerPieces: bytesToPieces([answer, other])},
         [recovered.buffer]);
  } catch (e) {
    post({type: 'error', kind: 'patching', message: errorMessage(e)});
  } finally {
    // The engine held the two prompts: give it back the page's conversation.
    try {
      engine.setInterventions(engineSpec(msg.interventions, lastPrompt));
      if (conversation.length) {
        engine.reset();
        engine.setCapture(true);
        engine.prefill(conversation);
      }
    } catch (e) {
      post({type: 'error', kind: 'patching', message: errorMessage(e)});
    }
  }
}

// The engine re-runs the conversation to attribute (capturing it again, under the same
// interventions), so the views' data stay those of the same run.
function handleAttribute(msg) {
  try {
    if (!info || !conversation.length) throw new Error('Generate some text first.');
    engine.setInterventions(engineSpec(msg.interventions, lastPrompt));
    const a = engine.attribute(conversation, msg.position | 0, msg.target | 0, -1);
    post({type: 'attribution', position: a.position, target: a.target, names: Array.from(a.names),
          values: a.values, logit: a.logit}, [a.values.buffer]);
  } catch (e) {
    post({type: 'error', kind: 'attribute', message: errorMessage(e)});
  }
}

// ---- Export ----------------------------------------------------------------------------------

// The captured tensors of block `layer` for every position, named and shaped as
// TransformerLens's ActivationCache names them (batch dimension 1).
function handleExport(msg) {
  try {
    const P = engine.capturedPositions();
    if (P === 0) throw new Error('Nothing to export: generate with "capture activations" on first.');
    const l = msg.layer | 0, H = info.n_head, C = info.n_embd, F = info.n_ff;
    if (l < 0 || l >= info.n_layer) throw new Error(`Block ${l} is out of range; valid blocks are 0..${info.n_layer - 1}.`);
    const pattern = new Float32Array(H * P * P);  // [head, query, key]; 0 above the diagonal, as TL
    const mlp = new Float32Array(P * F);
    for (let q = 0; q < P; ++q) {
      const row = engine.attention(l, q);  // view [H, q + 1]: copy before the next engine call
      for (let h = 0; h < H; ++h) pattern.set(row.subarray(h * (q + 1), (h + 1) * (q + 1)), (h * P + q) * P);
      mlp.set(engine.mlpActivations(l, q), q * F);
    }
    const tensors = [
      {name: `blocks.${l}.hook_resid_pre`, shape: [1, P, C], data: engine.residual(l).slice()},
      {name: `blocks.${l}.attn.hook_pattern`, shape: [1, H, P, P], data: pattern},
      {name: `blocks.${l}.mlp.hook_post`, shape: [1, P, F], data: mlp},
      {name: `blocks.${l}.hook_resid_post`, shape: [1, P, C], data: engine.residual(l + 1).slice()},
    ];
    post({type: 'export', layer: l, tensors}, tensors.map((t) => t.data.buffer));
  } catch (e) {
    post({type: 'error', kind: 'export', message: errorMessage(e)});
  }
}

// ---- Cache ------------------------------------------------------------------------------------

async function cacheSummary() {
  const cache = await openCache();
  if (!cache) return {entries: 0, bytes: 0};
  const keys = await cache.keys();
  let bytes = 0;
  for (const k of keys) {
    const r = await cache.match(k);
    bytes += Number(r?.headers.get('Content-Length')) || 0;
  }
  return {entries: keys.length, bytes, urls: keys.map((k) => k.url)};
}

async function handleClearCache() {
  try {
    await caches.delete(kCacheName);
    post({type: 'cache', cleared: true, ...(await cacheSummary())});
  } catch (e) {
    post({type: 'error', kind: 'cache', message: 'Could not clear the cache: ' + errorMessage(e)});
  }
}

self.onmessage = (event) => {
  const msg = event.data;
  switch (msg.type) {
    case 'stop':  // handled at once, even while generating
      stopRequested = true;
      return;
    case 'cancel-job':
      cancelJob = true;
      return;
    case 'head-sweep':
    case 'patching':  // a cancel sent after this (even before it starts) cancels it
      cancelJob = false;
      break;
    case 'cache-info':
      cacheSummary().then((s) => post({type: 'cache', ...s}));
      return;
    default:
      break;
  }
  // Everything else runs one at a time, in order.
  queue = queue.then(async () => {
    await ready;
    if (!engine) return;
    if (msg.type === 'load' || msg.type === 'get-gpt2') await handleLoad(msg);
    else if (msg.type === 'generate') await handleGenerate(msg);
    else if (msg.type === 'inspect') await handleInspect(msg);
    else if (msg.type === 'clear-cache') await handleClearCache();
    else if (msg.type === 'experiment') await handleExperiment(msg);
    else if (msg.type === 'head-sweep') await handleHeadSweep(msg);
    else if (msg.type === 'export') handleExport(msg);
    else if (msg.type === 'attribute') handleAttribute(msg);
    else if (msg.type === 'patching') await handlePatching(msg);
    else if (msg.type === 'attention-map') {
      try { attentionMap(msg.layer, msg.head); } catch (e) {
        post({type: 'error', kind: 'inspect', message: errorMessage(e)});
      }
    }
  });
};
