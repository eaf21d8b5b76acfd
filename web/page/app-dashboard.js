// The page's feature-dashboard panel: dashboards computed by the engine's worker
// (worker-dashboard.js: `gpt2 dashboard` over the small model's held-out text, a local file or a
// URL, with progress and cancel) or opened from a file (ours, or Neuronpedia's export of a block),
// a feature picked among them, the export of what is held. Other panels ask for a feature's
// dashboard through showFeature(): the graph's pinned node and the SAE panel's features. The
// worker's come through openFile(), a Blob with where each feature lies in it; a file opened is
// indexed the same way when it is ours or JSON Lines (indexDashboardFile), else read whole
// (openText). An indexed feature is read from the Blob when shown (every block's file is GBs). State lives in the store (kDashboardState); shared/dashboard.js reads files,
// view-dashboard.js draws.
import {DashboardFileError, dashboardText, featureText, indexDashboardFile, openDashboardBytes, parseDashboardText,
        readIndexedFeature} from '../shared/dashboard.js';
import {Msg} from '../shared/protocol.js';
import {renderIfChanged} from './store.js';
import * as dashboardView from '../views/view-dashboard.js';

// The store's dashboard fields, merged into app.js's initial state.
export const kDashboardState = {
  // {metadata, features, source (in words), dictionary: 'transcoders' | 'sae' | '', file, ours}: a
  // file read whole has every feature; an indexed one (file: its Blob; ours: in our format) has,
  // per feature, {layer, index, maxActApprox, label, at: [begin, end)}, its object's bytes in it.
  dashboards: null,
  dashboardPick: -1,       // index into dashboards.features
  dashboardShown: null,    // {entry, feature}: the last feature read from a file's bytes
  dashboardDictionary: 'transcoders',  // or 'sae:<id>'
  dashboardScope: 'block', // 'graph' | 'block' | 'all' | 'feature'
  dashboardBlock: '0',
  dashboardFeature: null,  // {layer, index}: the feature a panel asked for ('feature' scope)
  dashboardCorpus: 'held-out',  // 'held-out' | 'file' | 'url'
  dashboardCorpusUrl: '',
  dashboardCorpusFile: null,
  dashboardContext: '64',  // the page's defaults hold a block of 1,024 features in tens of MB
  dashboardTop: '10',
  dashboardPerBand: '2',
  dashboardMaxTokens: '',
  dashboardComputing: null,  // the worker's 'dashboard-progress' while it computes ({} before the first)
  dashboardStatus: 'No dashboards yet.',
  dashboardError: '',
};

