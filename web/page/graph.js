// An attribution graph as circuit-tracer writes it (circuit_tracer/utils/create_graph_files.py and
// frontend/graph_models.py; `gpt2 graph --json` writes the same) and Neuronpedia's viewer opens it:
//   {"metadata": {"prompt", "prompt_tokens": [...], "node_threshold", ...},
//    "nodes": [{"node_id", "feature_type", "layer", "ctx_idx", "feature", "activation", "influence",
//               "token_prob", "is_target_logit", "clerp", ...}],
//    "links": [{"source", "target", "weight"}]}
// Layers are strings: "E" for the embeddings, "0".."n-1" for the blocks, and n + 1 for the logits
// (graph_models.py's logit_node writes num_layers + 1). `influence` is circuit-tracer's cumulative
// influence (graph.py's prune_graph): nodes sorted from most to least influential, the running
// share of the logits' total influence, so the most influential node has the smallest value and a
// threshold t keeps the nodes with influence <= t, as Neuronpedia's viewer filters them.
// Everything here is plain data (no DOM): the panel (app-graph.js) derives what to show from it and
// view-graph.js draws that.

export const Kind = Object.freeze({
  feature: 'cross layer transcoder',
  error: 'mlp reconstruction error',
  embedding: 'embedding',
  logit: 'logit',
  supernode: 'supernode',  // a group drawn as one node (groupedGraph); never a file's node
});

// A graph file that cannot be read, with what is wrong in words.
export class GraphFileError extends Error {}

const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);
const optionalNumber = (v) => (isNumber(v) ? v : null);

// The graph of a graph file's text: {meta, nodes, byId, links, incoming, outgoing, rows, nBlocks,
// nPositions, tokens, droppedLinks, duplicateNodes, maxAbsWeight}; nodes[i]: {id, kind (a feature_type), layer
// (as written), row (0: embeddings, b + 1: block b, nBlocks + 1: logits), pos, feature,
// activation, influence, tokenProb, isTarget, clerp}; links[k]: {source, target (node indices),
// weight, share}; incoming[i] / outgoing[i]: link indices, strongest |weight| first.
// Throws GraphFileError naming the first problem.
export function parseGraph(text) {
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new GraphFileError(`it is not JSON (${e.message})`);
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new GraphFileError('it is not a JSON object');
  if (!Array.isArray(json.nodes)) throw new GraphFileError('it has no "nodes" list, so it is not a graph file');
  if (!Array.isArray(json.links)) throw new GraphFileError('it has no "links" list, so it is not a graph file');
  if (json.nodes.length === 0) throw new GraphFileError('its "nodes" list is empty');
  const meta = json.metadata && typeof json.metadata === 'object' ? json.metadata : {};

  const byId = new Map(), byJsId = new Map();
  const nodes = [];
  let duplicateNodes = 0;
  json.nodes.forEach((n, i) => {
    if (!n || typeof n !== 'object') throw new GraphFileError(`node ${i} is not an object`);
    const id = n.node_id;
    if (typeof id !== 'string' || !id) throw new GraphFileError(`node ${i} has no "node_id" string`);
    // Ids can collide in files of circuit-tracer's older releases: the error node of block L at
    // position p was "0_L_p", as is feature L of block 0 there (now "L_-1_p"). Links name nodes by
    // id only, so the first keeps it (the panel says how many others were left out) rather than
    // refusing a file its own tools wrote.
    if (byId.has(id)) { ++duplicateNodes; return; }
    byId.set(id, nodes.length);
    if (typeof n.jsNodeId === 'string' && !byJsId.has(n.jsNodeId)) byJsId.set(n.jsNodeId, nodes.length);
    if (typeof n.feature_type !== 'string') throw new GraphFileError(`node "${id}" has no "feature_type"`);
    if (!Number.isInteger(n.ctx_idx) || n.ctx_idx < 0) {
      throw new GraphFileError(`node "${id}" has no "ctx_idx" (a position, a whole number from 0)`);
    }
    const layer = String(n.layer);
    const block = Number(layer);
    if (n.feature_type !== Kind.embedding && layer !== 'E' && !(Number.isInteger(block) && block >= 0 && layer !== '')) {
      throw new GraphFileError(`node "${id}" has layer "${n.layer}", neither "E" nor a block number`);
    }
    nodes.push({
      id, kind: n.feature_type, layer, block: n.feature_type === Kind.embedding || layer === 'E' ? -1 : block,
      pos: n.ctx_idx, feature: optionalNumber(n.feature), activation: optionalNumber(n.activation),
      influence: optionalNumber(n.influence), tokenProb: optionalNumber(n.token_prob),
      isTarget: n.is_target_logit === true, clerp: typeof n.clerp === 'string' ? n.clerp : '', index: nodes.length,
    });
  });

  // The blocks: 0 .. logit layer - 2 when logits are there (circuit-tracer's num_layers + 1), and
  // at least up to the highest block a node sits in (another writer may number the logits n).
  let nBlocks = 0;
  for (const n of nodes) {
    if (n.kind === Kind.logit) nBlocks = Math.max(nBlocks, n.block - 1);
    else nBlocks = Math.max(nBlocks, n.block + 1);
  }
  for (const n of nodes) n.row = n.kind === Kind.logit ? nBlocks + 1 : n.block + 1;

  const links = [];
  let droppedLinks = 0;
  json.links.forEach((l, k) => {
    if (!l || typeof l !== 'object' || !isNumber(l.weight)) {
      throw new GraphFileError(`link ${k} has no numeric "weight"`);
    }
    const s = byId.get(l.source), t = byId.get(l.target);
    // Neuronpedia's viewer drops links whose ends are not in the file (e.g. pruned); so do we,
    // and the panel says how many.
    if (s === undefined || t === undefined) { ++droppedLinks; return; }
    links.push({source: s, target: t, weight: l.weight, share: 0});
  });

  const tokens = Array.isArray(meta.prompt_tokens) ? meta.prompt_tokens.map(String) : [];
  // A loop, not Math.max(...): an unpruned graph's node list is longer than a call's arguments may be.
  let nPositions = tokens.length;
  for (const n of nodes) nPositions = Math.max(nPositions, n.pos + 1);
  const {groups, droppedGroups, droppedMembers} = readSupernodes(json.qParams, byId, byJsId);
  return {meta, nodes, byId, links, ...linked(nodes, links), nBlocks, nPositions, tokens, droppedLinks, duplicateNodes,
          groups, droppedGroups, droppedMembers};
}

