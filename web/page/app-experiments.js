// The page's experiments: the interventions' switches and "Run again", the head sweep, direct
// logit attribution, saliency and "why this head attends here", activation and path patching,
// and attribution patching. Their controls and the worker's replies meet the store here (app.js
// hands it the store, the worker and its helpers; protocol.js documents the messages); the views
// (view-experiments.js, view-sweep.js, ...) only draw. The interventions are the store's:
// compute() sends them with every request, and each result says what it was computed under.
import {kNoInterventions} from '../shared/interventions.js';
import {ErrorKind, Msg} from '../shared/protocol.js';
import {renderIfChanged} from './store.js';
import * as atpView from '../views/view-atp.js';
import * as attributionView from '../views/view-attribution.js';
import * as attentionView from '../views/view-attention.js';
import * as experimentsView from '../views/view-experiments.js';
import * as patchingView from '../views/view-patching.js';
import * as pathsView from '../views/view-paths.js';
import * as saliencyView from '../views/view-saliency.js';
import * as sweepView from '../views/view-sweep.js';

function toggled(list, x) {
  return list.includes(x) ? list.filter((y) => y !== x) : [...list, x].sort((a, b) => a - b);
}

// store, worker, $, on: app.js's; compute(msg): sends a request that computes on the model with
// the store's interventions; busy(s): a run is under way; samplingOrError(): the sampling inputs,
// or null with the error shown; label(p), tokenWords(id), targetOf(s): a position, a token and
// the target in words; pick(p), chooseLayerHead(l, h): app.js's; showUnder(id, result, note):
// writes what a result was computed under; words(iv): the SAE panel's edits in words.
export function createExperimentsPanel({store, worker, $, on, compute, busy, samplingOrError, label, tokenWords, targetOf,
                                        pick, chooseLayerHead, showUnder, saeWords}) {
  const state = store.state;

  const setInterventions = (iv) => store.set({interventions: iv});

  function knockOut(layer, head) {
    const heads = state.interventions.ablateHeads;
    const has = heads.some(([l, h]) => l === layer && h === head);
    setInterventions({...state.interventions, ablateHeads: has ? heads.filter(([l, h]) => l !== layer || h !== head) :
        [...heads, [layer, head]].sort((a, b) => a[0] - b[0] || a[1] - b[1])});
  }

  function runAgain() {
    const s = samplingOrError();
    if (!s) return;
    store.set({experimenting: true, error: ''});
    store.flush();
    compute({type: Msg.experiment, position: state.picked, prompt: state.promptText, ...s});
  }

  function onExperiment(r) {
    store.set({experimenting: false, experiment: r});
    // The engine now holds the changed model's run of the same text: show its insides.
    pick(state.picked);
    compute({type: Msg.attentionMap, layer: state.layer, head: state.head});
  }

  function runSweep() {
    const {n_layer: L, n_head: H} = state.info;
    store.set({sweep: {running: true, done: 0, total: L * H}, error: ''});
    store.flush();
    compute({type: Msg.headSweep, position: state.picked, target: targetOf(state)});
  }

  // One estimated cell run exactly, on the prompts and for the target the estimate had.
  function runAtpExact(kind, layer, index) {
    if (!state.atp || !state.atpRequest) return;
    compute({type: Msg.atpExact, ...state.atpRequest, target: state.atp.target, contrast: state.atp.contrast,
             kind, layer, index});
  }

  // Handlers given to views are the same functions every time, so an unchanged view's input stays
  // unchanged (renderIfChanged) and a heat map keeps its keyboard cursor.
  const pickAtpCell = (layer, position) => runAtpExact('resid', layer, position);
  const pickAtpHead = (layer, head) => runAtpExact('head', layer, head);
  const openAttributedHead = (l, h) => { if (h < state.info.n_head) chooseLayerHead(l, h); };

  // ---- Controls ---------------------------------------------------------------------------------

  for (const [id, key] of [['exp-skip-attn', 'skipAttn'], ['exp-skip-mlp', 'skipMlp'], ['exp-no-residual', 'noResidual']]) {
    on($(id), 'change', () => {
      setInterventions({...state.interventions, [key]: toggled(state.interventions[key], state.layer)});
    });
  }
  on($('exp-post-norm'), 'change', (e) => setInterventions({...state.interventions, postNorm: e.target.checked}));
  on($('exp-knock-mode'), 'change', (e) => store.set({knockMode: e.target.checked}));
  on($('exp-mean-ablation'), 'change', (e) => setInterventions({...state.interventions, meanAblation: e.target.checked}));
  on($('exp-reset'), 'click', () => setInterventions(kNoInterventions));
  on($('exp-run-again'), 'click', runAgain);
  on($('attr-run'), 'click', () => compute({type: Msg.attribute, position: state.picked, target: targetOf(state)}));
  on($('saliency-run'), 'click', () => compute({
    type: Msg.saliency, position: state.picked, target: targetOf(state), contrast: -1, method: state.saliencyMethod,
    steps: Math.max(1, Math.min(4096, Number(state.saliencySteps) | 0 || 16)),
  }));
  on($('attn-why-run'), 'click', () => compute({
    type: Msg.scoreSaliency, layer: state.attentionMap.layer, head: state.attentionMap.head, query: state.picked,
    key: state.attnKey,
  }));
  // The exact map patches the clean stream into the corrupted run, so the estimate differentiates
  // the corrupted run (the CLI's --clean) with the clean prompt as the source (--corrupt), for the
  // exact run's answer over its other token when it has run.
  on($('atp-run'), 'click', () => {
    const request = {clean: state.patchCorrupted, corrupted: state.patchClean};
    store.set({atpRequest: request});
    compute({type: Msg.atp, ...request, target: state.patching.result?.answer ?? -1,
             contrast: state.patching.result?.other ?? -1});
  });
  on($('sweep-run'), 'click', runSweep);
  on($('sweep-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
  on($('patch-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
  on($('patch-run'), 'click', () => {
    store.set({patching: {running: true, done: 0, total: 0}, error: ''});
    compute({type: Msg.patching, clean: state.patchClean, corrupted: state.patchCorrupted});
  });
  on($('path-patch-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
  on($('path-patch-run'), 'click', () => {
    const request = {clean: state.patchClean, corrupted: state.patchCorrupted, receivers: state.pathReceivers};
    store.set({pathPatch: {running: true, done: 0, total: 0, request}, error: ''});
    compute({type: Msg.pathPatch, ...request});
  });
  // A sender's paths to each receiver alone, measured for the prompts its sweep ran on.
  on($('path-patch-grid'), 'click', (e) => {
    const b = e.target.closest('button[data-layer]');
    const job = state.pathPatch;
    if (!b || !job.result || busy(state)) return;
    const layer = Number(b.dataset.layer), head = Number(b.dataset.head);
    store.set({pathPatch: {...job, sender: [layer, head], paths: null, pathsRunning: true, pathsDone: 0, pathsTotal: 0},
               error: ''});
    compute({type: Msg.pathPatchPaths, clean: job.request.clean, corrupted: job.request.corrupted, layer, head});
  });
  on($('sweep'), 'click', (e) => {
    const li = e.target.closest('li[data-layer]');
    if (li) chooseLayerHead(Number(li.dataset.layer), Number(li.dataset.head));
  });

  // ---- Drawing ------------------------------------------------------------------------------------

  // The stream's norm after block l's attention step, from ln_2's input statistics (biased std,
  // so the sum of squares is n_embd · (std² + mean²)).
  function midNorm(a, l) {
    if (!a || !state.info) return NaN;
    const P = a.positions, row = 2 * l + 1;
    const mean = a.lnStats[(row * P + a.position) * 2], std = a.lnStats[(row * P + a.position) * 2 + 1];
    return Math.sqrt(state.info.n_embd * (std * std + mean * mean));
  }

  function renderSwitches(s) {
    const iv = s.interventions, l = s.layer;
    const on = (list) => list.includes(l);
    $('exp-skip-attn').checked = on(iv.skipAttn);
    $('exp-skip-mlp').checked = on(iv.skipMlp);
    $('exp-no-residual').checked = on(iv.noResidual);
    $('exp-post-norm').checked = iv.postNorm;
    $('exp-knock-mode').checked = s.knockMode;
    $('exp-mean-ablation').checked = !!iv.meanAblation;
    for (const id of ['exp-skip-attn', 'exp-skip-mlp', 'exp-no-residual', 'exp-post-norm', 'exp-knock-mode', 'exp-mean-ablation',
                      'exp-reset']) {
      $(id).disabled = !s.info;
    }
    const words = [
      ...iv.ablateHeads.map(([a, h]) => `head ${a}.${h} knocked out${iv.meanAblation ? ' to its mean' : ''}`),
      ...iv.skipAttn.map((b) => `block ${b} attention skipped`), ...iv.skipMlp.map((b) => `block ${b} MLP skipped`),
      ...iv.noResidual.map((b) => `block ${b} without residual`), ...(iv.postNorm ? ['post-norm'] : []),
      ...saeWords(iv),
    ];
    $('exp-summary').textContent = words.length ? `Changes: ${words.join(', ')}.` : 'No changes: the plain model.';
    const a = s.acts, P = a?.positions;
    const norm = (row) => (a && s.picked >= 0 ? a.residualNorms[row * P + a.position] : NaN);
    const sub = (k) => (a && s.picked >= 0 ? a.sublayerNorms[l * 4 + k] : NaN);
    if (s.info) {
      renderIfChanged(experimentsView.render, $('exp-diagram'), {
        layer: l, skipAttn: on(iv.skipAttn), skipMlp: on(iv.skipMlp), noResidual: on(iv.noResidual),
        postNorm: iv.postNorm, normIn: norm(l), normMid: midNorm(a, l), normOut: norm(l + 1),
        normLn1: sub(0), normAttn: sub(1), normLn2: sub(2), normMlp: sub(3),
        where: a ? label(a.position) : 'the picked token',
      });
    }
  }

  function render(s) {
    renderSwitches(s);
    const haveModel = !!s.info;
    $('exp-run-again').disabled = !haveModel || busy(s) || s.captured === 0;
    $('sweep-run').disabled = !haveModel || busy(s) || s.picked < 0;
    $('sweep-cancel').disabled = !s.sweep.running;
    const pair = s.attentionMap && s.picked >= 0 && s.attnKey >= 0 && s.attnKey <= s.picked;
    $('attn-why-run').disabled = !s.info || !pair || s.generating || s.sweep.running || s.patching.running;
    $('attn-why-pair').textContent = pair ? `Block ${s.attentionMap.layer}, head ${s.attentionMap.head}: query ` +
        `position ${s.picked}, key position ${s.attnKey}.` : '';
    if (s.why) {
      renderIfChanged(attentionView.renderWhy, $('attn-why'), {why: s.why, pieces: s.pieces, ids: s.ids,
                                                               summary: $('attn-why-summary'), readout: $('attn-why-readout')});
    }
    showUnder('attn-why-under', s.why);
    const target = targetOf(s);
    $('sweep-target').textContent = s.picked >= 0 && target !== undefined ? `Target: ${tokenWords(target)}.` : '';
    if (target !== undefined) $('sweep-target').dataset.id = target;
    renderIfChanged(sweepView.render, $('sweep'), {sweep: s.sweep,
                                                   targetWords: s.sweep.result ? tokenWords(s.sweep.result.target) : ''});
    showUnder('sweep-under', s.sweep.result, s.sweep.result && (s.sweep.result.meanAblation
        ? '; each head knocked out in turn to its mean' : '; each head knocked out in turn'));
    $('attr-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.picked < 0;
    $('saliency-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.picked < 0;
    if (s.saliency) {
      renderIfChanged(saliencyView.render, $('saliency'), {
        saliency: s.saliency, pieces: s.pieces, targetWords: tokenWords(s.saliency.target),
        summary: $('saliency-summary'), readout: $('saliency-readout'),
      });
    }
    showUnder('saliency-under', s.saliency);
    $('patch-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.experimenting;
    $('patch-cancel').disabled = !s.patching.running;
    $('atp-run').disabled = !s.info || s.generating || s.sweep.running || s.patching.running || s.experimenting;
    renderIfChanged(atpView.render, $('atp'), {atp: s.atp, exact: s.patching.result, readout: $('atp-readout'),
                                               status: $('atp-status'), onPick: pickAtpCell});
    renderIfChanged(atpView.renderHeads, $('atp-heads'), {atp: s.atp, exact: s.patching.result,
                                                         readout: $('atp-heads-readout'),
                                                         onPick: pickAtpHead});
    renderIfChanged(atpView.renderExact, $('atp-exact'), {atp: s.atp, exact: s.atpExact});
    showUnder('atp-exact-under', s.atpExact?.results[s.atpExact.order.at(-1)], ' (the cell run exactly last)');
    showUnder('atp-under', s.atp);
    renderIfChanged(patchingView.render, $('patching'), {job: s.patching, readout: $('patching-readout'),
                                                         status: $('patching-status')});
    showUnder('patching-under', s.patching.result);
    $('path-patch-run').disabled = $('patch-run').disabled || s.pathPatch.running || s.pathPatch.pathsRunning;
    $('path-patch-cancel').disabled = !s.pathPatch.running && !s.pathPatch.pathsRunning;
    renderIfChanged(pathsView.render, $('path-patch-grid'), {job: s.pathPatch, status: $('path-patch-status'),
                                                             progress: $('path-patch-progress'),
                                                             diagram: $('path-patch-paths')});
    showUnder('path-patch-under', s.pathPatch.result);
    if (s.attribution && s.info) {
      renderIfChanged(attributionView.render, $('attribution'), {
        attribution: s.attribution, nLayer: s.info.n_layer, nHead: s.info.n_head,
        targetWords: tokenWords(s.attribution.target), readout: $('attribution-readout'), summary: $('attribution-summary'),
        onPick: openAttributedHead,
      });
    }
    showUnder('attribution-under', s.attribution);
    $('exp-status').textContent = s.experimenting ? 'Running the plain and the changed model…' : '';
    renderIfChanged((_, d) => experimentsView.renderResult({
      before: $('exp-before'), after: $('exp-after'), kl: $('exp-kl'), textBefore: $('exp-text-before'),
      textAfter: $('exp-text-after'),
    }, d.r), $('exp-results'), {r: s.experiment});
    showUnder('exp-under', s.experiment, '', 'the plain model against ');
  }

  // ---- Worker replies -----------------------------------------------------------------------------

  function onAtpExact(msg) {
    const key = atpView.exactKey(msg.kind, msg.layer, msg.index);
    const x = state.atpExact || {results: {}, order: []};
    store.set({atpExact: {results: {...x.results, [key]: msg}, order: [...x.order.filter((k) => k !== key), key]}});
  }

  function onPathPatchProgress(msg) {
    store.set({pathPatch: {...state.pathPatch, ...(msg.paths ? {pathsDone: msg.done, pathsTotal: msg.total}
                                                              : {done: msg.done, total: msg.total})}});
  }

  const replies = {
    [Msg.experiment]: onExperiment,
    [Msg.attribution]: (msg) => store.set({attribution: msg}),
    [Msg.saliency]: (msg) => store.set({saliency: msg}),
    [Msg.atp]: (msg) => store.set({atp: msg, atpExact: null}),
    [Msg.atpExact]: onAtpExact,
    [Msg.scoreSaliency]: (msg) => store.set({why: msg}),
    [Msg.patchingProgress]: (msg) => store.set({patching: {...state.patching, done: msg.done, total: msg.total}}),
    [Msg.patching]: (msg) => store.set({patching: {running: false, done: msg.done, total: msg.total, result: msg}}),
    [Msg.pathPatchProgress]: onPathPatchProgress,
    [Msg.pathPatch]: (msg) => store.set({pathPatch: {...state.pathPatch, running: false, done: msg.done, total: msg.total,
                                                     result: msg}}),
    [Msg.pathPatchPaths]: (msg) => store.set({pathPatch: {...state.pathPatch, pathsRunning: false, paths: msg}}),
    [Msg.sweepProgress]: (msg) => store.set({sweep: {...state.sweep, done: msg.done, total: msg.total}}),
    [Msg.sweep]: (msg) => store.set({sweep: {running: false, done: msg.done, total: msg.total, result: msg}}),
  };

  return {
    render,
    knockOut,
    runAgain,
    // A worker reply of the panel's; false for any other.
    onMessage(msg) {
      if (!Object.hasOwn(replies, msg.type)) return false;
      replies[msg.type](msg);
      return true;
    },
    // An 'error' reply: ends what the panel waits for.
    onError(kind) {
      if (kind === ErrorKind.experiment) store.set({experimenting: false});
      if (kind === ErrorKind.sweep) store.set({sweep: {running: false}});
      if (kind === ErrorKind.patching) store.set({patching: {running: false}});
      if (kind === ErrorKind.pathPatch) store.set({pathPatch: {...state.pathPatch, running: false, pathsRunning: false}});
    },
  };
}
