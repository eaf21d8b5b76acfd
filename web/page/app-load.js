// The page's model panel: loading a model from a URL, a local file (picked or dropped) or
// Hugging Face (converted in the worker), its progress, the browser cache, and a second visit's
// load of the cached model without a click. app.js hands it the store, the worker and its helpers
// (protocol.js documents the messages); state lives in the store.
import {hfCacheKey, hfChoice, kHfModels, kHfWeights} from '../shared/hf.js';
import {Msg, Phase} from '../shared/protocol.js';
import {mb, progressWords} from '../views/viz.js';

// store, worker, $, on: app.js's; params: the page's URL parameters; canLoad(s): whether a load
// may start now; engineMode(): the engine in words; modelReady(info): what the rest of the page
// does with a new model (called after the panel's own state is set).
export function createLoadPanel({store, worker, $, on, params, canLoad, engineMode, modelReady}) {
  const state = store.state;
  // Get GPT-2: Hugging Face, or the server named by ?hf=BASE (tests use a local one).
  const hfBase = params.get('hf') || 'https://huggingface.co';

  // What a person starts is drawn at once (store.flush), not at the next frame: the page answers
  // input immediately, and a reader of the DOM never sees the last error next to a new action.
  function startLoad(source, text) {
    // The last text's views belong to the last model.
    store.set({error: '', loading: true, info: null, modelSource: source, progress: {value: 0}, progressText: text,
               acts: null, attentionMap: null, lens: null, lensOpen: null, experiment: null, captured: 0, picked: -1,
               target: null, sweep: {running: false}, attribution: null, heads: {running: false},
               quant: {running: false},
               saliency: null, atp: null, attnKey: -1, why: null, atpExact: null});
    store.flush();
  }

  function loadUrl(url) {
    url = url.trim();
    if (!url) { store.set({error: 'Type the URL of a .gguf model file first.'}); return; }
    startLoad(url, `Connecting to ${url}…`);
    store.set({modelUrl: url});
    worker.postMessage({type: Msg.load, url});
  }

  function loadFile(file) {
    if (!file) return;
    startLoad(file.name, `Reading ${file.name}…`);
    store.set({modelUrl: ''});  // a local file cannot be shared by a link
    worker.postMessage({type: Msg.load, file});
  }

  // What this device tells a page about its memory and storage (either may be unknown).
  const deviceFacts = (s) => ({deviceMemory: navigator.deviceMemory, storageFree: s.storageFree});
  const hfChoiceOf = (s) => hfChoice(s.hfModel, s.hfWeights, deviceFacts(s));
  navigator.storage?.estimate?.().then(({quota, usage}) => {
    if (Number.isFinite(quota) && Number.isFinite(usage)) store.set({storageFree: Math.max(0, quota - usage)});
  }, () => {});

  function getGpt2() {
    const {hfWeights: weights, hfModel: model} = state;
    const label = kHfModels.find((m) => m.id === model).label;
    startLoad(`${model}-${weights}.gguf`, `Getting ${label} (${weights.toUpperCase()})…`);
    store.set({modelUrl: ''});  // shared links name a model URL; this one is made in the browser
    worker.postMessage({type: Msg.getGpt2, hf: hfBase, weights, model});
  }

  function onProgress({phase, loaded, total, file}) {
    const {pct, text} = progressWords({phase, loaded, total}, {
      [Phase.download]: file ? `Downloading ${file}` : 'Downloading',
      [Phase.cache]: 'Reading from the browser cache', [Phase.file]: 'Reading the file',
      [Phase.parse]: 'Checking the file and preparing the model', [Phase.convert]: 'Converting to GGUF'});
    store.set({progress: {value: pct, loaded, total, phase}, progressText: text});
  }

  function onModel({info, source, name, cacheWarning, storing, memoryBytes}) {
    const from = {network: 'downloaded and cached', cache: 'from the browser cache (no download)',
                  file: `from ${name}`, hf: storing ? 'downloaded from Hugging Face and converted; saving it in this browser…'
                                                    : 'downloaded from Hugging Face and converted'}[source];
    if (info.threads) store.set({threads: info.threads});
    store.set({
      loading: false, info, memoryBytes: memoryBytes ?? state.memoryBytes, selectSizes: {blocks: info.n_layer, heads: info.n_head},
      progress: {...state.progress, value: 100, source},
      progressText: `Model ready (${mb(info.file_bytes)}, ${from}).`,
      statsText: state.generating ? state.statsText : `Engine: ${engineMode()}.`,
      error: cacheWarning || state.error,
    });
    worker.postMessage({type: Msg.cacheInfo});
    modelReady(info);
  }

  function onCache({entries, bytes, urls, cleared, stored}) {
    store.set({cachedUrls: urls || [], cacheText: (cleared ? 'Cache cleared. ' : '') +
        (entries ? `${entries} cached file${entries > 1 ? 's' : ''}, ${mb(bytes)}.` : 'Nothing cached.')});
    if (stored && state.info && state.progress.source === 'hf') {
      store.set({progress: {...state.progress, cached: 'true'},
                 progressText: `Model ready (${mb(state.info.file_bytes)}, downloaded from Hugging Face, converted and cached).`});
    }
    if (state.autoLoadPending) autoLoadIfCached();
  }

  // A second visit loads the cached model without a click (and without any download).
  function autoLoadIfCached() {
    const cachedUrls = state.cachedUrls;
    if (!state.ready || !cachedUrls.length || !state.autoLoadPending || state.loading || state.info) return;
    store.set({autoLoadPending: false});
    const url = new URL(state.modelUrlInput.trim(), document.baseURI).href;
    if (cachedUrls.includes(url)) { loadUrl(state.modelUrlInput); return; }
    // Else a GPT-2 converted on an earlier visit (the worker's cache key for it; no request).
    for (const {id} of kHfModels) {
      const converted = kHfWeights.find((w) => cachedUrls.includes(hfCacheKey(hfBase, w, id)));
      if (converted) {
        store.set({hfWeights: converted, hfModel: id});
        getGpt2();
        return;
      }
    }
  }

  // ---- Controls ---------------------------------------------------------------------------------

  function loadClicked() {
    store.set({autoLoadPending: false});
    loadUrl(state.modelUrlInput);
  }
  on($('load'), 'click', loadClicked);
  on($('get-gpt2'), 'click', () => { store.set({autoLoadPending: false}); getGpt2(); });
  on($('model-url'), 'keydown', (e) => { if (e.key === 'Enter' && canLoad(state)) loadClicked(); });
  on($('model-file'), 'change', (e) => { store.set({autoLoadPending: false}); loadFile(e.target.files[0]); });
  on($('clear-cache'), 'click', () => worker.postMessage({type: Msg.clearCache}));

  const drop = $('drop-zone');
  for (const ev of ['dragenter', 'dragover']) {
    document.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('dragging'); });
  }
  for (const ev of ['dragleave', 'drop']) {
    document.addEventListener(ev, () => drop.classList.remove('dragging'));
  }
  document.addEventListener('drop', (e) => {
    e.preventDefault();
    const file = e.dataTransfer?.files?.[0];
    if (!file) return;
    if (state.loading || state.generating) {
      store.set({error: 'Wait for the current work to finish, then drop the file again.'});
      return;
    }
    store.set({autoLoadPending: false});
    loadFile(file);
  });
  drop.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); $('model-file').click(); }
  });

  if (params.get('model')) store.set({modelUrlInput: params.get('model')});
  // A site built with `build-site.sh --with-weights` names the model it ships in version.json; the
  // page opens that one at once (a link's ?model= still wins).
  const siteModel = params.get('model') ? Promise.resolve('') :
    fetch(new URL('../version.json', import.meta.url)).then((r) => (r.ok ? r.json() : {}))
        .then((v) => (typeof v.model === 'string' ? v.model : ''), () => '');
  siteModel.then((url) => { if (url && !state.info && !state.loading) store.set({modelUrlInput: url}); });
  try { $('hf-host').textContent = new URL(hfBase).host; } catch { /* the worker reports a bad URL */ }

  function render(s) {
    const bar = $('progress');
    bar.value = s.progress.value;
    for (const k of ['source', 'loaded', 'total', 'phase', 'cached']) {
      if (s.progress[k] === undefined) delete bar.dataset[k];
      else bar.dataset[k] = s.progress[k];
    }
    $('progress-text').textContent = s.progressText;
    $('cache-info').textContent = s.cacheText;
    $('load').disabled = !canLoad(s);
    const choice = hfChoiceOf(s);
    $('get-gpt2').disabled = !canLoad(s) || !!choice.refusal;
    $('hf-need').textContent = choice.refusal || choice.text;
    $('hf-need').classList.toggle('refusal', !!choice.refusal);
    // The weight types this size fits in, on this device.
    for (const option of $('hf-weights').options) {
      option.disabled = !!hfChoice(s.hfModel, option.value, deviceFacts(s)).refusal;
    }
    $('model-file').disabled = !canLoad(s);
  }

  return {
    render,
    hfBase,
    // The engine has started: a model named in the URL (the demo opens the page so) or shipped
    // with the site loads at once; otherwise the default one only if it is already cached (no
    // unasked-for download).
    engineReady() {
      worker.postMessage({type: Msg.cacheInfo});
      if (params.get('model')) loadUrl(state.modelUrlInput);
      else siteModel.then((url) => { if (url && !state.loading && !state.info) loadUrl(url); else autoLoadIfCached(); });
    },
    // A worker reply of the panel's; false for any other.
    onMessage(msg) {
      switch (msg.type) {
        case Msg.progress: onProgress(msg); return true;
        case Msg.model: onModel(msg); return true;
        case Msg.cache: onCache(msg); return true;
        default: return false;
      }
    },
  };
}
