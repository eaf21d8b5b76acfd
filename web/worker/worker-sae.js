// Sparse autoencoders in the engine's worker: loading one into the loaded model and reading it
// (protocol.js documents the messages). An SAE comes from Hugging Face (jbloom's residual SAEs,
// sae.js), from a folder URL holding SAELens's cfg.json and sae_weights.safetensors, or from
// local files (a GGUF made by `gpt2-convert --sae`, or the SAELens pair). The pair is converted to
// Q8_0 in the engine by the Converter (gpt2-convert's code), then the GGUF is loaded and, for
// the URL sources, kept in the Cache API beside the models under sae.js's saeCacheKey: the next
// visit loads it with no request. Downloads go through worker-load.js (its progress, resume by
// Range after a dropped connection, clear errors); nothing is cached until the engine has loaded
// the converted SAE. The engine owns its SAEs: another model drops them (attach).

import {ErrorKind, Msg, Phase, errorMessage} from '../shared/protocol.js';
import {cfgShape, hfSaeUrl, saeBytes, saeCacheKey, saeFolderUrls, saeRefusal, saeSourceText} from '../shared/sae.js';
import {ggufFromUrl, kPageBase} from './worker-load.js';
import {reply, tokenPieces} from './reply.js';

// post(msg, transfer): to the page; yieldToEvents(): lets queued messages arrive between
// tensors; loader: a createLoader whose progress goes out as 'sae-progress' (worker.js);
// module(): the engine's wasm module (its Converter class); under: what the engine computes under
// (worker-under.js): the reads run under the request's interventions.
export function createSae({post, yieldToEvents, loader, module, under}) {
  let engine = null;
  let info = null;
  // id -> {name, share, from}: where each loaded SAE came from (the engine knows the rest).
  const sources = new Map();

  // Always answers (the page waits for it after each load, failed or not).
  function list(loaded = -1, note = '') {
    let saes = [];
    try {
      if (engine && info) saes = Array.from(engine.saes(), (s) => ({...s, ...sources.get(s.id)}));
    } catch (e) {
      note ||= `The SAEs could not be listed: ${errorMessage(e)}`;
    }
    post({type: Msg.saes, saes, loaded, note});
  }

  // The memory check before a download: the model, the SAEs held and what this one needs.
  function checkRoom(needBytes) {
    const held = engine.saes();
    const refusal = saeRefusal({modelBytes: 1.1 * info.file_bytes, loadedBytes: held.reduce((s, x) => s + x.bytes, 0),
                                needBytes, count: held.length, deviceMemory: self.navigator?.deviceMemory});
    if (refusal) throw new Error(refusal);
  }

  // Before the weights are read: an SAE of another model's width cannot load (the engine checks
  // again when it does), nor one the memory cannot hold. A cfg.json without a usable d_in and
  // d_sae goes on to the converter, which names what is wrong.
  function checkCfg(cfgText) {
    const shape = cfgShape(cfgText);
    if (!shape) return;
    if (shape.dIn !== info.n_embd) {
      throw new Error(`This SAE reads vectors of width ${shape.dIn} (its cfg.json's d_in), but the loaded model's ` +
                      `stream has width ${info.n_embd}: it was trained on another model.`);
    }
    checkRoom(saeBytes(shape.dIn, shape.dSae).peak);
  }

  // cfg.json's text and the safetensors' bytes (fed by feed(converter, total)) to a Q8_0 GGUF.
  async function convert(cfgText, total, feed) {
    const converter = new (module().Converter)();
    try {
      converter.setSaeConfig(cfgText);
      converter.beginCheckpoint(total);
      await feed(converter);
      // Its 'progress' reaches the page as 'sae-progress' (worker.js gives this module such a loader).
      await loader.convertAll(converter, converter.planSae('q8_0').tensors, yieldToEvents);
      return converter.takeOutput();
    } finally {
      converter.delete();
    }
  }

  // The SAE at cfgUrl + weightsUrl: the cached conversion if there is one, else downloaded
  // (resumed by Range after a drop) and converted; cached once the engine has loaded it.
  async function fromUrls(cfgUrl, weightsUrl) {
    const key = saeCacheKey(weightsUrl);
    const cache = await loader.openCache();
    const notes = [];
    const hit = cache ? await cache.match(key) : null;
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      post({type: Msg.saeProgress, phase: Phase.cache, loaded: bytes.length, total: bytes.length});
      checkRoom(bytes.length);
      try {
        return {sae: engine.loadSae(bytes), from: 'cache', note: ''};
      } catch (e) {
        await cache.delete(key).catch(() => {});
        notes.push(`The cached SAE could not be used (${errorMessage(e)}); it was deleted and made again.`);
      }
    }
    const abort = new AbortController();
    let gguf;
    try {
      const cfg = await loader.fetchPartInfo(cfgUrl, null, false, abort.signal);
      post({type: Msg.saeProgress, phase: Phase.download, loaded: 0, total: 0, file: 'cfg.json'});
      const cfgText = await cfg.response.text();
      checkCfg(cfgText);  // before asking for the weights
      const {response} = await loader.fetchPartInfo(weightsUrl, null, false, abort.signal);
      const {total, body, resume} = await loader.sizedBody(weightsUrl, response, abort.signal);
      gguf = await convert(cfgText, total, async (converter) => {
        const loaded = await loader.pump(converter, body, Phase.download, 0, total, resume, 'sae_weights.safetensors');
        if (loaded !== total) {
          throw new Error(`The download of sae_weights.safetensors is incomplete: received ${loaded} of ${total} bytes.`);
        }
      });
    } catch (e) {
      abort.abort();
      throw e;
    }
    post({type: Msg.saeProgress, phase: Phase.parse, loaded: gguf.length, total: gguf.length});
    const sae = engine.loadSae(gguf);
    if (!cache) {
      notes.push('The browser cache is not available to this page, so the SAE will be downloaded and converted again next time.');
    } else {
      try {
        await cache.put(key, new Response(gguf, {headers: {'Content-Type': 'application/octet-stream',
                                                           'Content-Length': String(gguf.length)}}));
      } catch (e) {
        await cache.delete(key).catch(() => {});
        notes.push(`The converted SAE could not be stored in the browser cache (${errorMessage(e)}); it will be ` +
                   'downloaded and converted again next time.');
      }
    }
    return {sae, from: 'network', note: notes.join(' ')};
  }

  // A .gguf alone, or a cfg.json with a .safetensors.
  async function fromFiles(files) {
    const gguf = files.find((f) => /\.gguf$/i.test(f.name));
    if (gguf) {
      checkRoom(gguf.size);
      post({type: Msg.saeProgress, phase: Phase.file, loaded: 0, total: gguf.size, file: gguf.name});
      const bytes = new Uint8Array(await gguf.arrayBuffer());
      post({type: Msg.saeProgress, phase: Phase.parse, loaded: bytes.length, total: bytes.length});
      return {sae: engine.loadSae(bytes), name: gguf.name};
    }
    const cfg = files.find((f) => /\.json$/i.test(f.name));
    const weights = files.find((f) => /\.safetensors$/i.test(f.name));
    if (!cfg || !weights) {
      throw new Error('Choose an SAE as one .gguf file (gpt2-convert --sae), or as its cfg.json and ' +
                      'sae_weights.safetensors together.');
    }
    if (!(weights.size > 0)) throw new Error(`${weights.name} is empty.`);
    const cfgText = await cfg.text();
    checkCfg(cfgText);
    const gg = await convert(cfgText, weights.size, async (converter) => {
      const loaded = await loader.pump(converter, weights.stream(), Phase.file, 0, weights.size, null, weights.name);
      if (loaded !== weights.size) throw new Error(`Could only read ${loaded} of ${weights.size} bytes of ${weights.name}.`);
    });
    post({type: Msg.saeProgress, phase: Phase.parse, loaded: gg.length, total: gg.length});
    return {sae: engine.loadSae(gg), name: `${cfg.name} + ${weights.name}`};
  }

  async function handleLoad(msg) {
    try {
      if (!info) throw new Error('Load a model first: an SAE reads one of its hook points.');
      const source = msg.source || {};
      let r;
      if (source.kind === 'hf') {
        const layer = source.layer | 0;
        r = await fromUrls(hfSaeUrl(source.hf, layer, 'cfg.json'), hfSaeUrl(source.hf, layer, 'sae_weights.safetensors'));
        r.name = `jbloom block ${layer} (blocks.${layer}.hook_resid_pre)`;
        if (r.from === 'network') r.from = 'hf';
      } else if (source.kind === 'url') {
        const {cfg, weights} = saeFolderUrls(source.folder, kPageBase);
        r = await fromUrls(cfg, weights);
        r.name = source.folder;
      } else if (source.kind === 'gguf') {
        const bytes = await ggufFromUrl(source.url, checkRoom, (m) => post({type: Msg.saeProgress, ...m}));
        post({type: Msg.saeProgress, phase: Phase.parse, loaded: bytes.length, total: bytes.length});
        r = {sae: engine.loadSae(bytes), name: source.url, from: 'network'};
      } else if (source.kind === 'files') {
        r = await fromFiles(Array.from(source.files || []));
        r.from = 'file';
      } else {
        throw new Error('Unknown SAE source.');
      }
      sources.set(r.sae.id, {name: r.name, share: r.from === 'file' ? '' : saeSourceText(source), from: r.from});
      list(r.sae.id, r.note);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sae, message: explainSaeError(e)});
      list();
    }
  }

  function handleDrop(msg) {
    try {
      if (engine && info) engine.dropSae(msg.id);
      sources.delete(msg.id);
      list();
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sae, message: errorMessage(e)});
    }
  }

  // The picked token's features (engine.saeFeatures: descending, zeros left out), each with the
  // tokens its decoder direction promotes and suppresses most (W_dec[F] @ W_U).
  function handleFeatures(msg) {
    try {
      if (!info) throw new Error('Load a model first.');
      const id = msg.id, k = Math.max(1, msg.k | 0 || 10), logitK = Math.max(1, msg.logitK | 0 || 5);
      const {under: spec} = under.ensure(msg.interventions, {capture: true});
      const r = engine.saeFeatures(id, msg.position | 0, k);
      const logits = engine.saeLogitWeights(id, r.features, logitK);  // [features] of SaeLogitWeights
      const ids = logits.flatMap((l) => [...l.promoted, ...l.suppressed]);
      reply(post, Msg.saeFeatures, spec, r, {id, position: msg.position | 0, logits, pieces: tokenPieces(engine, ids)});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sae, message: errorMessage(e)});
    }
  }

  function handleStrip(msg) {
    try {
      if (!info) throw new Error('Load a model first.');
      const {under: spec} = under.ensure(msg.interventions, {capture: true});
      reply(post, Msg.saeStrip, spec, {values: engine.saeStrip(msg.id, msg.feature | 0)}, {id: msg.id, feature: msg.feature | 0});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.sae, message: errorMessage(e)});
    }
  }

  return {
    // The engine serving the model: SAEs live in it, so another one has none of them.
    attach(newEngine, newInfo) {
      const had = sources.size > 0 && newEngine !== engine;
      if (newEngine !== engine) sources.clear();
      engine = newEngine;
      info = newInfo;
      if (had) list(-1, 'The SAEs were dropped with the model they read; load them again for this one.');
    },
    load: handleLoad,
    drop: handleDrop,
    features: handleFeatures,
    strip: handleStrip,
  };
}

// The converter's and the engine's messages, with what to do about them.
function explainSaeError(e) {
  const m = errorMessage(e);
  if (/magic|not a gguf/i.test(m)) return `This is not an SAE GGUF file (${m}).`;
  if (/interrupted|dropped|unreachable|answered/i.test(m)) return `${m} Nothing was cached.`;
  return m;
}
