// Feature dashboards in the engine's worker (protocol.js documents the messages): the engine's
// dashboard job (src/lab/dashboard_file.h, what `gpt2 dashboard` runs) fed a corpus as it streams
// in, from the small model's held-out text beside the page, a local file or a URL, a window at a
// time with progress and a cancel between engine calls; the reply is the file `gpt2 dashboard
// --json` writes, as a Blob taken from the engine a piece at a time as features finish (every
// block's file passes what one string, or the module's memory, holds), with where each feature's
// object lies in it (the page reads a feature when it is shown). A finished file and its index are
// kept in the Cache API under a key naming the model, the dictionary, the corpus and the options,
// and read from there when the same dashboards are asked for again.

import {metadataOfHead} from '../shared/dashboard.js';
import {canonical} from '../shared/interventions.js';
import {ErrorKind, Msg, errorMessage} from '../shared/protocol.js';
import {reply} from './reply.js';
import {kPageBase} from './worker-load.js';

// The small model's held-out text (weights/README.md), beside the page as the model is.
export const kHeldOutCorpus = 'weights/gpt2-tiny-heldout.txt';
const kCacheName = 'gpt2-dashboards';
const kPlain = canonical({});  // dashboards read the plain model, as graphs do
// Engine calls between yields while windows run: each is one window's forward and encoders
// (milliseconds for the small model, ~0.1 s for GPT-2 small), so a cancel waits about this many.
const kWindowsPerYield = 4;

// Synthetic URLs for the Cache API: the request's identity in the query; the file, and its index.
const cacheUrl = (key, part = 'file') =>
  `https://dashboards.invalid/${part}?${new URLSearchParams({key: JSON.stringify(key)})}`;
// The engine's pieces gather into the file's Blob once they hold this many bytes.
const kFoldBytes = 16 << 20;
const kIndexKeys = ['layers', 'indices', 'maxActs', 'begins', 'ends'];
const kIndexTypes = {layers: Int32Array, indices: Int32Array, maxActs: Float32Array, begins: Float64Array, ends: Float64Array};

// The file's metadata, from its first line ({"metadata": {...}, "features":[).
async function metadataOf(file) {
  const head = await file.slice(0, 1 << 20).text();
  const metadata = metadataOfHead(head.slice(0, head.indexOf('\n')));
  if (!metadata) throw new Error('The dashboards\' file does not open with its metadata.');
  return metadata;
}

