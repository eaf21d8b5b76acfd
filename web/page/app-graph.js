// The page's attribution-graph panel: transcoders loaded into the engine (worker-graph.js), a
// graph computed there on a prompt (progress, cancel) or opened from a file (circuit-tracer's
// JSON, graph.js), its thresholds, the node a person pins or moves to by keyboard, the export,
// and for a computed graph a feature's card and the check of picked features (predicted against
// exact). Nodes can be grouped, as Neuronpedia's supernodes: a group is drawn as one node with its
// members' links summed, opens back up, is checked as its features at once and is saved in the
// exported file's qParams.supernodes. Every graph text, whatever its source, enters through
// openGraphText(). State lives in the store (kGraphState); graph.js derives, view-graph.js,
// view-graph-check.js and view-graph-qk.js draw.
import {defaultLogit, GraphFileError, groupedGraph, Kind, parseGraph, rowsOf, shownNodes, stepFrom, strongestPaths,
        withSupernodes} from './graph.js';
import {Msg, Phase} from '../shared/protocol.js';
import {labelsText, parseLabels} from '../shared/sae.js';
import {renderIfChanged} from './store.js';
import * as checkView from '../views/view-graph-check.js';
import * as graphView from '../views/view-graph.js';
import * as qkView from '../views/view-graph-qk.js';
import {fmt, mb, progressWords} from '../views/viz.js';

