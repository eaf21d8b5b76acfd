// The page's circuits panels: head detection and the quantization lens. Both make the engine's
// conversation their own sequence (captured, the plain model), which the page then shows as the
// text. app.js hands it the store, the worker and its helpers; view-heads.js and view-quant.js draw.
import {ErrorKind, Msg} from '../shared/protocol.js';
import {renderIfChanged} from './store.js';
import * as headsView from '../views/view-heads.js';
import * as quantView from '../views/view-quant.js';

// store, worker, $, on: app.js's; busy(s): a run is under way; pick(p), chooseLayerHead(l, h):
// app.js's; showUnder(id, result): writes what a result was computed under.
export function createCircuitsPanel({store, worker, $, on, busy, pick, chooseLayerHead, showUnder}) {
  const state = store.state;

  // The conversation is now `ids` (their texts `pieces`): the page shows it as the text, its last
  // token picked, and forgets what it showed of the last one.
  function showSequence(ids, pieces, patch) {
    const T = ids.length;
    store.set({...patch, ids: ids.slice(), pieces: pieces.slice(), promptLength: T, captured: T, sampled: [],
               promptText: pieces.join(''), generatedText: '', picked: -1, acts: null, lens: null, lensNote: '',
               lensOpen: null, attentionMap: null, experiment: null, attribution: null, target: null,
               sweep: {running: false}});
    pick(T - 1);
  }

  // Head detection: the engine's conversation is now the repeated sequence, so a head's attention
  // opens on it.
  function runHeads() {
    store.set({heads: {running: true, result: state.heads.result}, error: ''});
    store.flush();
    worker.postMessage({type: Msg.heads, text: state.headsSource === 'prompt' ? state.prompt : ''});
  }

  // The quantization lens: the engine's conversation is then the prompt (the loaded model).
  function runQuantLens() {
    if (!state.prompt) { store.set({error: 'Type a prompt first.'}); return; }
    store.set({quant: {running: true, result: state.quant.result}, error: ''});
    store.flush();
    worker.postMessage({type: Msg.quantLens, weights: state.quantWeights, prompt: state.prompt});
  }

  on($('heads-run'), 'click', runHeads);
  on($('quant-run'), 'click', runQuantLens);
  on($('quant'), 'click', (e) => {
    const li = e.target.closest('li[data-head]');
    if (li) chooseLayerHead(Number(li.dataset.layer), Number(li.dataset.head));
  });
  on($('heads'), 'click', (e) => {
    const cell = e.target.closest('.head-cell');
    if (cell) chooseLayerHead(Number(cell.dataset.layer), Number(cell.dataset.head));
  });

  return {
    render(s) {
      $('heads-run').disabled = !s.info || busy(s);
      renderIfChanged(headsView.render, $('heads'), {heads: s.heads, layer: s.layer, head: s.head, status: $('heads-status')});
      showUnder('heads-under', s.heads.result);
      $('quant-run').disabled = !s.info || busy(s);
      renderIfChanged(quantView.render, $('quant'), {quant: s.quant, status: $('quant-status')});
      showUnder('quant-under', s.quant.result);
    },
    // A worker reply of the panel's; false for any other.
    onMessage(msg) {
      if (msg.type === Msg.heads) showSequence(msg.sequence, msg.pieces, {heads: {running: false, result: msg}});
      else if (msg.type === Msg.quantLens) showSequence(msg.ids, msg.pieces, {quant: {running: false, result: msg}});
      else return false;
      return true;
    },
    onError(kind) {
      if (kind === ErrorKind.heads) store.set({heads: {running: false, result: state.heads.result}});
      if (kind === ErrorKind.quantLens) store.set({quant: {running: false, result: state.quant.result}});
    },
  };
}
