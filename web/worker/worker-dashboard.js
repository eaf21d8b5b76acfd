// Feature dashboards in the engine's worker (protocol.js documents the messages): the engine's
// dashboard job (src/lab/dashboard_file.h, what `gpt2 dashboard` runs) fed a corpus as it streams
// in, from the small model's held-out text beside the page, a local file or a URL, a window at a
// time with progress and a cancel between engine calls; the reply is the file `gpt2 dashboard
// --json` writes, as text (shared/dashboard.js reads it). A finished file is kept in the Cache API
// under a key naming the model, the dictionary, the corpus and the options, and read from there
// when the same dashboards are asked for again.

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

// A synthetic URL for the Cache API: the request's identity in its query.
const cacheUrl = (key) => `https://dashboards.invalid/?${new URLSearchParams({key: JSON.stringify(key)})}`;

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

  // Runs the engine's job until it wants more text or has finished, posting progress.
  async function run(read) {
    let calls = 0;
    for (;;) {
      if (cancelled) return false;
      if (engine.dashboardWantsInput()) return true;
      const p = engine.jobProgress();
      if (p.finished) return true;
      engine.continueJob();
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
      const hit = cache ? await cache.match(cacheUrl(key)).catch(() => undefined) : undefined;
      if (hit) {
        reply(post, Msg.dashboard, kPlain, {text: await hit.text()},
              {cached: true, cancelled: false, request: msg.request, ms: performance.now() - started});
        return;
      }
      const source = await open(corpus);
      const read = {bytes: 0, size: source.size};
      engine.startDashboard({corpus: source.name, model: modelName, dictionary: msg.dictionary,
                             blocks: msg.blocks || [], features: msg.features || [], ...options},
                            msg.dictionary === 'sae' ? msg.saeId | 0 : -1);
      running = true;
      for (;;) {
        const {value, done} = await source.reader.read();
        if (cancelled) break;
        if (done) {
          engine.endDashboardInput();
          break;
        }
        read.bytes += value.length;
        engine.feedDashboard(value);
        if (!(await run(read))) break;
        // The first maxTokens tokens are in: the rest of the corpus is never read.
        if (engine.dashboardInputFull()) {
          source.reader.cancel().catch(() => {});
          engine.endDashboardInput();
          break;
        }
      }
      if (!cancelled) await run(read);
      if (cancelled) {
        source.reader.cancel().catch(() => {});
        engine.endJob();
        running = false;
        reply(post, Msg.dashboard, kPlain, {text: ''},
              {cached: false, cancelled: true, request: msg.request, ms: performance.now() - started});
        return;
      }
      const text = engine.dashboardText();
      engine.endJob();
      running = false;
      if (cache) {
        await cache.put(cacheUrl(key), new Response(text, {headers: {'content-type': 'application/json'}}))
            .catch(() => {});  // a full cache only costs computing it again
      }
      reply(post, Msg.dashboard, kPlain, {text},
            {cached: false, cancelled: false, request: msg.request, ms: performance.now() - started});
    } catch (e) {
      if (running) {
        try { engine.endJob(); } catch { /* ended */ }
      }
      // Every block's dashboards over a large corpus are a text past what one string holds.
      const message = e instanceof RangeError && /string length/i.test(e.message)
          ? 'These dashboards are more text than the browser can hold in one piece: ' +
            'pick fewer blocks or features, or a shorter corpus.'
          : errorMessage(e);
      post({type: Msg.error, kind: ErrorKind.dashboard, message});
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
