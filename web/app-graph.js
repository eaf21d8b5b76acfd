// The page's attribution-graph panel: a graph file (circuit-tracer's JSON, graph.js) opened from
// a local file, its thresholds, the node a person pins or moves to by keyboard, and the export.
// Every graph text, whatever its source, enters through openGraphText(); the engine's job that
// computes a graph on the page's conversation (issue 36) is to hand its reply's JSON text to it,
// and its "Compute graph" button belongs here once the worker has that job. State lives in the
// store (kGraphState); graph.js derives, view-graph.js draws.
import {defaultLogit, GraphFileError, Kind, parseGraph, rowsOf, shownNodes, stepFrom, strongestPaths} from './graph.js';
import {renderIfChanged} from './store.js';
import * as graphView from './view-graph.js';
import {fmt} from './viz.js';

// The store's graph fields, merged into app.js's initial state.
export const kGraphState = {
  graph: null,             // {model (graph.js's parseGraph), text (exactly as opened), source (its name)}
  graphError: '',
  graphNodeThreshold: 0.8,
  graphEdgeThreshold: 0,
  graphLogit: -1,          // the logit node the strongest paths lead to
  graphCurrent: -1,        // the node whose numbers are shown (focused, clicked)
  graphPinned: -1,         // the node whose links stay drawn
  graphHover: -1,
  graphFocusSeq: 0,        // a new value moves keyboard focus to graphCurrent
};

// circuit-tracer prunes to 0.8 of the cumulative influence by default (create_graph_files).
const kDefaultNodeThreshold = 0.8;

// One-entry caches: what is derived from the graph is recomputed only when its inputs change, and
// stays the same object otherwise, so renderIfChanged leaves the view alone.
function memo(fn) {
  let args = null, value;
  return (...a) => {
    if (!args || a.length !== args.length || a.some((x, i) => !Object.is(x, args[i]))) {
      args = a;
      value = fn(...a);
    }
    return value;
  };
}