// store, worker, $, on: app.js's; download(name, blob): app-export.js's; canRun(s): whether the
// engine is free; graphFeatures(): the computed graph's features [[layer, feature], ...] (or []).
export function createDashboardPanel({store, worker, $, on, download, canRun, graphFeatures}) {
  const state = store.state;

  // A text (or a parsed file) read whole. A text that is not a file leaves what was held.
  function openText(text, source, dictionary = '') {
    let parsed;
    try {
      parsed = typeof text === 'string' ? parseDashboardText(text) : text;
    } catch (e) {
      store.set({dashboardError: e instanceof DashboardFileError ? `${source}: ${e.message}` : String(e)});
      return;
    }
    hold(parsed, source, dictionary);
  }

  // The worker's file: {file (a Blob), metadata, index: {layers, indices, maxActs, begins, ends}}.
  function openFile({file, metadata, index}, source, dictionary = '') {
    const features = Array.from(index.layers, (layer, i) => ({
      layer, index: index.indices[i], maxActApprox: index.maxActs[i], label: '',
      at: [index.begins[i], index.ends[i]],
    }));
    hold({metadata, features, file, ours: true}, source, dictionary);
  }

  // A file the user opened: indexed when it is ours or JSON Lines, else read whole; gzip opened.
  async function openUserFile(file) {
    store.set({dashboardStatus: `Reading ${file.name}…`, dashboardError: ''});
    store.flush();
    let blob = file;
    const head = new Uint8Array(await file.slice(0, 2).arrayBuffer());
    if (head[0] === 0x1f && head[1] === 0x8b) {
      blob = await new Response(file.stream().pipeThrough(new DecompressionStream('gzip'))).blob();
    }
    const indexed = await indexDashboardFile(blob, undefined, (done, size) => store.set({
      dashboardStatus: `Reading ${file.name}: ${Math.round((100 * done) / size)}% of ${(size / 1e6).toFixed(0)} MB…`}));
    if (indexed) {
      hold({...indexed, file: blob}, file.name);
    } else {
      openText(await openDashboardBytes(await blob.arrayBuffer()), file.name);
    }
  }

  // A feature of the worker's file, read from its bytes when it is shown.
  async function read(held, entry) {
    try {
      const feature = await readIndexedFeature(held.file, entry);
      if (state.dashboards === held) store.set({dashboardShown: {entry, feature}});
    } catch (e) {
      store.set({dashboardError: `Block ${entry.layer}, feature #${entry.index}: ${e.message}`});
    }
  }

  // An indexed file of another format (Neuronpedia's JSON Lines) in ours, a feature at a time.
  async function exportIndexed(d) {
    try {
      const parts = [`{"metadata":${JSON.stringify(d.metadata ?? {})},"features":[`];
      for (const [i, entry] of d.features.entries()) {
        parts.push(`${i ? ',' : ''}\n${featureText(await readIndexedFeature(d.file, entry))}`);
      }
      parts.push('\n]}\n');
      download('dashboards.json', new Blob(parts, {type: 'application/json'}));
    } catch (e) {
      store.set({dashboardError: `Export: ${e.message}`});
    }
  }

  function hold(parsed, source, dictionary) {
    const dict = parsed.metadata?.dictionary || dictionary;
    const asked = state.dashboardFeature;
    let pick = parsed.features.length ? 0 : -1;
    if (asked) {
      const at = parsed.features.findIndex((f) => f.layer === asked.layer && f.index === asked.index);
      if (at >= 0) pick = at;
    }
    store.set({dashboards: {...parsed, source, dictionary: dict}, dashboardPick: pick, dashboardShown: null, dashboardError: '',
               dashboardStatus: `${parsed.features.length} feature${parsed.features.length === 1 ? '' : 's'} from ${source}` +
                   (parsed.metadata ? ` (${parsed.metadata.n_tokens} tokens in ${parsed.metadata.n_windows} windows of ` +
                                      `${parsed.metadata.context})` : '') + '.'});
  }

  function dictionaryOf(s) {
    if (s.dashboardDictionary.startsWith('sae:')) return {dictionary: 'sae', saeId: Number(s.dashboardDictionary.slice(4))};
    return {dictionary: 'transcoders', saeId: -1};
  }

  function compute() {
    const {dictionary, saeId} = dictionaryOf(state);
    let blocks = [];
    let features = [];
    if (state.dashboardScope === 'block') {
      const b = Number(state.dashboardBlock);
      if (!Number.isInteger(b) || b < 0) { store.set({dashboardError: 'The block must be a whole number.'}); return; }
      blocks = [b];
    } else if (state.dashboardScope === 'graph') {
      features = graphFeatures();
      if (!features.length) { store.set({dashboardError: 'Compute or open a graph first: its features are asked for.'}); return; }
    } else if (state.dashboardScope === 'feature') {
      if (!state.dashboardFeature) { store.set({dashboardError: 'Ask for a feature from the graph or the SAE panel first.'}); return; }
      features = [[state.dashboardFeature.layer, state.dashboardFeature.index]];
    }
    if (dictionary === 'sae') blocks = [];  // an SAE has one block: its features are its own
    const context = Number(state.dashboardContext);
    if (!Number.isInteger(context) || context < 1) { store.set({dashboardError: 'The context must be a whole number of tokens.'}); return; }
    const top = Number(state.dashboardTop), perBand = Number(state.dashboardPerBand);
    if (![top, perBand].every((n) => Number.isInteger(n) && n >= 0)) {
      store.set({dashboardError: 'The top windows and those of each band: whole numbers from 0.'});
      return;
    }
    const options = {context, top, perBand};
    if (String(state.dashboardMaxTokens).trim()) {
      const m = Number(state.dashboardMaxTokens);
      if (!Number.isInteger(m) || m < 1) { store.set({dashboardError: 'Tokens at most: a whole number, or empty for all.'}); return; }
      options.maxTokens = m;
    }
    const corpus = state.dashboardCorpus === 'file' ? {kind: 'file', file: state.dashboardCorpusFile} :
        state.dashboardCorpus === 'url' ? {kind: 'url', url: state.dashboardCorpusUrl} : {kind: 'held-out'};
    if (corpus.kind === 'file' && !corpus.file) { store.set({dashboardError: 'Choose a .txt or .jsonl file first.'}); return; }
    const sae = state.saes?.find((x) => x.id === saeId);
    store.set({dashboardComputing: {}, dashboardError: '', dashboardStatus: 'Starting…'});
    worker.postMessage({type: Msg.dashboard, dictionary, saeId, dictionaryName: sae ? `${sae.hook} ${sae.dSae}` : 'transcoders',
                        blocks, features, corpus, options, request: {dictionary, scope: state.dashboardScope}});
  }

  // A panel asks for one feature's dashboard: shown at once when held, else the 'feature' scope
  // is chosen for it (Compute makes it).
  function showFeature({dictionary, saeId = -1, layer, index}) {
    const held = state.dashboards;
    const at = held && (!held.dictionary || held.dictionary === dictionary) ?
        held.features.findIndex((f) => f.layer === layer && f.index === index) : -1;
    const dict = dictionary === 'sae' ? `sae:${saeId}` : 'transcoders';
    if (at >= 0) {
      store.set({dashboardPick: at, dashboardFeature: {layer, index}});
    } else {
      store.set({dashboardFeature: {layer, index}, dashboardScope: 'feature', dashboardDictionary: dict,
                 dashboardStatus: `Block ${layer}, feature #${index}: press Compute for its dashboard.`});
    }
    $('dashboard-panel').scrollIntoView({block: 'nearest'});
  }

  // ---- Controls ---------------------------------------------------------------------------------

  const kept = (id, key, event = 'input') => $(id).addEventListener(event, (e) => store.set({[key]: e.target.value}));
  kept('dashboard-dictionary', 'dashboardDictionary', 'change');
  kept('dashboard-scope', 'dashboardScope', 'change');
  kept('dashboard-block', 'dashboardBlock');
  kept('dashboard-corpus', 'dashboardCorpus', 'change');
  kept('dashboard-corpus-url', 'dashboardCorpusUrl');
  kept('dashboard-context', 'dashboardContext');
  kept('dashboard-top', 'dashboardTop');
  kept('dashboard-per-band', 'dashboardPerBand');
  kept('dashboard-max-tokens', 'dashboardMaxTokens');
  on($('dashboard-corpus-file'), 'change', (e) => {
    const file = e.target.files?.[0] || null;
    store.set({dashboardCorpusFile: file, dashboardCorpus: file ? 'file' : state.dashboardCorpus});
  });
  on($('dashboard-compute'), 'click', compute);
  on($('dashboard-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
  on($('dashboard-file'), 'change', async (e) => {
    const file = e.target.files?.[0];
    e.target.value = '';
    if (!file) return;
    try {
      await openUserFile(file);
    } catch (err) {
      store.set({dashboardError: `${file.name}: ${err.message}`, dashboardStatus: 'Not opened; the dashboards held before are kept.'});
    }
    store.flush();
  });
  on($('dashboard-pick'), 'change', (e) => store.set({dashboardPick: Number(e.target.value)}));
  on($('dashboard-export'), 'click', () => {
    const d = state.dashboards;
    if (!d) return;
    if (d.file && d.ours) {
      download('dashboards.json', d.file);
    } else if (d.file) {
      exportIndexed(d);
    } else {
      download('dashboards.json', new Blob([dashboardText(d)], {type: 'application/json'}));
    }
  });

  // ---- Worker replies ---------------------------------------------------------------------------

  function onMessage(msg) {
    if (msg.type === Msg.dashboardProgress) {
      const what = msg.phase === 'windows' ?
          `Reading windows: ${msg.done} of ${msg.total} read so far` +
              (msg.size ? ` (${Math.round((100 * msg.bytes) / msg.size)}% of the text)` : '') :
          `Finishing features: ${msg.done} of ${msg.total}`;
      store.set({dashboardComputing: msg, dashboardStatus: `${what}…`});
      return true;
    }
    if (msg.type === Msg.dashboard) {
      store.set({dashboardComputing: null});
      if (msg.cancelled) {
        store.set({dashboardStatus: 'Cancelled; the dashboards held before are kept.'});
        return true;
      }
      openFile(msg, `${msg.cached ? 'the browser cache' : 'the engine'}, in ${(msg.ms / 1000).toFixed(1)} s`,
               msg.request?.dictionary);
      return true;
    }
    return false;
  }

  function onError(message) {
    store.set({dashboardComputing: null, dashboardError: message, dashboardStatus: 'Not computed.'});
  }

  // ---- Drawing ----------------------------------------------------------------------------------

  let reading = null;  // the entry being read from the file

  function render(s) {
    const busy = !canRun(s) || !!s.dashboardComputing;
    $('dashboard-compute').disabled = busy || !s.info;
    $('dashboard-cancel').disabled = !s.dashboardComputing;
    const dict = $('dashboard-dictionary');
    const options = [['transcoders', `the graph's transcoders (${s.graphTranscoders?.blocks?.length ?? 0} blocks)`],
                     ...(s.saes || []).map((x) => [`sae:${x.id}`, `SAE ${x.id}: ${x.hook}`])];
    const optionsKey = JSON.stringify(options);
    if (dict.dataset.options !== optionsKey) {
      dict.replaceChildren(...options.map(([value, text]) => new Option(text, value)));
      dict.dataset.options = optionsKey;
    }
    dict.value = s.dashboardDictionary;
    $('dashboard-scope').value = s.dashboardScope;
    $('dashboard-corpus').value = s.dashboardCorpus;
    $('dashboard-status').textContent = s.dashboardStatus;
    $('dashboard-error').textContent = s.dashboardError;
    $('dashboard-error').hidden = !s.dashboardError;
    const p = s.dashboardComputing;
    $('dashboard-progress').value = p && p.total ? (100 * p.done) / p.total : 0;
    $('dashboard-export').disabled = !s.dashboards;
    const pick = $('dashboard-pick');
    const features = s.dashboards?.features || [];
    if (pick.dataset.held !== String(features.length) + (s.dashboards?.source || '')) {
      // Appended one by one: every block's 294,912 features as arguments overflow the call stack.
      const options = document.createDocumentFragment();
      features.forEach((f, i) => options.append(
        new Option(`block ${f.layer}, #${f.index}${f.label ? `: ${f.label}` : ''} (max ${f.maxActApprox.toPrecision(3)})`, String(i))));
      pick.replaceChildren(options);
      pick.dataset.held = String(features.length) + (s.dashboards?.source || '');
    }
    pick.value = String(s.dashboardPick);
    pick.disabled = !features.length;
    const entry = features[s.dashboardPick] || null;
    let feature = entry;
    if (entry?.at) {
      feature = s.dashboardShown?.entry === entry ? s.dashboardShown.feature : null;
      if (!feature && reading !== entry) {
        reading = entry;
        read(s.dashboards, entry).finally(() => { if (reading === entry) reading = null; });
      }
    }
    renderIfChanged(dashboardView.render, $('dashboard-view'),
                    {feature, label: '', source: s.dashboards?.source || ''});
  }

  return {render, onMessage, onError, showFeature, openText};
}
