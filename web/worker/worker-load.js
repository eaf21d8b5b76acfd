// Reading a model into an Engine (or a Converter: anything with beginLoad/appendChunk/
// finishLoad, or appendChunk alone): from a URL or a manifest of parts through the worker's Cache
// API copy, resuming a dropped connection per part; or from a local File. Progress goes to the
// page as 'progress' messages (protocol.js). threads: the engine's thread count for finishLoad.

import {Msg, Phase, errorMessage} from '../shared/protocol.js';

const kCacheName = 'gpt2-models-v1';
// The page's folder, which a relative URL from the page (typed there, or version.json's model) is
// relative to: the site's root, where index.html sits, one folder up from the worker's own.
export const kPageBase = new URL('../', import.meta.url).href;

// A dictionary's .gguf (an SAE or transcoders, tens of MB) from a URL, relative to the page, whole:
// checkRoom(bytes) may refuse it once its size is known; progress({phase, loaded, total}) as it
// arrives. Errors say which URL and why.
export async function ggufFromUrl(url, checkRoom, progress) {
  const absolute = new URL(String(url), kPageBase).href;
  let r;
  try {
    r = await fetch(absolute);
  } catch (e) {
    throw new Error(`${absolute} is unreachable (${e?.message || e}).`);
  }
  if (!r.ok) throw new Error(`${absolute} answered ${r.status}.`);
  const total = Number(r.headers.get('content-length')) || 0;
  if (total) checkRoom(total);
  const parts = [];
  let loaded = 0;
  const reader = r.body.getReader();
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    parts.push(value);
    loaded += value.length;
    progress({phase: Phase.download, loaded, total, file: absolute});
  }
  if (!total) checkRoom(loaded);
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const p of parts) { bytes.set(p, at); at += p.length; }
  if (loaded < 4 || String.fromCharCode(...bytes.subarray(0, 4)) !== 'GGUF') {
    throw new Error(`${absolute} is not a GGUF file.`);
  }
  return bytes;
}