// store, $, on: app.js's; download(name, blob): app-export.js's.
export function createGraphPanel({store, $, on, download}) {
  const state = store.state;
  const shownOf = memo(shownNodes);
  const rowsOfShown = memo(rowsOf);
  const pathsOf = memo(strongestPaths);

  // The one way a graph reaches the page: the JSON text of a graph file (a local file now; the
  // engine's computed graph later), and where it came from in words. A text that is not a graph
  // leaves the graph shown before, and everything else, as it was.
  function openGraphText(text, source) {
    let model;
    try {
      model = parseGraph(text);
    } catch (e) {
      if (!(e instanceof GraphFileError)) throw e;
      store.set({graphError: `Could not open ${source} as an attribution graph: ${e.message}.`});
      return false;
    }
    const t = model.meta.node_threshold;
    store.set({
      graph: {model, text, source}, graphError: '',
      graphNodeThreshold: typeof t === 'number' && t > 0 && t <= 1 ? t : kDefaultNodeThreshold,
      graphEdgeThreshold: 0, graphLogit: defaultLogit(model), graphCurrent: -1, graphPinned: -1, graphHover: -1,
    });
    return true;
  }

  const model = () => state.graph?.model;
  const shown = () => shownOf(model(), state.graphNodeThreshold);

  // Click or Enter: the node's links stay drawn (again: they go); a logit becomes the paths' end.
  function choose(i) {
    const n = model().nodes[i];
    store.set({graphCurrent: i, graphPinned: state.graphPinned === i ? -1 : i,
               ...(n.kind === Kind.logit ? {graphLogit: i} : {})});
  }

  const nodeOf = (target) => target.closest?.('[data-node-id]');

  on($('graph-open-file'), 'change', async (e) => {
    const file = e.target.files?.[0];
    e.target.value = '';  // the same file again is a new choice
    if (!file) return;
    let text;
    try {
      text = await file.text();
    } catch (err) {
      store.set({graphError: `Could not read ${file.name}: ${err.message}.`});
      return;
    }
    openGraphText(text, file.name);
    store.flush();
  });
  on($('graph-export'), 'click', () => {
    const g = state.graph;
    if (!g) return;
    // The text as it was opened, byte for byte: the page changes nothing in the file.
    const name = /\.json$/i.test(g.source) ? g.source : `${g.model.meta.slug || 'attribution-graph'}.json`;
    download(name, new Blob([g.text], {type: 'application/json'}));
  });
  on($('graph-node-threshold'), 'input', (e) => store.set({graphNodeThreshold: Number(e.target.value)}));
  on($('graph-edge-threshold'), 'input', (e) => store.set({graphEdgeThreshold: Number(e.target.value)}));

  const view = $('graph-view');
  on(view, 'click', (e) => {
    const node = nodeOf(e.target);
    if (node) choose(Number(node.dataset.index));
  });
  on(view, 'mouseover', (e) => {
    const node = nodeOf(e.target);
    const i = node ? Number(node.dataset.index) : -1;
    if (i !== state.graphHover) store.set({graphHover: i});
  });
  on(view, 'mouseleave', () => store.set({graphHover: -1}));
  // Tab into the graph (or a click) makes the focused node the current one.
  // Not on(): the view itself moves focus while it draws, and a draw must not start another.
  view.addEventListener('focusin', (e) => {
    const node = nodeOf(e.target);
    if (node && Number(node.dataset.index) !== state.graphCurrent) store.set({graphCurrent: Number(node.dataset.index)});
  });
  // Arrow keys move along a row and between blocks, Home and End to a row's ends; Enter or Space
  // pins, Escape unpins. Tab leaves the graph (one tab stop, as a grid).
  on(view, 'keydown', (e) => {
    const node = nodeOf(e.target);
    if (!node) return;
    const i = Number(node.dataset.index);
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      choose(i);
    } else if (e.key === 'Escape') {
      store.set({graphPinned: -1});
    } else if (['ArrowLeft', 'ArrowRight', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(e.key)) {
      e.preventDefault();
      const g = model();
      const next = stepFrom(rowsOfShown(g, shown()), g, i, e.key);
      store.set({graphCurrent: next, graphFocusSeq: state.graphFocusSeq + 1});
    }
  });

  function status(s, g, visible) {
    if (!g) return 'No graph open.';
    const count = (mask, kinds) => g.nodes.filter((n) => mask[n.index] && kinds.includes(n.kind)).length;
    const all = new Uint8Array(g.nodes.length).fill(1);
    const features = [Kind.feature, Kind.error];
    const scores = ['replacement_score', 'completeness_score'].filter((k) => typeof g.meta[k] === 'number')
        .map((k) => `${k.replace('_', ' ')} ${fmt(g.meta[k], 3)}`);
    return `${s.graph.source}: “${g.meta.prompt ?? ''}”. ${visible.reduce((a, b) => a + b, 0)} of ${g.nodes.length} nodes ` +
        `shown (${count(visible, features)} of ${count(all, features)} features and error nodes), ${g.links.length} links` +
        (g.droppedLinks ? `; ${g.droppedLinks} links name nodes not in the file and are left out` : '') +
        (g.duplicateNodes ? `; ${g.duplicateNodes} nodes repeat an earlier node_id and are left out` : '') +
        (scores.length ? `; ${scores.join(', ')}` : '') + '.';
  }

  return {
    openGraphText,
    render(s) {
      const g = s.graph?.model || null;
      const err = $('graph-error');
      err.textContent = s.graphError;
      err.hidden = !s.graphError;
      $('graph-export').disabled = !g;
      for (const id of ['graph-node-threshold', 'graph-edge-threshold']) $(id).disabled = !g;
      const nodeSlider = $('graph-node-threshold'), edgeSlider = $('graph-edge-threshold');
      // The edge slider spans this graph's weights: 0 shows every link in the file.
      const edgeMax = g ? g.maxAbsWeight : 1;
      if (Number(edgeSlider.max) !== edgeMax) {
        edgeSlider.max = edgeMax;
        edgeSlider.step = edgeMax / 200 || 'any';
      }
      if (Number(nodeSlider.value) !== s.graphNodeThreshold) nodeSlider.value = s.graphNodeThreshold;
      if (Number(edgeSlider.value) !== s.graphEdgeThreshold) edgeSlider.value = s.graphEdgeThreshold;
      $('graph-node-threshold-value').textContent = fmt(s.graphNodeThreshold, 3);
      $('graph-edge-threshold-value').textContent = fmt(s.graphEdgeThreshold, 3);
      const visible = g ? shownOf(g, s.graphNodeThreshold) : null;
      const paths = g ? pathsOf(g, visible, s.graphEdgeThreshold, s.graphLogit) : [];
      $('graph-status').textContent = status(s, g, visible);
      renderIfChanged(graphView.render, $('graph-view'), {
        graph: g, shown: visible, edgeThreshold: s.graphEdgeThreshold, paths, logit: s.graphLogit,
        current: s.graphCurrent, pinned: s.graphPinned, hover: s.graphHover, focusSeq: s.graphFocusSeq,
        label: g ? `Attribution graph of “${g.meta.prompt ?? ''}”: blocks upward, positions across. ` +
            'Arrow keys move between nodes, Enter pins one.' : '',
      });
      renderIfChanged(graphView.renderDetails, $('graph-node-details'), {
        graph: g, shown: visible, edgeThreshold: s.graphEdgeThreshold, current: g ? s.graphCurrent : -1,
        pinned: s.graphPinned,
      });
      renderIfChanged(graphView.renderPaths, $('graph-paths'), {graph: g, paths, logit: s.graphLogit});
    },
  };
}