// post, yieldToEvents: worker.js's.
export function createDashboards({post, yieldToEvents}) {
  let engine = null;
  let info = null;
  let modelName = '';
  let cancelled = false;

  // The corpus's bytes in pieces: {name (its extension picks .txt or .jsonl), size (or 0 when
  // unknown), reader (a ReadableStream reader)}.
  async function open(corpus) {
    if (corpus.kind === 'file') {
      if (!corpus.file) throw new Error('Choose a .txt or .jsonl file first.');
      return {name: corpus.file.name, size: corpus.file.size, reader: corpus.file.stream().getReader()};
    }
    const url = corpus.kind === 'held-out' ? new URL(kHeldOutCorpus, kPageBase).href : String(corpus.url || '').trim();
    if (!url) throw new Error('Type the URL of a .txt or .jsonl corpus first.');
    let absolute;
    try {
      absolute = new URL(url, kPageBase);
    } catch {
      throw new Error(`${url} is not a URL.`);
    }
    let r;
    try {
      r = await fetch(absolute.href);
    } catch (e) {
      throw new Error(`${absolute.href} is unreachable (${errorMessage(e)}).`);
    }
    if (!r.ok) throw new Error(`${absolute.href} answered ${r.status}.`);
    const name = decodeURIComponent(absolute.pathname.split('/').pop() || 'corpus.txt');
    return {name, size: Number(r.headers.get('content-length')) || 0, reader: r.body.getReader()};
  }

  // The file as the engine writes it: its pieces, gathered into a Blob (the browser holds it, not
  // this worker's heap), and per feature where its object lies.
  function createFile() {
    let blob = new Blob([]);
    const parts = [];
    let held = 0;
    const index = Object.fromEntries(kIndexKeys.map((k) => [k, []]));
    return {
      take() {
        const piece = engine.takeDashboardPiece();
        if (piece.text.length) {
          parts.push(piece.text);
          held += piece.text.length;
        }
        if (held >= kFoldBytes) {
          blob = new Blob([blob, ...parts.splice(0)]);
          held = 0;
        }
        for (const k of kIndexKeys) for (const v of piece[k]) index[k].push(v);
      },
      async finish() {
        const file = new Blob([blob, ...parts.splice(0)], {type: 'application/json'});
        return {file, metadata: await metadataOf(file),
                index: Object.fromEntries(kIndexKeys.map((k) => [k, kIndexTypes[k].from(index[k])]))};
      },
    };
  }

  // Runs the engine's job until it wants more text or has finished, posting progress.
  async function run(read, file) {
    let calls = 0;
    for (;;) {
      if (cancelled) return false;
      if (engine.dashboardWantsInput()) return true;
      const p = engine.jobProgress();
      if (p.finished) return true;
      engine.continueJob();
      file.take();
      if (++calls % kWindowsPerYield === 0) {
        reply(post, Msg.dashboardProgress, kPlain, engine.jobProgress(), {bytes: read.bytes, size: read.size});
        await yieldToEvents();
      }
    }
  }

  async function handleCompute(msg) {
    const started = performance.now();
    let running = false;
    try {
      if (!info) throw new Error('Load a model first.');
      const corpus = msg.corpus || {};
      const options = msg.options || {};
      const key = {model: modelName, nLayer: info.n_layer, nVocab: info.n_vocab, dictionary: msg.dictionary,
                   dictionaryName: msg.dictionaryName || '', blocks: msg.blocks || [], features: msg.features || [],
                   corpus: corpus.kind === 'file' ? {file: corpus.file?.name, size: corpus.file?.size,
                                                     modified: corpus.file?.lastModified} :
                       {kind: corpus.kind, url: corpus.url || ''},
                   options};
      const cache = self.caches ? await self.caches.open(kCacheName).catch(() => null) : null;
      const hit = cache ? await cached(cache, key) : null;
      if (hit) {
        reply(post, Msg.dashboard, kPlain, hit,
              {cached: true, cancelled: false, request: msg.request, ms: performance.now() - started});
        return;
      }
      const source = await open(corpus);
      const read = {bytes: 0, size: source.size};
      engine.startDashboard({corpus: source.name, model: modelName, dictionary: msg.dictionary,
                             blocks: msg.blocks || [], features: msg.features || [], ...options},
                            msg.dictionary === 'sae' ? msg.saeId | 0 : -1);
      running = true;
      const file = createFile();
      for (;;) {
        const {value, done} = await source.reader.read();
        if (cancelled) break;
        if (done) {
          engine.endDashboardInput();
          break;
        }
        read.bytes += value.length;
        engine.feedDashboard(value);
        if (!(await run(read, file))) break;
        // The first maxTokens tokens are in: the rest of the corpus is never read.
        if (engine.dashboardInputFull()) {
          source.reader.cancel().catch(() => {});
          engine.endDashboardInput();
          break;
        }
      }
      if (!cancelled) await run(read, file);
      if (cancelled) {
        source.reader.cancel().catch(() => {});
        engine.endJob();
        running = false;
        reply(post, Msg.dashboard, kPlain, {file: null},
              {cached: false, cancelled: true, request: msg.request, ms: performance.now() - started});
        return;
      }
      engine.endJob();
      running = false;
      const done = await file.finish();
      if (cache) await store(cache, key, done);
      reply(post, Msg.dashboard, kPlain, done,
            {cached: false, cancelled: false, request: msg.request, ms: performance.now() - started});
    } catch (e) {
      if (running) {
        try { engine.endJob(); } catch { /* ended */ }
      }
      post({type: Msg.error, kind: ErrorKind.dashboard, message: errorMessage(e)});
    }
  }

  // A finished file and its index in the cache; a full cache only costs computing them again.
  async function store(cache, key, {file, metadata, index}) {
    const json = {metadata, ...Object.fromEntries(kIndexKeys.map((k) => [k, Array.from(index[k])]))};
    try {
      await cache.put(cacheUrl(key), new Response(file, {headers: {'content-type': 'application/json'}}));
      await cache.put(cacheUrl(key, 'index'), new Response(JSON.stringify(json), {headers: {'content-type': 'application/json'}}));
    } catch {
      await cache.delete(cacheUrl(key, 'index')).catch(() => {});
    }
  }

  // The same request's file and index from the cache, or null (both must be there).
  async function cached(cache, key) {
    try {
      const [hit, hitIndex] = await Promise.all([cache.match(cacheUrl(key)), cache.match(cacheUrl(key, 'index'))]);
      if (!hit || !hitIndex) return null;
      const json = await hitIndex.json();
      return {file: await hit.blob(), metadata: json.metadata,
              index: Object.fromEntries(kIndexKeys.map((k) => [k, kIndexTypes[k].from(json[k])]))};
    } catch {
      return null;
    }
  }

  return {
    attach(newEngine, newInfo, name) {
      engine = newEngine;
      info = newInfo;
      modelName = name || '';
    },
    cancel() { cancelled = true; },
    clearCancel() { cancelled = false; },
    compute: handleCompute,
  };
}