export function createLoader({post}) {
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
  // machines that costs more than the copy: reading GPT-2 small from the Cache API into fresh
  // chunks took about three times as long as into one reused 8 MB buffer.
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
      return {read: () => plain.read(), release: () => {}, cancel: () => plain.cancel().catch(() => {})};
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
      cancel: () => reader.cancel().catch(() => {}),
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
        post({type: Msg.progress, phase, loaded, total, file});
        lastPost = now;
      }
    }
    reader.release();  // (after a failure the next body gets a new buffer)
    post({type: Msg.progress, phase, loaded, total, file});
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

  // Bytes [from, to] of `url` (to null: to the end) by an HTTP Range request, of the same file as
  // before when a validator (its ETag or Last-Modified) is given: {response} of a 206 answer
  // covering exactly those bytes of a file of fileSize bytes (0: any), else {why} says in plain
  // words why not. A server that ignores Range answers 200 with the whole file. ifRange: send the
  // validator as If-Range (a CORS preflight per request); else the answer's ETag is compared,
  // which costs no extra round trip (a lone Range header is CORS-safelisted).
  async function fetchRange(url, from, to, validator, fileSize, signal, ifRange = true) {
    const headers = {Range: `bytes=${from}-${to ?? ''}`};
    if (validator && ifRange) headers['If-Range'] = validator;
    let r = null;
    try {
      r = await fetch(url, {cache: 'no-store', headers, signal});
    } catch { /* reported below */ }
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(r?.headers.get('Content-Range') || '');
    const etag = r?.headers.get('ETag');
    const same = ifRange || !validator || !validator.startsWith('"') || !etag || etag === validator;
    if (r && r.status === 206 && range && Number(range[1]) === from && (to === null || Number(range[2]) === to) &&
        (!fileSize || range[3] === '*' || Number(range[3]) === fileSize) && same) {
      return {response: r, fileSize: range[3] === '*' ? 0 : Number(range[3])};
    }
    r?.body?.cancel().catch(() => {});
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    const why = !r ? 'the server is unreachable' : !same ? 'the file changed on the server meanwhile' : r.status === 200
        ? 'the server does not answer HTTP Range requests, or the file changed'
        : `the server answered ${r.status}`;
    return {why};
  }

  // The rest of `url` from byte `offset` on, after its connection dropped, else a clear error.
  async function resumePart(url, first, offset, cause, signal) {
    const validator = first.headers.get('ETag') || first.headers.get('Last-Modified');
    const {response, why} = await fetchRange(url, offset, null, validator, contentLength(first), signal);
    if (response) return response.body;
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
  async function loadFromUrl(url, target, threads) {
    const absolute = new URL(url, kPageBase).href;
    const cache = await openCache();
    const notes = [];
    if (!cache) {
      notes.push('The browser cache is not available to this page, so the model was loaded without ' +
                 'caching; it will be downloaded again next time.');
    }
    let result;
    try {
      result = await downloadInto(target, absolute, cache, true, threads);
    } catch (e) {
      if (!e.fromCache) throw e;
      // A cached copy that does not load (damaged on disk, or stored by an older version): it is
      // gone from the cache now; fetch the file again once.
      notes.push(`The cached copy of the model could not be used (${errorMessage(e)}); it was deleted ` +
                 'and the model downloaded again.');
      result = await downloadInto(target, absolute, cache, false, threads);
    }
    if (result.cacheError) {
      notes.push('The model could not be stored in the browser cache (' + result.cacheError +
                 '); it will be downloaded again next time.');
    }
    return {info: result.info, source: result.source, note: notes.join(' ')};
  }

  async function downloadInto(target, absolute, cache, readCache, threads) {
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
      post({type: Msg.progress, phase: first.source === 'cache' ? Phase.cache : Phase.download, loaded: 0, total});
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
        loaded += await pump(target, body, network ? Phase.download : Phase.cache, loaded, total, resume);
      }
      if (loaded !== total) {
        throw new Error(`The model download is incomplete: received ${loaded} of ${total} bytes.`);
      }
      post({type: Msg.progress, phase: Phase.parse, loaded, total});
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

  async function loadFromFile(file, target, threads) {
    if (!(file.size > 0)) throw new Error(`${file.name} is empty.`);
    target.beginLoad(file.size);
    post({type: Msg.progress, phase: Phase.file, loaded: 0, total: file.size});
    const loaded = await pump(target, file.stream(), Phase.file, 0, file.size, null);
    if (loaded !== file.size) throw new Error(`Could only read ${loaded} of ${file.size} bytes of ${file.name}.`);
    post({type: Msg.progress, phase: Phase.parse, loaded, total: file.size});
    return {info: target.finishLoad(threads), source: 'file', name: file.name, note: ''};
  }

  // ---- The cache ----------------------------------------------------------------------------

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

  // A network response's body with its size and how to resume it after a dropped connection
  // ({total, body, resume}); without a usable size (a compressed or chunked answer) it is read
  // whole first, and cannot be resumed.
  async function sizedBody(url, response, signal) {
    const total = contentLength(response);
    if (total) return {total, body: response.body, resume: (offset, cause) => resumePart(url, response, offset, cause, signal)};
    const blob = await response.blob();
    return {total: blob.size, body: blob.stream(), resume: null};
  }

  // Runs a Converter's plan: every tensor, one per call, with 'progress' (Phase.convert, in
  // tensors) and queued messages let in at most every 50 ms (yieldToEvents).
  async function convertAll(converter, tensors, yieldToEvents) {
    let lastPost = 0;
    for (let done = 0; done < tensors;) {
      done = converter.convertNext();
      const now = performance.now();
      if (now - lastPost > 50 || done === tensors) {
        post({type: Msg.progress, phase: Phase.convert, loaded: done, total: tensors});
        lastPost = now;
        await yieldToEvents();
      }
    }
  }

  async function clearCache() {
    await caches.delete(kCacheName);
  }

  return {openCache, fetchPartInfo, fetchRange, resumePart, contentLength, sizedBody, bodyReader, kMaxResumes, pump, convertAll,
          downloadInto, loadFromUrl, loadFromFile, cacheSummary, clearCache};
}
