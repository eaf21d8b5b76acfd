// GPT-2 from Hugging Face, made in the browser: config.json, vocab.json, merges.txt and
// model.safetensors downloaded and converted to GGUF by the engine's Converter (gpt2-convert's
// code), then loaded into the target Engine and cached under hfCacheKey, so the next visit makes
// no request at all.
//
// The checkpoint is streamed where the server answers HTTP Range requests (Hugging Face does):
// the converter reads the safetensors header, then asks for one piece of the file at a time
// (a tensor, or rows of the embeddings) in the file's order, converts it into its output and
// drops it, so GPT-2 XL's 6.4 GB checkpoint is never held. The pieces come from one sequential
// Range request; a dropped connection resumes where it stopped. A server that
// ignores Range sends the whole file instead: converted from memory when it fits, else a clear
// error.

import {hfCacheKey, hfFileUrl, hfModel, hfSizes, kHfWeights} from '../shared/hf.js';
import {FetchMsg, Msg, Phase, errorMessage} from '../shared/protocol.js';

// The first request asks for this much of model.safetensors: the header of GPT-2 XL's is ~80 kB.
const kProbeBytes = 128 << 10;
// A checkpoint sent whole (no Range support) is converted from memory only up to this size,
// beside its converted output, in the wasm heap.
const kWholeCheckpointBytes = 1200 << 20;