// The lists over links a graph keeps: {incoming, outgoing, maxAbsWeight}, incoming[i] / outgoing[i]
// node i's link indices, strongest |weight| first; and each link's share set. `from` (groupedGraph)
// gives lists already in order, and which nodes' lists need sorting again.
function linked(nodes, links, from = null) {
  let incoming, outgoing;
  if (from) {
    ({incoming, outgoing} = from);
  } else {
    incoming = nodes.map(() => []);
    outgoing = nodes.map(() => []);
    links.forEach((l, k) => {
      incoming[l.target].push(k);
      outgoing[l.source].push(k);
    });
  }
  let maxAbsWeight = 0;
  for (const l of links) maxAbsWeight = Math.max(maxAbsWeight, Math.abs(l.weight));
  const byStrength = (a, b) => Math.abs(links[b].weight) - Math.abs(links[a].weight);
  for (let i = 0; i < nodes.length; ++i) {
    if (from && !from.unsorted[i]) continue;
    incoming[i].sort(byStrength);
    outgoing[i].sort(byStrength);
  }
  // A link's share of its target's input: |weight| over the sum of |weight| into the target, the
  // row normalisation circuit-tracer's influence uses (graph.py's normalize_matrix).
  incoming.forEach((list) => {
    const total = list.reduce((sum, k) => sum + Math.abs(links[k].weight), 0);
    for (const k of list) links[k].share = total > 0 ? Math.abs(links[k].weight) / total : 0;
  });
  return {incoming, outgoing, maxAbsWeight};
}

