// The page's sparse-autoencoder panel: its controls and the worker's SAE replies meet the store
// here (app.js hands it the store, the worker and its own helpers; protocol.js documents the
// messages). Loading sends 'sae-load'; picking a token asks for its features; steering and
// clamping are the interventions' `sae` list (sae-contract.md), so generation and "Run again"
// (the experiments panel's own path) take them like the other switches, and a shared link names
// the SAEs' sources and the edits (share.js). State lives in the store; view-features.js draws.
import {Msg, Phase} from '../shared/protocol.js';
import {kHfSaeBlocks, labelsText, parseLabels, saeInterventions, saeSourceText} from '../shared/sae.js';
import {renderIfChanged} from './store.js';
import * as featuresView from '../views/view-features.js';
import {renderResult} from '../views/view-experiments.js';
import {mb, progressWords} from '../views/viz.js';

// The store's SAE fields, merged into app.js's initial state.
export const kSaeState = {
  saes: [],            // the worker's 'saes' list
  saeActive: -1,       // the id whose features are shown
  saeLoading: false,
  saeProgress: {value: 0},
  saeStatus: 'No SAE loaded.',
  saeFeatures: null,   // the worker's 'sae-features' reply
  saeSelected: -1,     // the feature whose strip is open
  saeStrip: null,      // the worker's 'sae-strip' reply
  saeLabels: {},       // SAE id -> Map feature -> description
  saeLabelsStatus: '',
  saeUrlInput: '',
  saeLabelsUrlInput: '',
  saeEditFeature: '0',
  saeEditMode: 'steer',
  saeEditValue: '10',
  saeShared: null,     // a link's SAEs being loaded: {sources, steer, clamp, ids, then}
};

const kHfDefault = 'https://huggingface.co';
const kTopFeatures = 10;
const kLogitTokens = 5;

// The interventions' `sae` list as flat edits [{id, feature, mode, value}] (and back: sae.js's
// saeInterventions).
export function saeEdits(iv) {
  return (iv.sae || []).flatMap(({id, steer = [], clamp = []}) => [
    ...steer.map(([feature, value]) => ({id, feature, mode: 'steer', value})),
    ...clamp.map(([feature, value]) => ({id, feature, mode: 'clamp', value}))]);
}

// Whether the interventions change the model (the features are read from the run under them).
const changed = (iv) => !!(iv.ablateHeads?.length || iv.skipAttn?.length || iv.skipMlp?.length || iv.noResidual?.length ||
                           iv.postNorm || iv.sae?.length);

function withEdits(iv, edits) {
  const {sae, ...rest} = iv;
  return edits.length ? {...rest, sae: saeInterventions(edits)} : rest;
}