// loader: createLoader's functions; yieldToEvents(): lets queued messages arrive between pieces.
export function createHfConverter({post, yieldToEvents, loader}) {
  // The cached conversion if there is one (no request at all); else download, convert in the
  // engine and load; the result's store() then caches the GGUF (only once the engine has parsed
  // it). Converter: the engine
  // module's class; makeRoom(bytes): frees the loaded model first when it and the new one would
  // not fit side by side. id: the repository (hf.js kHfModels).
  async function getGpt2(hf, weights, target, {Converter, threads, makeRoom, id = 'gpt2'}) {
    if (!kHfWeights.includes(weights)) throw new Error(`Unknown weight type "${weights}" (q8_0, q4_0 or f16).`);
    hfModel(id);  // a known size, else a clear error
    const key = hfCacheKey(hf, weights, id);
    const cache = await loader.openCache();
    const notes = [];
    if (cache && await cache.match(key)) {
      try {
        const result = await loader.downloadInto(target, key, cache, true, threads);
        return {info: result.info, source: 'cache', note: ''};
      } catch (e) {
        if (!e.fromCache) throw e;
        notes.push(`The cached conversion could not be used (${errorMessage(e)}); it was deleted and made again.`);
      }
    }
    const gguf = await downloadAndConvert(hf, id, weights, Converter, makeRoom);
    target.beginLoad(gguf.length);
    target.appendChunk(gguf);
    post({type: Msg.progress, phase: Phase.parse, loaded: gguf.length, total: gguf.length});
    const info = target.finishLoad(threads);
    if (!cache) {
      notes.push('The browser cache is not available to this page, so the converted model will be ' +
                 'downloaded and converted again next time.');
      return {info, source: 'hf', note: notes.join(' ')};
    }
    // Cached after the model is announced ready: writing a few hundred MB into the Cache API takes
    // seconds (GPT-2 medium's 380 MB: longer than its whole conversion on a loaded machine), and
    // the model can be used meanwhile. Resolves with a warning, or '' once stored.
    const store = async () => {
      try {
        await cache.put(key, new Response(gguf, {headers: {'Content-Type': 'application/octet-stream',
                                                           'Content-Length': String(gguf.length)}}));
        return '';
      } catch (e) {
        await cache.delete(key).catch(() => {});
        return 'The converted model could not be stored in the browser cache (' + errorMessage(e) +
               '); it will be downloaded and converted again next time.';
      }
    };
    return {info, source: 'hf', note: notes.join(' '), store};
  }

  async function downloadAndConvert(hf, id, weights, Converter, makeRoom) {
    const abort = new AbortController();
    const converter = new Converter();
    try {
      const text = async (name) => {
        const {response} = await loader.fetchPartInfo(hfFileUrl(hf, name, id), null, false, abort.signal);
        post({type: Msg.progress, phase: Phase.download, loaded: 0, total: 0, file: name});
        return response.text();
      };
      converter.setConfig(await text('config.json'));
      converter.setVocabulary(await text('vocab.json'), await text('merges.txt'));
      const url = hfFileUrl(hf, 'model.safetensors', id);
      let first;
      try {
        first = await fetch(url, {cache: 'no-store', headers: {Range: `bytes=0-${kProbeBytes - 1}`}, signal: abort.signal});
      } catch (e) {
        throw new Error(`Could not download the model from ${url}: the address is unreachable ` +
                        `(${errorMessage(e)}). Check the URL and your connection.`);
      }
      if (first.status === 206) {
        await streamed(converter, url, first, weights, () => makeRoom(hfSizes(id, weights).gguf), abort.signal);
      } else if (first.ok) {
        await whole(converter, url, first, weights, makeRoom, abort.signal);
      } else {
        throw new Error(`Could not download the model from ${url}: the server answered ` +
                        `${first.status} ${first.statusText || ''}`.trim() + '.');
      }
      return converter.takeOutput();
    } catch (e) {
      abort.abort();
      throw e;
    } finally {
      converter.delete();
    }
  }

  // Piece by piece, each fetched by a Range request from where the first answer came from (the
  // CDN, after Hugging Face's redirect); an answer with another ETag (the file changed) fails.
  async function streamed(converter, url, first, weights, makeRoom, signal) {
    const range = /^bytes 0-(\d+)\/(\d+)$/.exec(first.headers.get('Content-Range') || '');
    if (!range) {
      first.body?.cancel().catch(() => {});
      throw new Error(`The server sent part of ${url} without saying the file's size (no Content-Range).`);
    }
    const fileSize = Number(range[2]);
    const from = first.url || url;
    const validator = first.headers.get('ETag') || first.headers.get('Last-Modified');
    let prefix = new Uint8Array(await first.arrayBuffer());
    const headerEnd = converter.headerEnd(prefix.subarray(0, 8), fileSize);
    if (headerEnd > prefix.length) {
      const rest = await piece(from, prefix.length, headerEnd - 1, validator, fileSize, signal);
      const joined = new Uint8Array(headerEnd);
      joined.set(prefix);
      joined.set(new Uint8Array(await rest.arrayBuffer()), prefix.length);
      prefix = joined;
    }
    makeRoom();
    const plan = converter.beginStream(prefix.subarray(0, headerEnd), fileSize, weights);
    const file = sequentialReader(from, url, validator, fileSize, signal);
    let fed = 0;
    let total = plan.sourceBytes;
    let lastPost = 0;
    let lastYield = 0;
    const progress = (loaded) => {
      const now = performance.now();
      if (now - lastPost > 50) {
        post({type: Msg.progress, phase: Phase.download, loaded, total, file: 'model.safetensors'});
        lastPost = now;
      }
    };
    try {
      for (let r; (r = converter.nextRange()) !== null;) {
        await file.read(r.offset, r.bytes, (chunk) => converter.appendPiece(chunk), (got) => progress(fed + got));
        ({fed, sourceBytes: total} = converter.feedPiece());
        progress(fed);
        if (performance.now() - lastYield > 50) {
          await yieldToEvents();
          lastYield = performance.now();
        }
      }
    } finally {
      file.close();
    }
    post({type: Msg.progress, phase: Phase.download, loaded: fed, total, file: 'model.safetensors'});
    post({type: Msg.progress, phase: Phase.convert, loaded: plan.tensors, total: plan.tensors});
  }

  // model.safetensors read front to back, as the converter asks for its pieces (in the file's
  // order), by worker-fetch.js in a thread of its own: one Range request from the first piece
  // to the end of the file while the pieces follow each other (a gap of up to kSkipBytes, such as
  // GPT-2's attention-mask buffers, is read through), a new one for a piece further on or before.
  // One request instead of one per tensor, and the download goes on while the engine converts.
  function sequentialReader(from, url, validator, fileSize, signal) {
    const kSkipBytes = 64 << 20;
    const fetcher = new Worker(new URL('./worker-fetch.js', import.meta.url), {type: 'module'});
    let epoch = 0;
    let pos = -1;
    let pending = null;    // bytes at pos already received
    const queue = [];      // chunks received after pending, in order
    let failure = null;
    let wake = null;
    fetcher.onmessage = ({data}) => {
      if (data.epoch !== epoch) return;  // from a read replaced since
      if (data.type === FetchMsg.chunk) queue.push(data.bytes);
      else if (data.type === FetchMsg.end) queue.push(null);
      else failure = new Error(data.message);
      wake?.();
    };
    fetcher.onerror = (e) => {
      failure = new Error(`The download's worker failed (${e.message || 'could not start'}).`);
      wake?.();
    };
    const abort = () => { failure ??= new Error('aborted'); wake?.(); };
    signal.addEventListener('abort', abort);
    function open(offset) {
      ++epoch;
      queue.length = 0;
      pending = null;
      pos = offset;
      fetcher.postMessage({type: FetchMsg.open, epoch, url: from, offset, validator, fileSize});
    }
    async function chunk() {
      if (pending) return pending;
      while (!queue.length && !failure) await new Promise((r) => { wake = r; });
      if (failure) throw failure;
      const c = queue.shift();
      if (c === null) throw new Error(`The server ended ${url} at byte ${pos}, before the converter had all of it.`);
      fetcher.postMessage({type: FetchMsg.taken, epoch, bytes: c.length});
      return c;
    }
    // Takes n bytes at pos; sink gets each.
    async function take(n, sink) {
      while (n > 0) {
        const c = await chunk();
        const k = Math.min(c.length, n);
        if (sink) sink(c.subarray(0, k));
        pending = c.length > k ? c.subarray(k) : null;
        pos += k;
        n -= k;
      }
    }
    return {
      async read(offset, n, sink, onBytes) {
        if (pos < 0 || offset < pos || offset - pos > kSkipBytes) open(offset);
        await take(offset - pos, null);
        const start = pos;
        await take(n, (c) => {
          sink(c);
          onBytes(pos + c.length - start);
        });
      },
      close() {
        signal.removeEventListener('abort', abort);
        fetcher.terminate();
      },
    };
  }

  // A piece the server must answer with exactly those bytes.
  async function piece(url, from, to, validator, fileSize, signal) {
    const {response, why} = await loader.fetchRange(url, from, to, validator, fileSize, signal, false);
    if (!response) throw new Error(`Could not download bytes ${from}-${to} of ${url}: ${why}. Load the model again.`);
    return response;
  }

  // The whole checkpoint in memory, then converted a tensor at a time (servers without Range).
  async function whole(converter, url, first, weights, makeRoom, signal) {
    let body = first.body;
    let total = loader.contentLength(first);
    let resume = (offset, cause) => loader.resumePart(url, first, offset, cause, signal);
    if (!total) {  // no usable size (compressed): read it whole first
      const blob = await first.blob();
      total = blob.size;
      body = blob.stream();
      resume = null;
    }
    if (total > kWholeCheckpointBytes) {
      body.cancel().catch(() => {});
      throw new Error(`The server of ${url} does not answer HTTP Range requests, so this page would have to ` +
                      `hold the whole ${Math.round(total / 1e6)} MB checkpoint in memory to convert it, more ` +
                      'than it can. Hugging Face answers them: try again from there, or convert the model with ' +
                      'gpt2-convert and load the file.');
    }
    makeRoom(total);
    converter.beginCheckpoint(total);
    const loaded = await loader.pump(converter, body, Phase.download, 0, total, resume, 'model.safetensors');
    if (loaded !== total) {
      throw new Error(`The download of model.safetensors is incomplete: received ${loaded} of ${total} bytes.`);
    }
    await loader.convertAll(converter, converter.plan(weights).tensors, yieldToEvents);
  }

  return {getGpt2};
}