// The file's groups of nodes, Neuronpedia's supernodes: qParams.supernodes = [["name", "node_id",
// ...], ...] (its graph-types.ts CLTGraphQParams). Neuronpedia names a member by node_id, and by
// jsNodeId in the graphs of Anthropic's own models and in older files, so both are looked up.
// As Neuronpedia's subgraph assigns them, a node belongs to the last group naming it. What is not
// a group (not a list of strings, or no member in this file) is left out and counted, as are
// members naming no node: [{name, members: [node index...]}], droppedGroups, droppedMembers.
function readSupernodes(qParams, byId, byJsId) {
  const list = qParams && typeof qParams === 'object' && Array.isArray(qParams.supernodes) ? qParams.supernodes : [];
  const read = [];
  let droppedGroups = 0, droppedMembers = 0;
  for (const entry of list) {
    if (!Array.isArray(entry) || entry.length < 2 || !entry.every((x) => typeof x === 'string')) {
      ++droppedGroups;
      continue;
    }
    const members = [];
    for (const id of entry.slice(1)) {
      const i = byId.get(id) ?? byJsId.get(id);
      if (i === undefined) ++droppedMembers;
      else if (!members.includes(i)) members.push(i);
    }
    read.push({name: entry[0], members});
  }
  const owner = new Map();
  read.forEach((group, k) => { for (const i of group.members) owner.set(i, k); });
  const groups = [];
  read.forEach((group, k) => {
    const members = group.members.filter((i) => owner.get(i) === k);
    if (members.length) groups.push({name: group.name, members});
    else ++droppedGroups;
  });
  return {groups, droppedGroups, droppedMembers};
}

// The groups as qParams.supernodes writes them, members by node_id.
export const supernodesOf = (g, groups) => groups.map((group) => [group.name, ...group.members.map((i) => g.nodes[i].id)]);

// The graph file's text with `groups` as its qParams.supernodes, the rest of the file as it was
// (its other qParams too: Neuronpedia keeps pinned ids there).
export function withSupernodes(text, g, groups) {
  const json = JSON.parse(text);
  const q = json.qParams && typeof json.qParams === 'object' && !Array.isArray(json.qParams) ? json.qParams : {};
  json.qParams = {...q, supernodes: supernodesOf(g, groups)};
  return JSON.stringify(json);
}

// The graph as drawn with its groups: each closed group one node of kind Kind.supernode (id
// `supernode-K`, K its place among the groups, as Neuronpedia's subgraph names them) standing at
// its members' mean row and position, and a link between two drawn nodes the sum of the weights
// of every link between what they stand for, in and out; the links within a group are gone. An
// open group's members are drawn as they are, each with `group` K. The result has parseGraph's
// fields, so everything that reads a graph reads it; each drawn node's `members` are its indices
// in `g` (itself for a plain node), and `parsed` is g.
export function groupedGraph(g, groups, open) {
  const closed = groups.map((_, k) => !open[k]);
  const groupOf = new Map();
  groups.forEach((group, k) => { for (const i of group.members) groupOf.set(i, k); });
  if (!closed.some(Boolean)) {
    return {...g, nodes: g.nodes.map((n) => ({...n, members: [n.index], group: groupOf.get(n.index) ?? -1})), parsed: g};
  }
  const nodes = [];
  const drawnOf = new Int32Array(g.nodes.length);
  const byId = new Map();
  for (const n of g.nodes) {
    const k = groupOf.get(n.index) ?? -1;
    if (k >= 0 && closed[k]) continue;
    drawnOf[n.index] = nodes.length;
    byId.set(n.id, nodes.length);
    nodes.push({...n, index: nodes.length, members: [n.index], group: k});
  }
  groups.forEach((group, k) => {
    if (!closed[k]) return;
    const ms = group.members.map((i) => g.nodes[i]);
    const mean = (f) => Math.round(ms.reduce((a, m) => a + f(m), 0) / ms.length);
    // The most influential member's cumulative influence: the group is as large as its strongest.
    const influence = ms.reduce((best, m) => (m.influence === null ? best : Math.min(best ?? 1, m.influence)), null);
    const node = {id: `supernode-${k}`, kind: Kind.supernode, name: group.name, layer: '', block: -1, row: mean((m) => m.row),
                  pos: mean((m) => m.pos), feature: null, activation: null,
                  influence, tokenProb: null, isTarget: false,
                  clerp: group.name, index: nodes.length, members: [...group.members], group: k};
    for (const i of group.members) drawnOf[i] = node.index;
    byId.set(node.id, node.index);
    nodes.push(node);
  });
  // A link between two plain nodes stays as it is, and keeps its place in its ends' lists (already
  // strongest first: sorting every list again took 0.5 s on 280 k links); only the links touching a
  // closed group are summed, and only their ends' lists sorted again.
  const inClosed = (i) => groupOf.has(i) && closed[groupOf.get(i)];
  const links = [], sums = new Map(), renumbered = new Int32Array(g.links.length).fill(-1);
  g.links.forEach((l, k) => {
    const s = drawnOf[l.source], t = drawnOf[l.target];
    if (!inClosed(l.source) && !inClosed(l.target)) {
      renumbered[k] = links.length;
      links.push({source: s, target: t, weight: l.weight, share: 0});
    } else if (s !== t) {
      const key = s * nodes.length + t;
      sums.set(key, (sums.get(key) || 0) + l.weight);
    }
  });
  const incoming = nodes.map(() => []), outgoing = nodes.map(() => []);
  for (const n of nodes) {
    if (n.kind === Kind.supernode) continue;
    for (const k of g.incoming[n.members[0]]) if (renumbered[k] >= 0) incoming[n.index].push(renumbered[k]);
    for (const k of g.outgoing[n.members[0]]) if (renumbered[k] >= 0) outgoing[n.index].push(renumbered[k]);
  }
  const unsorted = new Uint8Array(nodes.length);
  for (const [key, weight] of sums) {
    const source = Math.floor(key / nodes.length), target = key % nodes.length;
    incoming[target].push(links.length);
    outgoing[source].push(links.length);
    unsorted[source] = unsorted[target] = 1;
    links.push({source, target, weight, share: 0});
  }
  return {...g, nodes, byId, links, ...linked(nodes, links, {incoming, outgoing, unsorted}), parsed: g};
}