// store, worker: app.js's; $: getElementById; on(element, type, handler): app.js's handler that
// draws at once; compute(msg): sends a request that computes on the model with the store's
// interventions; hfBase: the page's Hugging Face; canRun(s): whether a run may start now;
// runAgain(): the experiments panel's "Run again"; where(p): a position in words;
// showUnder(id, result): writes what a result was computed under; addShareNote(problems): what a
// link held that the page ignored.
export function createSaePanel({store, worker, $, on, compute, hfBase, canRun, runAgain, where, showUnder, addShareNote,
                                showDashboard}) {
  const state = store.state;

  function load(source) {
    store.set({saeLoading: true, saeProgress: {value: 0}, saeStatus: 'Starting…', error: ''});
    worker.postMessage({type: Msg.saeLoad, source});
  }

  function requestFeatures(position) {
    if (state.saeActive < 0 || position < 0 || state.captured === 0) return;
    compute({type: Msg.saeFeatures, id: state.saeActive, position, k: kTopFeatures, logitK: kLogitTokens});
    if (state.saeSelected >= 0) compute({type: Msg.saeStrip, id: state.saeActive, feature: state.saeSelected});
  }

  function setEdits(edits) {
    store.set({interventions: withEdits(state.interventions, edits)});
  }

  function addEdit() {
    const feature = Number(state.saeEditFeature), value = Number(state.saeEditValue);
    const sae = state.saes.find((x) => x.id === state.saeActive);
    if (!sae) return;
    if (!Number.isInteger(feature) || feature < 0 || feature >= sae.dSae) {
      store.set({error: `Feature must be a whole number in 0..${sae.dSae - 1} (this SAE has ${sae.dSae}).`});
      return;
    }
    if (!Number.isFinite(value) || String(state.saeEditValue).trim() === '') {
      store.set({error: 'The strength or value must be a number.'});
      return;
    }
    const mode = state.saeEditMode === 'clamp' ? 'clamp' : 'steer';
    const edits = saeEdits(state.interventions).filter((e) => !(e.id === sae.id && e.feature === feature && e.mode === mode));
    setEdits([...edits, {id: sae.id, feature, mode, value}]);
    store.set({error: ''});
  }

  function selectFeature(feature) {
    store.set({saeSelected: feature, saeStrip: null, saeEditFeature: String(feature)});
    compute({type: Msg.saeStrip, id: state.saeActive, feature});
  }

  async function loadLabels(read, what) {
    const id = state.saeActive;
    if (id < 0) return;
    store.set({saeLabelsStatus: `Reading ${what}…`});
    try {
      const labels = parseLabels(await read());
      store.set({saeLabels: {...state.saeLabels, [id]: labels},
                 saeLabelsStatus: `${labels.size} labels from ${what} for SAE ${id}.`});
    } catch (e) {
      store.set({saeLabelsStatus: '', error: `Could not read the labels from ${what}: ${e.message}`});
    }
  }

  // ---- Controls ---------------------------------------------------------------------------------

  const kept = (id, key, event = 'input') => $(id).addEventListener(event, (e) => store.set({[key]: e.target.value}));
  kept('sae-url', 'saeUrlInput');
  kept('sae-labels-url', 'saeLabelsUrlInput');
  kept('sae-edit-feature', 'saeEditFeature');
  kept('sae-edit-mode', 'saeEditMode', 'change');
  kept('sae-edit-strength', 'saeEditValue');
  kept('sae-edit-value', 'saeEditValue');
  on($('sae-load-url'), 'click', () => {
    const folder = state.saeUrlInput.trim();
    if (!folder) { store.set({error: 'Type the URL of a folder with cfg.json and sae_weights.safetensors first.'}); return; }
    load({kind: 'url', folder});
  });
  on($('sae-url'), 'keydown', (e) => { if (e.key === 'Enter' && !$('sae-load-url').disabled) $('sae-load-url').click(); });
  on($('sae-file'), 'change', (e) => {
    const files = [...(e.target.files || [])];
    e.target.value = '';
    if (files.length) load({kind: 'files', files});
  });
  on($('sae-hf'), 'click', (e) => {
    const b = e.target.closest('button[data-layer]');
    if (b) load({kind: 'hf', hf: hfBase, layer: Number(b.dataset.layer)});
  });
  on($('sae-list'), 'change', (e) => {
    if (e.target.name !== 'sae-active') return;
    store.set({saeActive: Number(e.target.value), saeFeatures: null, saeSelected: -1, saeStrip: null});
    requestFeatures(state.picked);
  });
  on($('sae-list'), 'click', (e) => {
    const b = e.target.closest('button[data-drop]');
    if (b) worker.postMessage({type: Msg.saeDrop, id: Number(b.dataset.drop)});
  });
  on($('sae-labels-load'), 'click', () => {
    const url = state.saeLabelsUrlInput.trim();
    if (!url) { store.set({error: 'Type the URL of a labels file first.'}); return; }
    loadLabels(async () => {
      const r = await fetch(new URL(url, document.baseURI));
      if (!r.ok) throw new Error(`the server answered ${r.status} ${r.statusText || ''}`.trim());
      return labelsText(await r.arrayBuffer());
    }, url);
  });
  on($('sae-labels-file'), 'change', (e) => {
    const file = e.target.files?.[0];
    e.target.value = '';
    if (file) loadLabels(async () => labelsText(await file.arrayBuffer()), file.name);
  });
  on($('sae-features'), 'click', (e) => {
    const d = e.target.closest('button[data-dashboard]');
    if (d) {
      const sae = state.saes.find((x) => x.id === state.saeActive);
      if (sae) showDashboard?.({dictionary: 'sae', saeId: sae.id, layer: sae.layer, index: Number(d.dataset.dashboard)});
      return;
    }
    const b = e.target.closest('button[data-feature]');
    if (b) selectFeature(Number(b.dataset.feature));
  });
  // Up and down move between the features (Tab leaves the list).
  on($('sae-features'), 'keydown', (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    const buttons = [...$('sae-features').querySelectorAll('button[data-feature]')];
    const i = buttons.indexOf(e.target);
    if (i < 0) return;
    e.preventDefault();
    buttons[Math.max(0, Math.min(buttons.length - 1, i + (e.key === 'ArrowDown' ? 1 : -1)))].focus();
  });
  on($('sae-edit-add'), 'click', addEdit);
  on($('sae-edits'), 'click', (e) => {
    const b = e.target.closest('button[data-remove]');
    if (!b) return;
    const [id, feature, mode] = b.dataset.remove.split(':');
    setEdits(saeEdits(state.interventions).filter((x) => !(x.id === Number(id) && x.feature === Number(feature) && x.mode === mode)));
  });
  on($('sae-run-again'), 'click', runAgain);
  try { $('sae-hf-host').textContent = new URL(hfBase).host; } catch { /* the worker reports a bad URL */ }

  // ---- Worker replies -----------------------------------------------------------------------------

  function onProgress({phase, loaded, total, file}) {
    const {pct, text} = progressWords({phase, loaded, total}, {
      [Phase.download]: `Downloading ${file || 'the SAE'}`, [Phase.cache]: 'Read from the browser cache',
      [Phase.file]: `Reading ${file || 'the file'}`, [Phase.parse]: 'Loading the SAE into the model',
      [Phase.convert]: 'Converting to Q8_0'});
    store.set({saeProgress: {value: pct, phase}, saeStatus: text});
  }

  function onSaes({saes, loaded, note}) {
    const ids = new Set(saes.map((x) => x.id));
    const active = loaded >= 0 ? loaded : ids.has(state.saeActive) ? state.saeActive : (saes[0]?.id ?? -1);
    const from = {network: 'downloaded, converted and cached', hf: 'downloaded from Hugging Face, converted and cached',
                  cache: 'from the browser cache (no download)', file: 'from the file'};
    const just = saes.find((x) => x.id === loaded);
    const patch = {saes, saeActive: active, saeLoading: false,
                   saeStatus: note || (just ? `SAE ${just.id} ready: ${just.hook}, ${just.dSae} features, ${just.architecture}` +
                       `${just.architecture === 'topk' ? ` (k ${just.k})` : ''}, ${mb(just.bytes)}, ${from[just.from] || just.from}.`
                       : saes.length ? state.saeStatus : 'No SAE loaded.'),
                   saeProgress: just ? {value: 100, phase: just.from} : state.saeProgress};
    if (active !== state.saeActive) Object.assign(patch, {saeFeatures: null, saeSelected: -1, saeStrip: null});
    const labels = Object.fromEntries(Object.entries(state.saeLabels).filter(([id]) => ids.has(Number(id))));
    store.set({...patch, saeLabels: labels,
               interventions: withEdits(state.interventions, saeEdits(state.interventions).filter((e) => ids.has(e.id)))});
    if (just && just.from !== 'file') worker.postMessage({type: Msg.cacheInfo});  // it may be cached now
    if (state.saeShared) nextShared(loaded);
    else if (loaded >= 0 || active !== -1) requestFeatures(state.picked);
  }

  // ---- Share ------------------------------------------------------------------------------------

  // A link's SAEs, loaded one after the other, then its edits; then() goes on with the link.
  function restoreShared(shared, then) {
    if (!shared.saes?.length) { then(); return; }
    store.set({saeShared: {sources: shared.saes, steer: shared.saeSteer || [], clamp: shared.saeClamp || [], ids: [], errors: [], then}});
    loadShared();
  }

  function loadShared() {
    const job = state.saeShared;
    const source = job.sources[job.ids.length];
    load(source.kind === 'hf' ? {...source, hf: hfBase} : source);
  }

  // After each of the link's SAEs: its id (-1: it failed), the next one, or the edits.
  function nextShared(id) {
    const job = state.saeShared;
    job.ids.push(id);
    if (job.ids.length < job.sources.length) { loadShared(); return; }
    store.set({saeShared: null});
    const problems = job.ids.flatMap((id, s) => (id >= 0 ? [] :
        [`sae=${saeSourceText(job.sources[s])} (it did not load: ${job.errors[s] || 'unknown error'})`]));
    const edits = [];
    for (const [mode, list] of [['steer', job.steer], ['clamp', job.clamp]]) {
      for (const [s, feature, value] of list) {
        const id = job.ids[s];
        const sae = state.saes.find((x) => x.id === id);
        if (!sae) problems.push(`sae-${mode}=${s}.${feature}:${value} (SAE ${s} of the link did not load)`);
        else if (feature >= sae.dSae) problems.push(`sae-${mode}=${s}.${feature}:${value} (that SAE has features 0..${sae.dSae - 1})`);
        else edits.push({id, feature, mode, value});
      }
    }
    addShareNote(problems);
    setEdits(edits);
    job.then();
  }

  // What a link says of the SAEs: their sources (those loaded from a URL or Hugging Face) and
  // the edits on them as [place among the sources, feature, value]; problems: what it cannot say.
  function shareView() {
    const shareable = state.saes.filter((x) => x.share);
    const place = new Map(shareable.map((x, i) => [x.id, i]));
    const out = {saes: shareable.map((x) => x.share), saeSteer: [], saeClamp: [], problems: []};
    if (hfBase !== kHfDefault && out.saes.some((x) => x.startsWith('hf:'))) out.hf = hfBase;
    for (const e of saeEdits(state.interventions)) {
      if (!place.has(e.id)) {
        out.problems.push(`feature ${e.feature} of SAE ${e.id} (loaded from a file: a link cannot name it)`);
        continue;
      }
      (e.mode === 'steer' ? out.saeSteer : out.saeClamp).push([place.get(e.id), e.feature, e.value]);
    }
    return out;
  }

  // ---- Drawing ------------------------------------------------------------------------------------

  function fillHfButtons(box, {nLayer}) {
    box.replaceChildren(...Array.from({length: kHfSaeBlocks}, (_, l) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary small-button';
      b.dataset.layer = l;
      b.setAttribute('data-testid', `sae-hf-${l}`);
      b.textContent = `block ${l}`;
      b.title = `Download, convert and load jbloom's SAE of blocks.${l}.hook_resid_pre` +
          (l >= nLayer ? ` (this model has blocks 0..${nLayer - 1})` : '');
      return b;
    }));
  }

  function drawList(list, {saes, active}) {
    list.replaceChildren(...saes.map((x) => {
      const li = document.createElement('li');
      li.dataset.id = x.id;
      const radio = document.createElement('input');
      radio.type = 'radio';
      radio.name = 'sae-active';
      radio.value = x.id;
      radio.checked = x.id === active;
      radio.setAttribute('data-testid', `sae-show-${x.id}`);
      const label = document.createElement('label');
      label.append(radio, ` SAE ${x.id}: ${x.hook}, ${x.dSae} features (${x.architecture}` +
          `${x.normalize === 'layer_norm' ? ', layer_norm' : ''}), ${mb(x.bytes)} — ${x.name}`);
      const drop = document.createElement('button');
      drop.type = 'button';
      drop.className = 'secondary small-button';
      drop.dataset.drop = x.id;
      drop.setAttribute('data-testid', `sae-drop-${x.id}`);
      drop.textContent = 'Drop';
      drop.setAttribute('aria-label', `Drop SAE ${x.id}`);
      li.append(label, ' ', drop);
      return li;
    }));
  }

  function drawEdits(list, {sae, saes}) {
    list.replaceChildren(...saeEdits({sae}).map((e) => {
      const li = document.createElement('li');
      Object.assign(li.dataset, {id: e.id, feature: e.feature, mode: e.mode, value: e.value});
      const sae = saes.find((x) => x.id === e.id);
      li.append(e.mode === 'steer' ? `SAE ${e.id} (${sae?.hook}) feature ${e.feature}: add ${e.value} × its direction ` :
          `SAE ${e.id} (${sae?.hook}) feature ${e.feature}: clamped to ${e.value}${e.value === 0 ? ' (ablated)' : ''} `);
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary small-button';
      b.dataset.remove = `${e.id}:${e.feature}:${e.mode}`;
      b.textContent = 'Remove';
      b.setAttribute('aria-label', `Remove the ${e.mode} of feature ${e.feature}`);
      li.append(b);
      return li;
    }));
  }

  function render(s) {
    const free = !!s.info && canRun(s) && !s.saeLoading;
    $('sae-load-url').disabled = !free;
    $('sae-file').disabled = !free;
    renderIfChanged(fillHfButtons, $('sae-hf'), {nLayer: s.info?.n_layer ?? 0});
    for (const b of $('sae-hf').querySelectorAll('button')) b.disabled = !free || Number(b.dataset.layer) >= (s.info?.n_layer ?? 0);
    const bar = $('sae-progress');
    bar.value = s.saeProgress.value;
    if (s.saeProgress.phase) bar.dataset.phase = s.saeProgress.phase;
    else delete bar.dataset.phase;
    bar.dataset.loading = s.saeLoading;
    $('sae-status').textContent = s.saeStatus;
    renderIfChanged(drawList, $('sae-list'), {saes: s.saes, active: s.saeActive});
    const show = (id, value) => { if ($(id).value !== value) $(id).value = value; };
    show('sae-url', s.saeUrlInput);
    show('sae-labels-url', s.saeLabelsUrlInput);
    show('sae-edit-feature', s.saeEditFeature);
    show('sae-edit-mode', s.saeEditMode);
    show('sae-edit-value', s.saeEditValue);
    if (Number.isFinite(Number(s.saeEditValue))) show('sae-edit-strength', String(s.saeEditValue));
    $('sae-labels-load').disabled = s.saeActive < 0;
    $('sae-labels-file').disabled = s.saeActive < 0;
    $('sae-labels-status').textContent = s.saeLabelsStatus;
    const sae = s.saes.find((x) => x.id === s.saeActive);
    const labels = s.saeLabels[s.saeActive] || null;
    const edits = saeEdits(s.interventions);
    const result = s.saeFeatures && s.saeFeatures.id === s.saeActive && s.saeFeatures.position === s.picked ? s.saeFeatures : null;
    renderIfChanged(featuresView.render, $('sae-features'), {
      sae, result, labels, selected: s.saeSelected, where: result ? where(result.position) : '',
      steered: edits.filter((e) => e.id === s.saeActive).map((e) => e.feature).join(),
      changed: changed(result?.under || {}),
    });
    showUnder('sae-features-under', result);
    const strip = s.saeStrip && s.saeStrip.id === s.saeActive && s.saeStrip.feature === s.saeSelected ? s.saeStrip : null;
    renderIfChanged(featuresView.renderStrip, $('sae-strip'), {strip, label: labels?.get(s.saeSelected) || '',
                                                               pieces: s.pieces, picked: s.picked,
                                                               readout: $('sae-strip-readout')});
    showUnder('sae-strip-under', strip);
    $('sae-edit-add').disabled = !sae;
    renderIfChanged(drawEdits, $('sae-edits'), {sae: s.interventions.sae, saes: s.saes});
    $('sae-run-again').disabled = !s.info || !canRun(s) || s.captured === 0;
    renderIfChanged((_, d) => renderResult({
      before: $('sae-exp-before'), after: $('sae-exp-after'), kl: $('sae-exp-kl'), textBefore: $('sae-exp-text-before'),
      textAfter: $('sae-exp-text-after'),
    }, d.r), $('sae-exp-before'), {r: s.experiment});
    showUnder('sae-exp-under', s.experiment, '', 'the plain model against ');
  }

  return {
    render,
    // A worker reply of the panel's; false for any other.
    onMessage(msg) {
      switch (msg.type) {
        case Msg.saeProgress: onProgress(msg); return true;
        case Msg.saes: onSaes(msg); return true;
        case Msg.saeFeatures: store.set({saeFeatures: msg}); return true;
        case Msg.saeStrip: store.set({saeStrip: msg}); return true;
        default: return false;
      }
    },
    // An 'sae' error (its message): a link's SAE that failed is named in the share note.
    onError(message) {
      store.set({saeLoading: false, saeStatus: 'The SAE did not load.', saeProgress: {value: 0}});
      if (state.saeShared) state.saeShared.errors[state.saeShared.ids.length] = message;
    },
    picked: requestFeatures,
    restoreShared,
    shareView,
    // In words, for the experiments panel's summary.
    words(iv) {
      return saeEdits(iv).map((e) => (e.mode === 'steer' ? `SAE ${e.id} feature ${e.feature} steered by ${e.value}` :
          `SAE ${e.id} feature ${e.feature} clamped to ${e.value}`));
    },
  };
}