// The store's graph fields, merged into app.js's initial state.
export const kGraphState = {
  graph: null,             // {model (graph.js's parseGraph), text (exactly as opened), source (its name)}
  graphError: '',
  graphNodeThreshold: 0.8,
  graphEdgeThreshold: 0,
  graphLogit: -1,          // the logit node the strongest paths lead to
  graphCurrent: -1,        // the node whose numbers are shown (focused, clicked)
  graphPinned: -1,         // the node whose links stay drawn
  graphHover: -1,          // (these four: node indices in the graph as drawn, groupedGraph's)
  graphGroups: [],         // [{name, members: [node index in the file's graph]}], a node in one at most
  graphGroupsOpen: [],     // per group: drawn member by member (true) or as one node
  graphGroupsEdited: false,  // the groups differ from the file's: the export writes them
  graphGroupPick: [],      // node indices (the file's graph) picked for a new group
  graphGroupName: '',
  graphFocusSeq: 0,        // a new value moves keyboard focus to graphCurrent
  graphTranscoders: {blocks: [], bytes: 0, nLayer: 0},  // the worker's 'transcoders' reply
  graphTranscodersLoading: false,
  graphTranscodersProgress: {value: 0},
  graphTranscodersStatus: 'No transcoders loaded.',
  graphTranscodersUrl: '',
  graphPrompt: null,       // as typed (null: index.html's)
  graphMaxFeatures: null,
  graphComputing: null,    // {encoding, done, total} while the engine computes a graph
  graphComputed: false,    // the graph shown is the engine's last computed one (cards and checks read it)
  graphUnder: null,        // the computed graph's reply (what it ran under)
  graphCard: null,         // the 'graph-card' reply, or {waiting: true}
  graphCheckNodes: [],     // node ids picked for the check
  graphCheckValue: '0',
  graphChecks: [],         // 'graph-check' replies, newest first
  graphChecking: false,
  graphQk: null,           // the 'graph-qk' reply, or {waiting: true}
  graphLabels: {},         // block -> Map feature -> label (Neuronpedia's export for that block's transcoder)
  graphLabelsBlock: '0',
  graphLabelsStatus: '',
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

// store, worker, $, on: app.js's; download(name, blob): app-export.js's; hfBase: the page's
// Hugging Face; canRun(s): whether the engine is free for a run; showUnder(id, result): writes
// what a result was computed under.
export function createGraphPanel({store, worker, $, on, download, hfBase, canRun, showUnder, showDashboard}) {
  const state = store.state;
  const shownOf = memo(shownNodes);
  const rowsOfShown = memo(rowsOf);
  const pathsOf = memo(strongestPaths);
  const groupedOf = memo(groupedGraph);
  // Over the drawn nodes: 1 where every member is picked for a group.
  const pickedOf = memo((g, pick) => Uint8Array.from(g.nodes, (n) => (n.members.every((m) => pick.includes(m)) ? 1 : 0)));

  // The one way a graph reaches the page: the JSON text of a graph file (a local file now; the
  // engine's computed graph later), and where it came from in words. A text that is not a graph
  // leaves the graph shown before, and everything else, as it was.
  function openGraphText(text, source, {computed = false, nodeThreshold} = {}) {
    let model;
    try {
      model = parseGraph(text);
    } catch (e) {
      if (!(e instanceof GraphFileError)) throw e;
      store.set({graphError: `Could not open ${source} as an attribution graph: ${e.message}.`});
      return false;
    }
    const t = nodeThreshold ?? model.meta.node_threshold;
    const open = model.groups.map(() => false);
    store.set({
      graph: {model, text, source}, graphError: '', graphComputed: computed, graphCard: null, graphCheckNodes: [],
      graphChecks: [], graphQk: null,
      graphNodeThreshold: typeof t === 'number' && t > 0 && t <= 1 ? t : kDefaultNodeThreshold,
      graphEdgeThreshold: 0, graphLogit: defaultLogit(groupedOf(model, model.groups, open)), graphCurrent: -1,
      graphPinned: -1, graphHover: -1, graphGroups: model.groups, graphGroupsOpen: open, graphGroupsEdited: false,
      graphGroupPick: [],
    });
    return true;
  }

  // The graph as drawn: the file's with its closed groups as one node each.
  const drawnOf = (s) => (s.graph ? groupedOf(s.graph.model, s.graphGroups, s.graphGroupsOpen) : null);
  const model = () => drawnOf(state);
  const shown = () => shownOf(model(), state.graphNodeThreshold);

  // New groups, or groups opened or closed: the nodes drawn change, so the current, pinned and
  // chosen logit nodes are found again by id (a node whose group closed: the group's node; a
  // group that opened or went: nothing). The picks name the file's nodes and stay.
  function regroup(groups, open, edited = true) {
    const before = model();
    const after = groupedOf(state.graph.model, groups, open);
    const again = (i) => {
      if (i < 0) return -1;
      const n = before.nodes[i];
      const same = after.byId.get(n.id);
      if (same !== undefined) return same;
      const into = after.nodes.find((m) => m.kind === Kind.supernode && m.members.includes(n.members[0]));
      return n.members.length === 1 && into ? into.index : -1;
    };
    // The paths lead to a logit: one gone into a group gives way to the default.
    const logit = again(state.graphLogit);
    store.set({graphGroups: groups, graphGroupsOpen: open, graphGroupsEdited: state.graphGroupsEdited || edited,
               graphCurrent: again(state.graphCurrent), graphPinned: again(state.graphPinned), graphHover: -1,
               graphLogit: logit >= 0 && after.nodes[logit].kind === Kind.logit ? logit : defaultLogit(after)});
  }

  // What the check sets for the pinned node of the computed graph: {ids (its feature nodes' ids),
  // group (its name, '' for one feature), left (its members that are no feature)}, or null.
  function pinnedCheck(s) {
    const g = drawnOf(s);
    const n = g && s.graphComputed && s.graphPinned >= 0 ? g.nodes[s.graphPinned] : null;
    if (!n || (n.kind !== Kind.feature && n.kind !== Kind.supernode)) return null;
    const members = n.members.map((i) => g.parsed.nodes[i]);
    const ids = members.filter((m) => m.kind === Kind.feature).map((m) => m.id);
    return {ids, group: n.kind === Kind.supernode ? n.name : '', left: members.length - ids.length};
  }

  // Click or Enter: the node's links stay drawn (again: they go); a logit becomes the paths' end;
  // a feature of a computed graph shows its card, and the QK form asks about its block's heads
  // at its position (what the attention before it read there).
  function choose(i) {
    const n = model().nodes[i];  // as drawn
    const pinned = state.graphPinned === i ? -1 : i;
    store.set({graphCurrent: i, graphPinned: pinned, ...(n.kind === Kind.logit ? {graphLogit: i} : {})});
    if (pinned >= 0 && n.kind === Kind.feature && state.graphComputed) {
      store.set({graphCard: {waiting: true}});
      worker.postMessage({type: Msg.graphCard, layer: n.block, feature: n.feature});
      $('graph-qk-layer').value = String(n.block);
      $('graph-qk-query').value = String(n.pos);
    }
  }

  // ---- Transcoders and computing ----------------------------------------------------------------

  const prompt = () => state.graphPrompt ?? $('graph-prompt').defaultValue;
  const maxFeatures = () => state.graphMaxFeatures ?? $('graph-max-features').defaultValue;

  function loadTranscoders(source) {
    store.set({graphTranscodersLoading: true, graphTranscodersProgress: {value: 0},
               graphTranscodersStatus: 'Starting…', graphError: ''});
    worker.postMessage({type: Msg.transcodersLoad, source});
  }

  function compute() {
    const n = Number(maxFeatures());
    if (!Number.isInteger(n) || n < 1) {
      store.set({graphError: 'The most feature nodes must be a whole number from 1.'});
      return;
    }
    if (!prompt().trim()) {
      store.set({graphError: 'Type a prompt for the graph first.'});
      return;
    }
    store.set({graphComputing: {encoding: true, done: 0, total: 0}, graphError: ''});
    worker.postMessage({type: Msg.graphCompute, prompt: prompt(), maxFeatureNodes: n});
  }

  on($('graph-transcoders-hf'), 'click', () => loadTranscoders({kind: 'hf', hf: hfBase}));
  $('graph-transcoders-url').addEventListener('input', (e) => store.set({graphTranscodersUrl: e.target.value}));
  on($('graph-transcoders-load-url'), 'click', () => {
    const folder = state.graphTranscodersUrl.trim();
    if (!folder) {
      store.set({graphError: 'Type the URL of a folder holding gpt2-small-dun-chl-mlp-tc0/ and the like first.'});
      return;
    }
    loadTranscoders({kind: 'url', folder});
  });
  on($('graph-transcoders-file'), 'change', (e) => {
    const files = [...(e.target.files || [])];
    e.target.value = '';
    if (files.length) loadTranscoders({kind: 'files', files});
  });
  on($('graph-transcoders-drop'), 'click', () => worker.postMessage({type: Msg.transcodersDrop}));
  $('graph-labels-block').addEventListener('input', (e) => store.set({graphLabelsBlock: e.target.value}));
  on($('graph-labels-file'), 'change', async (e) => {
    const file = e.target.files?.[0];
    e.target.value = '';
    const block = Number(state.graphLabelsBlock);
    if (!file) return;
    if (!Number.isInteger(block) || block < 0) {
      store.set({graphError: 'The block the labels are for must be a whole number from 0.'});
      return;
    }
    try {
      const labels = parseLabels(await labelsText(await file.arrayBuffer()));
      store.set({graphLabels: {...state.graphLabels, [block]: labels}, graphError: '',
                 graphLabelsStatus: `${labels.size} labels for block ${block}'s transcoder from ${file.name}.`});
    } catch (err) {
      store.set({graphError: `Could not read the labels from ${file.name}: ${err.message}`});
    }
    store.flush();
  });
  $('graph-prompt').addEventListener('input', (e) => store.set({graphPrompt: e.target.value}));
  $('graph-max-features').addEventListener('input', (e) => store.set({graphMaxFeatures: e.target.value}));
  on($('graph-prompt'), 'keydown', (e) => { if (e.key === 'Enter' && !$('graph-compute').disabled) compute(); });
  on($('graph-compute'), 'click', compute);
  // Also stops a transcoder download between blocks.
  on($('graph-cancel'), 'click', () => worker.postMessage({type: Msg.cancelJob}));
  // The pinned transcoder feature (of any graph, computed or opened), or null.
  function pinnedNode(s) {
    const n = s.graph?.model && s.graphPinned >= 0 ? s.graph.model.nodes[s.graphPinned] : null;
    return n && n.kind === Kind.feature && n.feature !== null && n.block >= 0 ? n : null;
  }
  on($('graph-dashboard'), 'click', () => {
    const n = pinnedNode(state);
    if (n) showDashboard?.({dictionary: 'transcoders', layer: n.block, index: n.feature});
  });
  on($('graph-check-add'), 'click', () => {
    const pinned = pinnedCheck(state);
    const add = (pinned?.ids || []).filter((id) => !state.graphCheckNodes.includes(id));
    if (add.length) store.set({graphCheckNodes: [...state.graphCheckNodes, ...add]});
  });
  on($('graph-check-clear'), 'click', () => store.set({graphCheckNodes: []}));
  $('graph-check-value').addEventListener('input', (e) => store.set({graphCheckValue: e.target.value}));
  on($('graph-check'), 'click', () => {
    const value = Number(state.graphCheckValue);
    if (String(state.graphCheckValue).trim() === '' || !Number.isFinite(value)) {
      store.set({graphError: 'The value to set the features to must be a number (0 ablates them).'});
      return;
    }
    const pinned = pinnedCheck(state);
    const picked = state.graphCheckNodes.length > 0;
    const nodeIds = picked ? state.graphCheckNodes : pinned?.ids || [];
    if (!nodeIds.length) {
      store.set({graphError: pinned?.group ? `The group “${pinned.group}” has no feature node to set.`
                                          : 'Pin a feature node or a group of the computed graph first (click it), or add several.'});
      return;
    }
    store.set({graphChecking: true, graphError: ''});
    worker.postMessage({type: Msg.graphCheck, nodeIds, value, group: picked ? '' : pinned.group});
  });

  // ---- Groups (Neuronpedia's supernodes) ---------------------------------------------------------

  // A drawn node's members (a closed group's, or the node itself) join the pick, or leave it when
  // all are picked already.
  function togglePick(i) {
    const members = model().nodes[i].members, pick = state.graphGroupPick;
    store.set({graphGroupPick: members.every((m) => pick.includes(m)) ? pick.filter((m) => !members.includes(m))
                                                                       : [...pick, ...members.filter((m) => !pick.includes(m))]});
  }
  on($('graph-group-add'), 'click', () => {
    if (model() && state.graphPinned >= 0) togglePick(state.graphPinned);
  });
  on($('graph-group-clear'), 'click', () => store.set({graphGroupPick: []}));
  $('graph-group-name').addEventListener('input', (e) => store.set({graphGroupName: e.target.value}));
  // The picked nodes become one group, drawn closed; as in Neuronpedia, a node leaves the group it
  // was in, and a group left with no member goes.
  on($('graph-group-make'), 'click', () => {
    const name = state.graphGroupName.trim();
    const pick = state.graphGroupPick;
    if (!pick.length) {
      store.set({graphError: 'Pick the nodes of the group first: Shift+click each one (or pin it, then Add).'});
      return;
    }
    if (!name) {
      store.set({graphError: 'Name the group first.'});
      return;
    }
    const groups = [], open = [];
    state.graphGroups.forEach((group, k) => {
      const members = group.members.filter((i) => !pick.includes(i));
      if (members.length) {
        groups.push(members.length === group.members.length ? group : {name: group.name, members});
        open.push(state.graphGroupsOpen[k]);
      }
    });
    store.set({graphGroupPick: [], graphGroupName: '', graphError: ''});
    regroup([...groups, {name, members: [...pick]}], [...open, false]);
  });
  on($('graph-groups'), 'click', (e) => {
    const b = e.target.closest?.('[data-group-action]');
    if (!b) return;
    const k = Number(b.dataset.group);
    if (b.dataset.groupAction === 'toggle') {
      regroup(state.graphGroups, state.graphGroupsOpen.map((o, j) => (j === k ? !o : o)), false);
    } else if (b.dataset.groupAction === 'remove') {
      regroup(state.graphGroups.filter((_, j) => j !== k), state.graphGroupsOpen.filter((_, j) => j !== k));
    }
  });
  // A head's score from a query position (blank: the last) to a key position on the graph's prompt.
  on($('graph-qk'), 'click', () => {
    const field = (id) => $(id).value.trim();
    const ask = {layer: field('graph-qk-layer'), head: field('graph-qk-head'), query: field('graph-qk-query') || '-1',
                 key: field('graph-qk-key')};
    if (!Object.values(ask).every((v) => /^-?\d+$/.test(v))) {
      store.set({graphError: 'Block, head and key position must be whole numbers (a blank query: the last position).'});
      return;
    }
    store.set({graphQk: {waiting: true}, graphError: ''});
    worker.postMessage({type: Msg.graphQk, ...Object.fromEntries(Object.entries(ask).map(([k, v]) => [k, Number(v)]))});
  });

  function transcodersProgress({phase, loaded, total, file, block}) {
    const which = block !== undefined ? `block ${block}` : file || 'the file';
    const {pct, text} = progressWords({phase, loaded, total}, {
      [Phase.download]: `Downloading ${file || which}`, [Phase.cache]: `Read ${which} from the browser cache`,
      [Phase.file]: `Reading ${which}`, [Phase.parse]: `Loading ${which} into the model`,
      [Phase.convert]: 'Converting to Q8_0'});
    store.set({graphTranscodersProgress: {value: pct}, graphTranscodersStatus: text});
  }

  function transcodersText(t, note) {
    const n = t.blocks.length;
    const blocks = n === t.nLayer && n > 0 ? `all ${n} blocks` : n ? `blocks ${t.blocks.join(', ')} of 0..${t.nLayer - 1}` : '';
    const held = n ? `Transcoders of ${blocks} loaded (${mb(t.bytes)}).` : 'No transcoders loaded.';
    return `${held}${note ? ` ${note}` : ''}`;
  }

  function onMessage(msg) {
    switch (msg.type) {
      case Msg.transcodersProgress: transcodersProgress(msg); return true;
      case Msg.transcoders:
        store.set({graphTranscoders: msg, graphTranscodersLoading: false, graphTranscodersStatus: transcodersText(msg, msg.note),
                   graphTranscodersProgress: {value: msg.blocks.length ? 100 : 0},
                   // The engine dropped its graph with the old set: a graph shown stays, without cards or checks.
                   ...(state.graphComputed ? {graphComputed: false, graphCard: null, graphQk: null} : {})});
        afterLinkTranscoders(msg);
        return true;
      case Msg.graphProgress:
        store.set({graphComputing: {encoding: msg.encoding, done: msg.done, total: msg.total}});
        return true;
      case Msg.graph:
        store.set({graphComputing: null});
        if (msg.cancelled) {
          store.set({graphError: `Cancelled after ${msg.done} of ${msg.total} rows; the graph shown before stays.`});
        } else if (openGraphText(msg.text, `computed in ${(msg.ms / 1000).toFixed(1)} s`, {computed: true,
                                                                                          nodeThreshold: msg.nodeThreshold})) {
          store.set({graphUnder: msg});
        }
        return true;
      case Msg.graphCard:
        if (state.graphComputed) store.set({graphCard: msg});
        return true;
      case Msg.graphCheck:
        store.set({graphChecking: false, graphChecks: [msg, ...state.graphChecks]});
        return true;
      case Msg.graphQk:
        store.set({graphQk: state.graphComputed ? msg : null});
        return true;
      default: return false;
    }
  }

  // An error of kind 'graph' ends whatever the panel waits for.
  function onError(message) {
    store.set({graphTranscodersLoading: false, graphComputing: null, graphChecking: false, graphError: message,
               ...(state.graphCard?.waiting ? {graphCard: null} : {}), ...(state.graphQk?.waiting ? {graphQk: null} : {})});
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
    // The text as it was opened, byte for byte, unless its groups changed: then the same file with
    // them as its qParams.supernodes.
    const name = /\.json$/i.test(g.source) ? g.source : `${g.model.meta.slug || 'attribution-graph'}.json`;
    const text = state.graphGroupsEdited ? withSupernodes(g.text, g.model, state.graphGroups) : g.text;
    download(name, new Blob([text], {type: 'application/json'}));
  });
  on($('graph-node-threshold'), 'input', (e) => store.set({graphNodeThreshold: Number(e.target.value)}));
  on($('graph-edge-threshold'), 'input', (e) => store.set({graphEdgeThreshold: Number(e.target.value)}));

  const view = $('graph-view');
  // Shift with a click, Enter or Space picks the node for a group (again: unpicks it) instead.
  on(view, 'click', (e) => {
    const node = nodeOf(e.target);
    if (node) (e.shiftKey ? togglePick : choose)(Number(node.dataset.index));
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
      (e.shiftKey ? togglePick : choose)(i);
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
        (s.graphGroups.length ? `; ${s.graphGroups.length} group${s.graphGroups.length === 1 ? '' : 's'}` : '') +
        (g.droppedGroups ? `; ${g.droppedGroups} of the file's groups are left out (not lists of node ids, or no member here)` : '') +
        (g.droppedMembers ? `; ${g.droppedMembers} group members name nodes not in the file` : '') +
        (scores.length ? `; ${scores.join(', ')}` : '') + '.';
  }

  // A link's transcoders and graph (app.js calls this once a model is ready): `transcoders=URL`
  // (a .gguf from gpt2-convert --transcoders) loads them, and `graph=PROMPT` then computes that
  // prompt's graph, so the offline demo opens with the small model's graph computed.
  let linkGraph = null;
  function restoreLink(params) {
    const url = params.get('transcoders');
    if (!url) return;
    linkGraph = params.get('graph');
    if (linkGraph !== null) store.set({graphPrompt: linkGraph});
    params.delete('transcoders');  // once: a later model loads none
    loadTranscoders({kind: 'gguf', url});
  }
  function afterLinkTranscoders(msg) {
    if (linkGraph === null) return;
    const p = linkGraph;
    linkGraph = null;
    if (msg.blocks.length && p.trim()) compute();
  }

  return {
    openGraphText,
    restoreLink,
    onMessage,
    onError,
    render(s) {
      const g = drawnOf(s);  // the graph as drawn, groups closed
      const free = canRun(s) && !!s.info;
      const loading = s.graphTranscodersLoading, computing = !!s.graphComputing;
      for (const id of ['graph-transcoders-hf', 'graph-transcoders-load-url', 'graph-transcoders-file']) {
        $(id).disabled = !free || loading || computing;
      }
      $('graph-transcoders-drop').disabled = !free || loading || computing || !s.graphTranscoders.blocks.length;
      $('graph-transcoders-progress').value = s.graphTranscodersProgress.value;
      $('graph-transcoders-status').textContent = s.graphTranscodersStatus;
      if ($('graph-transcoders-url').value !== s.graphTranscodersUrl) $('graph-transcoders-url').value = s.graphTranscodersUrl;
      if (s.graphPrompt !== null && $('graph-prompt').value !== s.graphPrompt) $('graph-prompt').value = s.graphPrompt;
      $('graph-compute').disabled = !free || loading || computing || !s.graphTranscoders.blocks.length;
      $('graph-cancel').disabled = !computing && !loading;
      // Reading the features takes about a tenth of the time; the rows the rest.
      const c = s.graphComputing;
      const share = c && c.total ? c.done / c.total : 0;
      $('graph-compute-progress').value = c ? Math.round(c.encoding ? 10 * share : 10 + 90 * share) : 0;
      $('graph-compute-status').textContent = !c ? '' : c.encoding
          ? `Reading the prompt's features: block ${c.done} of ${c.total}…`
          : `Computing the graph's rows: ${c.done} of ${c.total}…`;
      const pinned = pinnedCheck(s);
      $('graph-dashboard').disabled = !pinnedNode(s);
      $('graph-check-add').disabled = !pinned || pinned.ids.every((id) => s.graphCheckNodes.includes(id));
      $('graph-check-clear').disabled = !s.graphCheckNodes.length;
      $('graph-check').disabled = !free || computing || s.graphChecking || !s.graphComputed ||
          (!pinned?.ids.length && !s.graphCheckNodes.length);
      const left = pinned?.left ? ` (its ${pinned.left} other node${pinned.left === 1 ? '' : 's'}, errors or tokens, ` +
          'cannot be set and stay)' : '';
      $('graph-check-nodes').textContent = s.graphCheckNodes.length ? `Picked: ${s.graphCheckNodes.join(', ')}.` :
          pinned?.group ? `The pinned group “${pinned.group}” is checked, its ${pinned.ids.length} feature nodes at once` +
              `${left}, unless you add others.` :
          pinned ? `The pinned feature ${pinned.ids[0]} is checked unless you add others.` : 'No feature picked.';
      const groupPinned = g && s.graphPinned >= 0 ? g.nodes[s.graphPinned] : null;
      $('graph-group-add').disabled = !groupPinned || groupPinned.members.every((i) => s.graphGroupPick.includes(i));
      $('graph-group-clear').disabled = !s.graphGroupPick.length;
      $('graph-group-make').disabled = !g || !s.graphGroupPick.length;
      if ($('graph-group-name').value !== s.graphGroupName) $('graph-group-name').value = s.graphGroupName;
      $('graph-group-picked').textContent = !g ? '' : s.graphGroupPick.length
          ? `Picked: ${s.graphGroupPick.map((i) => g.parsed.nodes[i].id).join(', ')}.` : 'No node picked.';
      renderIfChanged(graphView.renderGroups, $('graph-groups'), {graph: g?.parsed ?? null, groups: s.graphGroups,
                                                                 open: s.graphGroupsOpen});
      showUnder('graph-under', s.graphComputed ? s.graphUnder : null);
      renderIfChanged(checkView.renderCard, $('graph-feature-card'), {
        card: s.graphComputed && s.graphCard && !s.graphCard.waiting ? s.graphCard : null,
        waiting: !!s.graphCard?.waiting,
        label: s.graphCard && !s.graphCard.waiting ? s.graphLabels[s.graphCard.layer]?.get(s.graphCard.feature) ?? '' : ''});
      $('graph-labels-status').textContent = s.graphLabelsStatus;
      renderIfChanged(checkView.renderChecks, $('graph-check-result'), {checks: s.graphChecks, running: s.graphChecking});
      $('graph-qk').disabled = !free || computing || !!s.graphQk?.waiting || !s.graphComputed;
      renderIfChanged(qkView.renderQk, $('graph-qk-result'), {
        qk: s.graphQk && !s.graphQk.waiting ? s.graphQk : null, waiting: !!s.graphQk?.waiting, labels: s.graphLabels});
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
        picked: g ? pickedOf(g, s.graphGroupPick) : null,
        label: g ? `Attribution graph of “${g.meta.prompt ?? ''}”: blocks upward, positions across. ` +
            'Arrow keys move between nodes, Enter pins one, Shift+Enter picks it for a group.' : '',
      });
      renderIfChanged(graphView.renderDetails, $('graph-node-details'), {
        graph: g, groups: s.graphGroups, shown: visible, edgeThreshold: s.graphEdgeThreshold, current: g ? s.graphCurrent : -1,
        pinned: s.graphPinned,
      });
      renderIfChanged(graphView.renderPaths, $('graph-paths'), {graph: g, paths, logit: s.graphLogit});
    },
  };
}