// Nodes shown at node threshold t (Neuronpedia's pruningThreshold): every embedding, logit and
// group, and every other node whose cumulative influence is at most t. A node without a stored
// influence cannot be filtered by it and stays. Returns a Uint8Array over g.nodes.
export function shownNodes(g, t) {
  return Uint8Array.from(g.nodes, (n) => n.kind === Kind.embedding || n.kind === Kind.logit ||
      n.kind === Kind.supernode || n.influence === null || n.influence <= t ? 1 : 0);
}

// Link k is shown when both its ends are and its |weight| reaches the edge threshold.
export const linkShown = (g, shown, k, edgeThreshold) =>
  !!(shown[g.links[k].source] && shown[g.links[k].target] && Math.abs(g.links[k].weight) >= edgeThreshold);

// The logit the paths lead to by default: the file's target logit, else the most probable one.
export function defaultLogit(g) {
  const logits = g.nodes.filter((n) => n.kind === Kind.logit);
  const target = logits.find((n) => n.isTarget) ||
      logits.reduce((best, n) => (!best || (n.tokenProb ?? 0) > (best.tokenProb ?? 0) ? n : best), null);
  return target ? target.index : -1;
}

// The k strongest paths from the prompt (embedding nodes) to logit node `logit`, over shown links:
// a path's strength is the product of its links' shares (each link's |weight| over its target's
// total input), the fraction of the logit's attribution that flows along it when every node passes
// its input on in proportion. Each embedding contributes its best path; the k best of those are
// returned, strongest first: [{nodes: [index...], links: [link index...], strength}].
export function strongestPaths(g, shown, edgeThreshold, logit, k = 3) {
  if (logit < 0 || !shown[logit]) return [];
  const N = g.nodes.length;
  const best = new Float64Array(N), next = new Int32Array(N).fill(-1);
  best[logit] = 1;
  // Links run from a lower row to a higher one (a node is read by later blocks only), so a pass
  // from the top row down sees every node's successors finished; a link that does not climb
  // (none in circuit-tracer's files) is left out rather than risk a cycle.
  const order = g.nodes.map((n) => n.index).sort((a, b) => g.nodes[b].row - g.nodes[a].row);
  for (const i of order) {
    if (i === logit || !shown[i]) continue;
    for (const l of g.outgoing[i]) {
      const link = g.links[l];
      if (g.nodes[link.target].row <= g.nodes[i].row || !linkShown(g, shown, l, edgeThreshold)) continue;
      const v = link.share * best[link.target];
      if (v > best[i]) { best[i] = v; next[i] = l; }
    }
  }
  const starts = g.nodes.filter((n) => n.kind === Kind.embedding && best[n.index] > 0)
      .sort((a, b) => best[b.index] - best[a.index]).slice(0, k);
  return starts.map(({index}) => {
    const path = {nodes: [index], links: [], strength: best[index]};
    for (let i = index; next[i] >= 0; i = g.links[next[i]].target) {
      path.links.push(next[i]);
      path.nodes.push(g.links[next[i]].target);
    }
    return path;
  });
}

