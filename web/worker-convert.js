// GPT-2 small from Hugging Face, made in the browser: config.json, vocab.json, merges.txt and
// model.safetensors downloaded (the checkpoint resumed like a model, see worker-load.js) and
// converted to GGUF by the engine's Converter (gpt2-convert's code), then loaded into the
// target Engine and cached under hfCacheKey, so the next visit makes no request at all.

import {hfCacheKey, hfFileUrl, kHfWeights} from './hf.js';
import {Msg, Phase, errorMessage} from './protocol.js';

// loader: createLoader's functions; yieldToEvents(): lets queued messages arrive between tensors.
export function createHfConverter({post, yieldToEvents, loader}) {
  // The cached conversion if there is one (no request at all); else download, convert in the
  // engine, load, and cache the GGUF only once the engine has parsed it. Converter: the engine
  // module's class; makeRoom(bytes): frees the loaded model first when it and the checkpoint
  // would not fit side by side.
  async function getGpt2(hf, weights, target, {Converter, threads, makeRoom}) {
    if (!kHfWeights.includes(weights)) throw new Error(`Unknown weight type "${weights}" (q8_0, q4_0 or f16).`);
    const key = hfCacheKey(hf, weights);
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
    const gguf = await downloadAndConvert(hf, weights, Converter, makeRoom);
    target.beginLoad(gguf.length);
    target.appendChunk(gguf);
    post({type: Msg.progress, phase: Phase.parse, loaded: gguf.length, total: gguf.length});
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

  async function downloadAndConvert(hf, weights, Converter, makeRoom) {
    const abort = new AbortController();
    const converter = new Converter();
    try {
      const text = async (name) => {
        const {response} = await loader.fetchPartInfo(hfFileUrl(hf, name), null, false, abort.signal);
        post({type: Msg.progress, phase: Phase.download, loaded: 0, total: 0, file: name});
        return response.text();
      };
      converter.setConfig(await text('config.json'));
      converter.setVocabulary(await text('vocab.json'), await text('merges.txt'));
      const url = hfFileUrl(hf, 'model.safetensors');
      const first = await loader.fetchPartInfo(url, null, false, abort.signal);
      let body = first.response.body;
      let total = loader.contentLength(first.response);
      let resume = (offset, cause) => loader.resumePart(url, first.response, offset, cause, abort.signal);
      if (!total) {  // no usable size (compressed): read it whole first
        const blob = await first.response.blob();
        total = blob.size;
        body = blob.stream();
        resume = null;
      }
      makeRoom(total);
      converter.beginCheckpoint(total);
      const loaded = await loader.pump(converter, body, Phase.download, 0, total, resume, 'model.safetensors');
      if (loaded !== total) {
        throw new Error(`The download of model.safetensors is incomplete: received ${loaded} of ${total} bytes.`);
      }
      const plan = converter.plan(weights);
      let lastPost = 0;
      for (let done = 0; done < plan.tensors;) {
        done = converter.convertNext();
        const now = performance.now();
        if (now - lastPost > 50 || done === plan.tensors) {
          post({type: Msg.progress, phase: Phase.convert, loaded: done, total: plan.tensors});
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

  return {getGpt2};
}
