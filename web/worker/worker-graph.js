// Attribution graphs in the engine's worker (protocol.js documents the messages): transcoders
// loaded into the model one block at a time, the graph of a prompt computed as a job the page can
// cancel, its check, its features' cards and
// the QK attribution of a head's score on its prompt. A block comes from Hugging Face (the public GPT-2
// small set, transcoders.js), from a folder URL laid out like it, or from local .gguf files
// (gpt2-convert --transcoders, any blocks). A downloaded block's sae.safetensors is converted to
// Q8_0 by the engine's Converter (gpt2-convert's code), loaded (engine.loadTranscoders adds it to
// the blocks held) and kept in the Cache API under its URL + '.q8_0.gguf', so the next visit
// reads 40 MB per block from the cache instead of 151 MB from the network. The engine owns its
// transcoders: another model drops them (attach).

import {canonical} from '../shared/interventions.js';
import {ErrorKind, Msg, Phase, errorMessage} from '../shared/protocol.js';
import {cfgShape, saeCacheKey, saeRefusal} from '../shared/sae.js';
import {reply, tokenPieces} from './reply.js';
import {hfTranscoderFolder, transcoderBytes, transcoderUrls} from './transcoders.js';
import {ggufFromUrl, kPageBase} from './worker-load.js';

const kPlain = canonical({});  // what the replies say they ran under, as the jobs' do
// The page sends the graph JSON pruned this loosely, so its node slider can show more than
// circuit-tracer's default 0.8 without computing again; the edges kept are circuit-tracer's 0.98.
const kSentNodeThreshold = 0.99;
const kEdgeThreshold = 0.98;
const kCardTokens = 8;
const kQkParts = 12;  // of each side, and pairs