// Within a row, nodes by position, then the most influential first (logits: the most probable).
function rank(n) {
  if (n.kind === Kind.logit) return -(n.tokenProb ?? 0);
  return n.influence ?? 1;
}
export const nodeOrder = (a, b) => a.pos - b.pos || rank(a) - rank(b) || a.index - b.index;

// The shown nodes row by row, each row in nodeOrder: [[node...] for row 0 .. nBlocks + 1].
export function rowsOf(g, shown) {
  const rows = Array.from({length: g.nBlocks + 2}, () => []);
  for (const n of g.nodes) if (shown[n.index]) rows[n.row].push(n);
  for (const r of rows) r.sort(nodeOrder);
  return rows;
}

// Where an arrow key moves keyboard focus from node i among the shown ones: left and right along
// its row, up and down to the nearest row with shown nodes, to the node at the closest position
// (the first such in nodeOrder). Returns a node index (i itself at an edge of the graph).
export function stepFrom(rows, g, i, key) {
  const n = g.nodes[i], row = rows[n.row], at = row.indexOf(n);
  if (key === 'ArrowLeft') return row[Math.max(0, at - 1)].index;
  if (key === 'ArrowRight') return row[Math.min(row.length - 1, at + 1)].index;
  if (key === 'Home') return row[0].index;
  if (key === 'End') return row[row.length - 1].index;
  const dir = key === 'ArrowUp' ? 1 : key === 'ArrowDown' ? -1 : 0;
  if (!dir) return i;
  for (let r = n.row + dir; r >= 0 && r < rows.length; r += dir) {
    if (!rows[r].length) continue;
    let pick = rows[r][0];
    for (const m of rows[r]) if (Math.abs(m.pos - n.pos) < Math.abs(pick.pos - n.pos)) pick = m;
    return pick.index;
  }
  return i;
}

// The prompt's token at position p as written in the file (circuit-tracer writes ⏎ for a line
// break already), in quotes; its position when the file has no prompt_tokens.
export const tokenAt = (g, p) => (g.tokens[p] === undefined ? `position ${p}` : `“${g.tokens[p]}”`);

// A logit's token: from its clerp (circuit-tracer writes `Output " Paris" (p=0.430)`), else its id.
function logitToken(n) {
  const m = /^Output "(.*)" \(p=/.exec(n.clerp);
  return m ? `“${m[1]}”` : `token ${n.feature}`;
}

// A node in words, e.g. `feature 123 in block 3 at “ fox” (position 5)`.
export function describeNode(g, i) {
  const n = g.nodes[i];
  const where = g.tokens[n.pos] === undefined ? `at position ${n.pos}` : `at ${tokenAt(g, n.pos)} (position ${n.pos})`;
  switch (n.kind) {
    case Kind.embedding: return `embedding ${where}`;
    case Kind.logit: return `logit ${logitToken(n)}${n.tokenProb === null ? '' : ` (p = ${n.tokenProb.toFixed(3)})`}`;
    case Kind.error: return `MLP error node in block ${n.block} ${where}`;
    case Kind.feature: return `feature ${n.feature} in block ${n.block} ${where}`;
    case Kind.supernode: return `group “${n.name}” of ${n.members.length} node${n.members.length === 1 ? '' : 's'}`;
    default: return `${n.kind} ${n.feature ?? ''} in block ${n.block} ${where}`;
  }
}
