// The page's views of the picked token: the tokens, the attention grid and a head's map, the
// residual stream, LayerNorm, MLP, next-token probabilities and the logit lens. Picking a token
// or a head asks the worker for what they show (under the store's interventions, compute()); the
// views (view-*.js) only draw. app.js hands it the store and its helpers.
import {Msg} from '../shared/protocol.js';
import {renderIfChanged} from './store.js';
import * as attentionView from '../views/view-attention.js';
import * as layerNormView from '../views/view-layernorm.js';
import * as lensView from '../views/view-lens.js';
import * as mlpView from '../views/view-mlp.js';
import * as probsView from '../views/view-probs.js';
import * as residualView from '../views/view-residual.js';

// The grid cell an arrow key moves to from (row, col), or null for any other key; the
// attention grid (block x head) and the logit lens (block x position) move alike.
function arrowStep(e, row, col) {
  const moves = {ArrowRight: [0, 1], ArrowLeft: [0, -1], ArrowDown: [1, 0], ArrowUp: [-1, 0]};
  const m = moves[e.key];
  return m ? {row: row + m[0], col: col + m[1]} : null;
}

// store, $, on: app.js's; compute(msg): sends a request that computes on the model with the
// store's interventions; label(p), targetOf(s): a position and the target in words; showUnder(id,
// result): writes what a result was computed under; knockOut(l, h): the experiments panel's;
// picked(p): what else a pick asks for (the SAE panel's features).
export function createInspectPanel({store, $, on, compute, label, targetOf, showUnder, knockOut, picked}) {
  const state = store.state;

  function pick(position, {focus = false} = {}) {
    if (position < 0 || position >= state.captured) return;
    store.set({picked: position, focusSeq: state.focusSeq + (focus ? 1 : 0),
               target: position === state.picked ? state.target : null});
    compute({type: Msg.inspect, position, layer: state.layer, head: state.head});
    picked(position);
  }

  function chooseLayerHead(layer, head) {
    store.set({layer, head});
    compute({type: Msg.attentionMap, layer, head});
  }

  function onActivations(a) {
    // The worker decoded every token's text: fill in the generated ones.
    const pieces = state.pieces.slice();
    a.pieces.forEach((p, i) => { pieces[i] = p; });
    store.set({acts: a, pieces});
  }

  function onLens(lens) {
    const last = {layer: lens.nLayer - 1, position: state.picked};
    store.set({lens, lensNote: '', lensOpen: state.picked >= lens.begin && state.picked < lens.end ? last : null});
  }

  // Handlers given to views are the same functions every time, so an unchanged view's input stays
  // unchanged (renderIfChanged) and a heat map keeps its keyboard cursor.
  const pickFromMap = (position) => pick(position);
  // A cell of the chosen head's map: its row is the token picked, its column the key asked about.
  const pickPair = (position, key) => { store.set({attnKey: key}); pick(position); };

  function render(s) {
    const a = s.info && s.acts;
    const ablated = s.interventions.ablateHeads.map(([l, h]) => `${l}.${h}`);
    if (a) {
      const common = {pieces: s.pieces, ids: s.ids};
      renderIfChanged(attentionView.render, $('attention-grid'), {
        attention: a.attention, position: a.position, nLayer: s.info.n_layer, nHead: s.info.n_head,
        layer: s.layer, head: s.head, ablated: ablated.join(), knockMode: s.knockMode, ...common,
      });
      renderIfChanged(residualView.render, $('residual'), {
        norms: a.residualNorms, nLayer: s.info.n_layer, positions: a.positions, position: a.position,
        readout: $('residual-readout'), onPick: pickFromMap, ...common,
      });
      renderIfChanged(layerNormView.render, $('layernorm'), {
        lnStats: a.lnStats, nLayer: s.info.n_layer, nEmbd: s.info.n_embd, positions: a.positions, position: a.position,
      });
      renderIfChanged(mlpView.render, $('mlp'), {mlp: a.mlp[s.layer], layer: s.layer, where: label(a.position),
                                                hist: $('mlp-hist')});
      renderIfChanged(probsView.render, $('probs'), {top: a.top, topPieces: a.topPieces,
                                                     next: s.ids[a.position + 1], target: targetOf(s),
                                                     where: label(a.position)});
    }
    if (s.attentionMap && s.info) {
      renderIfChanged(attentionView.renderHead, $('attention-big'), {
        map: s.attentionMap, picked: s.picked, pieces: s.pieces, ids: s.ids, readout: $('attention-readout'),
        title: $('attn-big-title'), onPick: pickPair,
      });
    }
    if (s.lens) {
      renderIfChanged(lensView.render, $('logit-lens'), {lens: s.lens, picked: s.picked, pieces: s.pieces, ids: s.ids,
                                                         open: s.lensOpen});
    } else if ($('logit-lens').firstChild) {
      $('logit-lens').replaceChildren();
    }
    renderIfChanged(lensView.renderDetail, $('lens-detail'), {lens: s.lens, note: s.lensNote, open: s.lensOpen,
                                                              pieces: s.pieces, ids: s.ids});
    showUnder('lens-under', s.lens);
    showUnder('inspect-under', s.acts);
    $('picked').textContent = s.picked >= 0 ? `Picked: position ${s.picked}` : '';
  }

  // ---- Controls ---------------------------------------------------------------------------------

  on($('tokens'), 'click', (e) => {
    const chip = e.target.closest('.chip');
    if (chip) pick(Number(chip.dataset.position), {focus: true});
  });
  on($('tokens'), 'keydown', (e) => {
    let p = state.picked;
    if (e.key === 'ArrowRight') p++;
    else if (e.key === 'ArrowLeft') p--;
    else if (e.key === 'Home') p = 0;
    else if (e.key === 'End') p = state.captured - 1;
    else return;
    e.preventDefault();
    pick(Math.max(0, Math.min(state.captured - 1, p)), {focus: true});
  });

  on($('attention-grid'), 'click', (e) => {
    const cell = e.target.closest('.attn-cell');
    if (!cell) return;
    const l = Number(cell.dataset.layer), h = Number(cell.dataset.head);
    if (state.knockMode) knockOut(l, h);
    else chooseLayerHead(l, h);
  });
  on($('attention-grid'), 'keydown', (e) => {
    const cell = e.target.closest('.attn-cell');
    if (!cell) return;
    const to = arrowStep(e, Number(cell.dataset.layer), Number(cell.dataset.head));
    if (!to) return;
    e.preventDefault();
    $('attention-grid').querySelector(`[data-layer="${to.row}"][data-head="${to.col}"]`)?.focus();
  });
  on($('layer-select'), 'change', (e) => chooseLayerHead(Number(e.target.value), state.head));
  on($('head-select'), 'change', (e) => chooseLayerHead(state.layer, Number(e.target.value)));

  on($('logit-lens'), 'click', (e) => {
    const cell = e.target.closest('.lens-cell');
    if (cell) store.set({lensOpen: {layer: Number(cell.dataset.layer), position: Number(cell.dataset.position)}});
  });
  on($('logit-lens'), 'keydown', (e) => {
    const cell = e.target.closest('.lens-cell');
    if (!cell) return;
    const to = arrowStep(e, Number(cell.dataset.layer), Number(cell.dataset.position));
    if (!to) return;
    e.preventDefault();
    $('logit-lens').querySelector(`.lens-cell[data-layer="${to.row}"][data-position="${to.col}"]`)?.focus();
  });

  on($('probs'), 'click', (e) => {
    const li = e.target.closest('li[data-id]');
    if (li) store.set({target: Number(li.dataset.id)});
  });

  return {
    render,
    pick,
    chooseLayerHead,
    // A worker reply of the panel's; false for any other. From Generate until the worker's
    // 'prompt' reply, replies about the previous text are stale (awaitingPrompt): dropped.
    onMessage(msg) {
      const fresh = !state.awaitingPrompt;
      switch (msg.type) {
        // The answers to a click on a token or a head are drawn when they arrive, not at the next
        // animation frame: the frame then only lays out and paints them.
        case Msg.activations: if (fresh) { onActivations(msg); store.flush(); } return true;
        case Msg.attentionMap: if (fresh) { store.set({attentionMap: msg}); store.flush(); } return true;
        case Msg.lensStart:
          if (fresh) store.set({lensNote: `Computing the logit lens for positions ${msg.begin}–${msg.end - 1}…`});
          return true;
        case Msg.lens: if (fresh) onLens(msg); return true;
        default: return false;
      }
    },
  };
}