// post, yieldToEvents, module: as worker-sae.js's; loader: a createLoader whose progress goes out
// as 'transcoders-progress'; under: what the engine computes under (the graph is the plain model's).
export function createGraph({post, yieldToEvents, loader, module, under}) {
  let engine = null;
  let info = null;
  let blocks = [];       // the blocks held
  let bytesHeld = 0;     // their GGUFs' bytes
  let cancelled = false;
  let graphIds = null;   // the last finished graph's ids (the BOS first), for the cards' pieces

  const progress = (m) => post({type: Msg.transcodersProgress, ...m});

  function listed(note = '', from = '') {
    post({type: Msg.transcoders, blocks, bytes: bytesHeld, nLayer: info?.n_layer ?? 0, note, from});
  }

  function checkRoom(needBytes) {
    const refusal = saeRefusal({modelBytes: 1.1 * info.file_bytes, loadedBytes: bytesHeld, needBytes,
                                count: blocks.length, deviceMemory: self.navigator?.deviceMemory,
                                what: 'transcoder block', held: 'transcoder block'});
    if (refusal) throw new Error(refusal);
  }

  function add(gguf) {
    blocks = Array.from(engine.loadTranscoders(gguf));
    bytesHeld += gguf.length;
  }

  // Block `layer`'s sae.json text ('' when the folder has none: the weights alone define a
  // ReLU transcoder), or null when the folder has no such block (optional blocks only).
  async function fetchJson(url, signal) {
    let r;
    try {
      r = await fetch(url, {cache: 'no-store', signal});
    } catch (e) {
      throw new Error(`Could not download ${url}: the address is unreachable (${errorMessage(e)}).`);
    }
    if (r.status === 404) return '';
    if (!r.ok) throw new Error(`Could not download ${url}: the server answered ${r.status} ${r.statusText || ''}`.trim() + '.');
    return r.text();
  }

  // One block from its folder: the cached conversion if there is one, else downloaded (resumed by
  // Range after a drop), converted and cached once the engine holds it. Returns 'cache' or
  // 'network', or null when `optional` and the folder has no such block. Notes go to `notes`.
  async function fromUrls(layer, {json: jsonUrl, weights: weightsUrl}, optional, notes) {
    const key = saeCacheKey(weightsUrl);
    const cache = await loader.openCache();
    const hit = cache ? await cache.match(key) : null;
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      progress({phase: Phase.cache, loaded: bytes.length, total: bytes.length, block: layer});
      checkRoom(bytes.length);
      try {
        add(bytes);
        return 'cache';
      } catch (e) {
        await cache.delete(key).catch(() => {});
        notes.push(`The cached block ${layer} could not be used (${errorMessage(e)}); it was deleted and made again.`);
      }
    }
    const abort = new AbortController();
    let gguf;
    try {
      const json = await fetchJson(jsonUrl, abort.signal);
      const shape = cfgShape(json);
      if (shape && shape.dIn !== info.n_embd) {
        throw new Error(`Transcoder block ${layer} reads vectors of width ${shape.dIn} (its sae.json's d_in), but the ` +
                        `loaded model's stream has width ${info.n_embd}: it was trained on another model.`);
      }
      if (shape) checkRoom(transcoderBytes(shape.dIn, shape.dSae).peak);
      let part;
      try {
        part = await loader.fetchPartInfo(weightsUrl, null, false, abort.signal);
      } catch (e) {
        if (optional && /answered 404/.test(errorMessage(e))) return null;
        throw e;
      }
      const {total, body, resume} = await loader.sizedBody(weightsUrl, part.response, abort.signal);
      if (!shape) checkRoom(2 * total);  // no sae.json: the f32 checkpoint's size is the guide
      const converter = new (module().Converter)();
      try {
        converter.beginCheckpoint(total);
        const loaded = await loader.pump(converter, body, Phase.download, 0, total, resume, `block ${layer}: sae.safetensors`);
        if (loaded !== total) {
          throw new Error(`The download of block ${layer}'s sae.safetensors is incomplete: received ${loaded} of ${total} bytes.`);
        }
        await loader.convertAll(converter, converter.planTranscoder(json, layer, 'q8_0').tensors, yieldToEvents);
        gguf = converter.takeOutput();
      } finally {
        converter.delete();
      }
    } catch (e) {
      abort.abort();
      throw e;
    }
    progress({phase: Phase.parse, loaded: gguf.length, total: gguf.length, block: layer});
    add(gguf);
    if (cache) {
      try {
        await cache.put(key, new Response(gguf, {headers: {'Content-Type': 'application/octet-stream',
                                                           'Content-Length': String(gguf.length)}}));
      } catch (e) {
        await cache.delete(key).catch(() => {});
        notes.push(`Block ${layer} could not be stored in the browser cache (${errorMessage(e)}).`);
      }
    }
    return 'network';
  }

  // Every block of the model from a folder (Hugging Face's: all required; a URL's: those present).
  async function fromFolder(folder, required, notes) {
    const froms = new Set();
    let found = 0;
    for (let l = 0; l < info.n_layer && !cancelled; ++l) {
      const from = await fromUrls(l, transcoderUrls(folder, l, kPageBase), !required, notes);
      if (from) {
        froms.add(from);
        ++found;
      }
      await yieldToEvents();
    }
    if (cancelled) notes.push(`Stopped after ${found} block${found === 1 ? '' : 's'}; the blocks loaded are kept.`);
    else if (!found) throw new Error(`${folder} has no transcoder block (expected gpt2-small-dun-chl-mlp-tc0/sae.safetensors and the like).`);
    return froms.has('network') ? 'network' : 'cache';
  }

  async function fromFiles(files) {
    if (!files.length || files.some((f) => !/\.gguf$/i.test(f.name))) {
      throw new Error('Choose transcoder .gguf files (gpt2-convert --transcoders DIR --output T.gguf); a folder of ' +
                      'sae.safetensors files loads by its URL.');
    }
    for (const f of files) {
      checkRoom(f.size);
      progress({phase: Phase.file, loaded: 0, total: f.size, file: f.name});
      const bytes = new Uint8Array(await f.arrayBuffer());
      progress({phase: Phase.parse, loaded: bytes.length, total: bytes.length, file: f.name});
      add(bytes);
    }
  }

  async function handleLoad(msg) {
    const notes = [];
    let from = '';
    try {
      if (!info) throw new Error('Load a model first: transcoders read its blocks.');
      const source = msg.source || {};
      if (source.kind === 'hf') from = await fromFolder(hfTranscoderFolder(source.hf), true, notes) === 'network' ? 'hf' : 'cache';
      else if (source.kind === 'url') from = await fromFolder(source.folder, false, notes);
      else if (source.kind === 'files') { await fromFiles(Array.from(source.files || [])); from = 'file'; }
      else if (source.kind === 'gguf') { add(await ggufFromUrl(source.url, checkRoom, progress)); from = 'network'; }
      else throw new Error('Unknown transcoder source.');
      graphIds = null;  // the engine dropped its graph: it read the old set
      listed(notes.join(' '), from);
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.graph, message: /interrupted|dropped|unreachable|answered/i.test(errorMessage(e))
          ? `${errorMessage(e)} The blocks loaded before are kept.` : errorMessage(e)});
      listed(notes.join(' '));
    }
  }

  function handleDrop() {
    try {
      if (engine && info) engine.dropTranscoders();
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.graph, message: errorMessage(e)});
    }
    blocks = [];
    bytesHeld = 0;
    graphIds = null;
    listed();
  }

  // The graph of msg.prompt in short engine calls (a block's features, then batches of rows, a
  // backward pass each) with progress and a cancel between them; the reply's text is
  // circuit-tracer's graph file.
  async function handleCompute(msg) {
    const started = performance.now();
    try {
      if (!info) throw new Error('Load a model first.');
      if (!blocks.length) throw new Error('Load transcoders first: the graph\'s features are theirs.');
      under.ensure(kPlain);  // the graph is the plain model's
      const ids = Array.from(engine.tokenize(msg.prompt || ''));
      if (!ids.length) throw new Error('Type a prompt for the graph first.');
      const options = msg.maxFeatureNodes > 0 ? {maxFeatureNodes: msg.maxFeatureNodes | 0} : {};
      graphIds = null;
      let p = engine.startGraph(ids, options);
      reply(post, Msg.graphProgress, kPlain, p);
      while (!p.finished && !cancelled) {
        await yieldToEvents();
        if (cancelled) break;
        p = engine.continueGraph();
        reply(post, Msg.graphProgress, kPlain, p);
      }
      if (!p.finished) {
        engine.endJob();
        reply(post, Msg.graph, kPlain, p, {cancelled: true, ms: performance.now() - started});
        return;
      }
      graphIds = [50256, ...ids];
      const text = engine.graphJson(kSentNodeThreshold, kEdgeThreshold, true);
      reply(post, Msg.graph, kPlain, p, {text, prompt: msg.prompt, nodeThreshold: 0.8, cancelled: false,
                                         ms: performance.now() - started});
    } catch (e) {
      try { engine?.endJob(); } catch { /* nothing running */ }
      post({type: Msg.error, kind: ErrorKind.graph, message: errorMessage(e)});
    }
  }

  function handleCheck(msg) {
    try {
      if (!graphIds) throw new Error('Compute a graph first: the check reads the graph the engine computed.');
      under.ensure(kPlain);
      const value = Number(msg.value);
      const r = engine.checkGraph(msg.nodeIds, value);
      reply(post, Msg.graphCheck, kPlain, r, {nodeIds: msg.nodeIds, value, group: String(msg.group || '')});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.graph, message: errorMessage(e)});
    }
  }

  function handleCard(msg) {
    try {
      if (!graphIds) throw new Error('Compute a graph first: a feature\'s card reads the engine\'s transcoders.');
      under.ensure(kPlain);
      const c = engine.graphFeatureCard(msg.layer | 0, msg.feature | 0, kCardTokens);
      reply(post, Msg.graphCard, kPlain, c, {layer: msg.layer | 0, feature: msg.feature | 0, ids: graphIds,
                                             pieces: tokenPieces(engine, [...graphIds, ...c.promoted, ...c.suppressed])});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.graph, message: errorMessage(e)});
    }
  }

  function handleQk(msg) {
    try {
      if (!graphIds) throw new Error('Compute a graph first: QK attribution reads the graph\'s prompt and transcoders.');
      under.ensure(kPlain);
      const query = msg.query < 0 ? graphIds.length - 1 : msg.query | 0;
      const r = engine.graphQk(msg.layer | 0, msg.head | 0, query, msg.key | 0, kQkParts);
      reply(post, Msg.graphQk, kPlain, r, {layer: msg.layer | 0, head: msg.head | 0, query, key: msg.key | 0, ids: graphIds,
                                           pieces: tokenPieces(engine, graphIds)});
    } catch (e) {
      post({type: Msg.error, kind: ErrorKind.graph, message: errorMessage(e)});
    }
  }

  return {
    // The engine serving the model: transcoders live in it, so another one has none.
    attach(newEngine, newInfo) {
      const had = blocks.length > 0 && newEngine !== engine;
      if (newEngine !== engine) {
        blocks = [];
        bytesHeld = 0;
        graphIds = null;
      }
      engine = newEngine;
      info = newInfo;
      if (had) listed('The transcoders were dropped with the model they read; load them again for this one.');
    },
    cancel() { cancelled = true; },
    clearCancel() { cancelled = false; },
    load: handleLoad,
    drop: handleDrop,
    compute: handleCompute,
    check: handleCheck,
    card: handleCard,
    qk: handleQk,
  };
}
