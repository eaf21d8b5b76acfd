// The attribution graph (graph.js's model) as SVG: blocks up, the prompt's positions across, one
// mark per node, sized by influence and shaped and coloured by kind; the strongest paths to the
// chosen logit drawn always, the pinned node's and the hovered or focused node's links on top.
// It only draws: app-graph.js decides what is shown, pinned and focused.
//   data-testid="graph-view"          the container (box)
//   [data-node-id]                    a node (focusable, role button; the chosen one aria-pressed)
//   [data-edge]                       a drawn link, data-edge-role "path" | "pinned" | "hover"
//   data-testid="graph-supernode"     a closed group drawn as one node (also [data-node-id]
//                                     "supernode-K", data-members: its members' node ids)
//   [data-group]                      a node of an open group: the group's place K
//   [data-picked="true"]              a node picked for a new group
//   data-testid="graph-node-details"  the current node's numbers as text (renderDetails)
//   data-testid="graph-group"         one group in the list (renderGroups), data-group K, with
//                                     buttons data-testid graph-group-toggle and graph-group-remove
import {describeNode, Kind, linkShown, rowsOf, tokenAt} from '../page/graph.js';
import {fmt} from './viz.js';

const kSvg = 'http://www.w3.org/2000/svg';
const kRowHeight = 38;
const kLeft = 62;      // row labels
const kBottom = 40;    // token labels
const kTop = 10;
const kMinR = 3.5, kMaxR = 10;
const kMinColumn = 68;
// Drawn links per node and direction: a --no-prune graph gives a node thousands, which would
// bury the strongest; the details list says how many there are.
export const kMaxDrawnLinks = 150;

// Shapes tell the kinds apart without colour: circle (feature), square (error), diamond (logit),
// rounded bar (embedding), hexagon (a group), as the legend in index.html says.
const kKindStyle = {
  [Kind.feature]: {fill: '#3b528b', label: 'feature'},
  [Kind.error]: {fill: '#8a8a94', label: 'MLP error'},
  [Kind.embedding]: {fill: '#2a9d5c', label: 'embedding'},
  [Kind.logit]: {fill: '#e0b000', label: 'logit'},
  [Kind.supernode]: {fill: '#7b4fa0', label: 'group'},
};
const kPositive = '#d95f02', kNegative = '#1f6fb4';  // orange raises its target, blue lowers it

const el = (name, attrs = {}) => {
  const e = document.createElementNS(kSvg, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

// The most influential nodes have the smallest cumulative influence (graph.js), so size grows
// with 1 - influence; logits with their probability; a node without either gets the least.
function radius(n) {
  const strength = n.kind === Kind.logit ? n.tokenProb : n.influence === null ? null : 1 - n.influence;
  return kMinR + (kMaxR - kMinR) * Math.max(0, Math.min(1, strength ?? 0));
}

// Node positions in pixels for the shown nodes: columns as wide as their busiest row needs.
function layout(g, rows) {
  const perColumn = new Array(g.nPositions).fill(1);
  const counts = new Map();
  for (const row of rows) {
    for (const n of row) {
      const key = `${n.row}|${n.pos}`;
      counts.set(key, (counts.get(key) || 0) + 1);
      perColumn[n.pos] = Math.max(perColumn[n.pos], counts.get(key));
    }
  }
  const widths = perColumn.map((c) => Math.max(kMinColumn, Math.min(c, 12) * 2 * kMaxR * 0.9 + 12));
  const x0 = [];
  let x = kLeft;
  for (const w of widths) { x0.push(x); x += w; }
  const height = kTop + rows.length * kRowHeight + kBottom;
  const at = new Map();  // node index -> {x, y, r}
  const y = (row) => kTop + (rows.length - 1 - row + 0.5) * kRowHeight;
  for (const row of rows) {
    let lastPos = -1, inCell = [];
    const place = () => {
      if (!inCell.length) return;
      const w = widths[lastPos] - 12, step = Math.min(2 * kMaxR + 2, w / inCell.length);
      inCell.forEach((n, j) => at.set(n.index, {x: x0[lastPos] + 6 + step * (j + 0.5), y: y(n.row), r: radius(n)}));
    };
    for (const n of row) {
      if (n.pos !== lastPos) { place(); inCell = []; lastPos = n.pos; }
      inCell.push(n);
    }
    place();
  }
  return {at, widths, x0, width: x, height, y};
}

const rowLabel = (g, r) => (r === 0 ? 'embed' : r === g.nBlocks + 1 ? 'logits' : `block ${r - 1}`);

function drawAxes(g, rows, lay) {
  const axes = el('g', {class: 'graph-axes', 'aria-hidden': 'true'});
  for (let r = 0; r < rows.length; ++r) {
    const t = el('text', {x: 4, y: lay.y(r) + 4, class: 'graph-row-label'});
    t.textContent = rowLabel(g, r);
    axes.append(el('line', {x1: kLeft, x2: lay.width, y1: lay.y(r), y2: lay.y(r), class: 'graph-row-line'}), t);
  }
  for (let p = 0; p < g.nPositions; ++p) {
    const t = el('text', {x: lay.x0[p] + 4, y: lay.height - kBottom + 16, class: 'graph-token-label'});
    const token = g.tokens[p] === undefined ? `#${p}` : g.tokens[p];
    // A long token is cut to its column; its full text is in the title.
    const room = Math.max(3, Math.floor((lay.widths[p] - 8) / 7));
    t.textContent = token.length > room ? `${token.slice(0, room - 1)}…` : token;
    const title = el('title');
    title.textContent = `${tokenAt(g, p)}, position ${p}`;
    t.append(title);
    const n = el('text', {x: lay.x0[p] + 4, y: lay.height - kBottom + 30, class: 'graph-pos-label'});
    n.textContent = p;
    axes.append(t, n);
  }
  return axes;
}

function drawNode(g, n, p) {
  const {fill} = kKindStyle[n.kind] || kKindStyle[Kind.feature];
  const node = el('g', {class: 'graph-node', 'data-node-id': n.id, 'data-index': n.index, role: 'button',
                        tabindex: -1, 'aria-pressed': 'false', 'aria-label': describeNode(g, n.index),
                        transform: `translate(${p.x.toFixed(1)} ${p.y.toFixed(1)})`});
  const r = p.r;
  let shape;
  if (n.kind === Kind.error) shape = el('rect', {x: -r, y: -r, width: 2 * r, height: 2 * r});
  else if (n.kind === Kind.logit) shape = el('path', {d: `M0 ${-r * 1.3}L${r * 1.3} 0L0 ${r * 1.3}L${-r * 1.3} 0Z`});
  else if (n.kind === Kind.embedding) shape = el('rect', {x: -r * 1.3, y: -r * 0.8, width: 2.6 * r, height: 1.6 * r, rx: 3});
  else if (n.kind === Kind.supernode) shape = el('path', {d: hexagon(Math.max(r, 7) * 1.25)});
  else shape = el('circle', {r});
  shape.setAttribute('fill', fill);
  shape.setAttribute('class', 'graph-shape');
  // A generous invisible target: the smallest nodes are 7 px across.
  node.append(el('circle', {r: Math.max(r + 3, 9), class: 'graph-hit'}), shape);
  if (n.kind === Kind.supernode) {
    node.setAttribute('data-testid', 'graph-supernode');
    node.setAttribute('data-members', n.members.map((i) => g.parsed.nodes[i].id).join(' '));
    const name = el('text', {x: 0, y: -Math.max(r, 7) * 1.25 - 3, class: 'graph-group-label', 'text-anchor': 'middle'});
    name.textContent = n.name.length > 14 ? `${n.name.slice(0, 13)}…` : n.name;
    node.append(name);
  } else if (n.group >= 0) {
    node.setAttribute('data-group', n.group);
    node.classList.add('in-group');
  }
  return node;
}

const hexagon = (r) => Array.from({length: 6}, (_, k) => {
  const a = Math.PI / 3 * k;
  return `${k ? 'L' : 'M'}${(r * Math.cos(a)).toFixed(1)} ${(r * Math.sin(a)).toFixed(1)}`;
}).join('') + 'Z';

// One drawn link. Width grows with |weight| relative to the strongest in the file.
function drawLink(g, k, lay, role) {
  const l = g.links[k], a = lay.at.get(l.source), b = lay.at.get(l.target);
  const w = 0.8 + 4.5 * Math.abs(l.weight) / (g.maxAbsWeight || 1);
  const mid = (a.y + b.y) / 2;
  // A link within one column would run straight through the nodes between its ends: bow it
  // sideways, more for a longer one, so each stays visible.
  const bow = Math.abs(a.x - b.x) < 4 ? Math.min(40, 6 + Math.abs(a.y - b.y) / kRowHeight * 5) : 0;
  const f = (v) => v.toFixed(1);
  const line = el('path', {
    d: `M${f(a.x)} ${f(a.y)}C${f(a.x + bow)} ${f(mid)} ${f(b.x + bow)} ${f(mid)} ${f(b.x)} ${f(b.y)}`,
    stroke: l.weight >= 0 ? kPositive : kNegative, 'stroke-width': w.toFixed(2), fill: 'none',
    class: `graph-edge graph-edge-${role}`, 'data-edge': `${g.nodes[l.source].id}>${g.nodes[l.target].id}`,
    'data-edge-role': role, 'data-weight': l.weight,
  });
  return line;
}

// The links of node i drawn for `role`, strongest first, at most kMaxDrawnLinks each way.
function nodeLinks(g, d, i) {
  const ks = [];
  for (const list of [g.incoming[i], g.outgoing[i]]) {
    let drawn = 0;
    for (const k of list) {
      if (drawn >= kMaxDrawnLinks) break;
      if (linkShown(g, d.shown, k, d.edgeThreshold)) { ks.push(k); ++drawn; }
    }
  }
  return ks;
}

const built = new WeakMap();  // box -> {graph, shown, svg, layout, rows, focusSeq}

// data: {graph (graph.js's), shown (its Uint8Array), edgeThreshold, paths (strongestPaths),
//        logit, current, pinned, hover (node indices or -1), focusSeq (a new one moves keyboard
//        focus to the current node), picked (Uint8Array over the nodes: picked for a group),
//        label (the SVG's accessible name)}
export function render(box, d) {
  if (!d.graph) {
    box.replaceChildren();
    built.delete(box);
    return;
  }
  let b = built.get(box);
  const hadFocus = box.contains(document.activeElement);
  // The nodes are built once per graph and node threshold; pins, hovers, paths and the edge
  // threshold only redraw the links and marks (a hover must not rebuild a thousand nodes).
  if (!b || b.graph !== d.graph || b.shown !== d.shown) {
    const rows = rowsOf(d.graph, d.shown);
    const lay = layout(d.graph, rows);
    const svg = el('svg', {width: lay.width + 8, height: lay.height, viewBox: `0 0 ${lay.width + 8} ${lay.height}`,
                           role: 'group', class: 'graph-svg'});
    const nodes = el('g', {class: 'graph-nodes'});
    for (const row of rows) for (const n of row) nodes.append(drawNode(d.graph, n, lay.at.get(n.index)));
    const links = el('g', {class: 'graph-links'});
    svg.append(drawAxes(d.graph, rows, lay), links, nodes);
    box.replaceChildren(svg);
    b = {graph: d.graph, shown: d.shown, svg, links, nodes, layout: lay, rows, focusSeq: d.focusSeq};
    built.set(box, b);
  }
  b.svg.setAttribute('aria-label', d.label);
  drawLinks(b, d);
  markNodes(b, d);
  const focusAsked = b.focusSeq !== d.focusSeq;
  b.focusSeq = d.focusSeq;
  const stop = b.nodes.querySelector('[tabindex="0"]');
  if (stop && (focusAsked || (hadFocus && !box.contains(document.activeElement)))) {
    stop.focus();
    // Bring the focused node into the scrolling box, not the page.
    stop.scrollIntoView?.({block: 'nearest', inline: 'nearest'});
  }
}

function drawLinks(b, d) {
  const g = d.graph;
  const drawn = [];
  for (const p of d.paths) for (const k of p.links) drawn.push([k, 'path']);
  if (d.pinned >= 0 && d.shown[d.pinned]) for (const k of nodeLinks(g, d, d.pinned)) drawn.push([k, 'pinned']);
  const transient = d.hover >= 0 ? d.hover : d.current;
  if (transient >= 0 && transient !== d.pinned && d.shown[transient]) {
    for (const k of nodeLinks(g, d, transient)) drawn.push([k, 'hover']);
  }
  // The strongest links last, so they lie on top of the faint ones.
  const order = {path: 0, hover: 1, pinned: 2};
  drawn.sort((x, y) => order[x[1]] - order[y[1]] || Math.abs(g.links[x[0]].weight) - Math.abs(g.links[y[0]].weight));
  b.links.replaceChildren(...drawn.map(([k, role]) => drawLink(g, k, b.layout, role)));
}

function markNodes(b, d) {
  const onPath = new Set(d.paths.flatMap((p) => p.nodes));
  const stopIndex = d.current >= 0 && d.shown[d.current] ? d.current : d.logit >= 0 ? d.logit : b.rows.flat()[0]?.index;
  for (const node of b.nodes.children) {
    const i = Number(node.dataset.index);
    node.setAttribute('tabindex', i === stopIndex ? 0 : -1);
    node.setAttribute('aria-pressed', i === d.pinned ? 'true' : 'false');
    node.classList.toggle('on-path', onPath.has(i));
    node.classList.toggle('chosen-logit', i === d.logit);
    node.classList.toggle('current', i === d.current);
    node.classList.toggle('picked', !!d.picked?.[i]);
    node.setAttribute('data-picked', d.picked?.[i] ? 'true' : 'false');
  }
}

// A link of node i in words: its weight and the node at its other end.
function linkText(g, k, i) {
  const l = g.links[k], other = l.source === i ? l.target : l.source;
  return `${l.weight >= 0 ? '+' : ''}${fmt(l.weight, 4)} ${l.source === i ? 'to' : 'from'} ${describeNode(g, other)}`;
}

const kDetailLinks = 5;

function linkList(g, d, i, list, words) {
  const shown = list.filter((k) => linkShown(g, d.shown, k, d.edgeThreshold));
  const h = document.createElement('p');
  h.className = 'graph-details-head';
  h.textContent = shown.length ? `${words}: the strongest ${Math.min(kDetailLinks, shown.length)} of ${shown.length} shown` +
      (shown.length < list.length ? ` (${list.length} in the file)` : '') : `${words}: none shown (${list.length} in the file)`;
  const ol = document.createElement('ol');
  ol.replaceChildren(...shown.slice(0, kDetailLinks).map((k) => {
    const li = document.createElement('li');
    li.textContent = linkText(g, k, i);
    return li;
  }));
  return [h, ol];
}

// The current node's numbers. data: {graph (groupedGraph's), groups, shown, edgeThreshold, current, pinned}
export function renderDetails(box, d) {
  const g = d.graph, i = d.current;
  if (!g || i < 0) {
    box.textContent = g ? 'Focus or click a node (Tab into the graph, then the arrow keys) to read its numbers.' : '';
    return;
  }
  const n = g.nodes[i];
  const title = document.createElement('p');
  title.className = 'graph-details-title';
  title.textContent = describeNode(g, i) + (i === d.pinned ? ' (pinned)' : '') + (d.shown[i] ? '' : ' (hidden by the node threshold)');
  const nums = document.createElement('p');
  const parts = [`node ${n.id}`];
  if (n.activation !== null) parts.push(`activation ${fmt(n.activation, 5)}`);
  if (n.influence !== null) parts.push(`influence ${fmt(n.influence, 4)} (cumulative: the share of all influence on the logits held by the nodes at least this influential)`);
  if (n.kind === Kind.logit && n.tokenProb !== null) parts.push(`probability ${fmt(n.tokenProb, 4)}`);
  if (n.kind !== Kind.supernode && n.group >= 0) parts.push(`in the open group “${d.groups[n.group].name}”`);
  nums.textContent = parts.join(' · ');
  const members = [];
  if (n.kind === Kind.supernode) {
    const h = document.createElement('p');
    h.className = 'graph-details-head';
    h.textContent = 'Its members (its links are the sums of theirs, in and out, without the links between them):';
    const ul = document.createElement('ul');
    ul.replaceChildren(...n.members.map((m) => {
      const li = document.createElement('li');
      li.textContent = `${g.parsed.nodes[m].id}: ${describeNode(g.parsed, m)}`;
      return li;
    }));
    members.push(h, ul);
  }
  box.replaceChildren(title, nums, ...members, ...linkList(g, d, i, g.incoming[i], 'Incoming'),
                      ...linkList(g, d, i, g.outgoing[i], 'Outgoing'));
}

// The groups as a list, each with its buttons. data: {graph (the parsed graph), groups
// ([{name, members}]), open (booleans)}
export function renderGroups(box, d) {
  if (!d.graph || !d.groups.length) {
    box.replaceChildren();
    return;
  }
  box.replaceChildren(...d.groups.map((group, k) => {
    const li = document.createElement('li');
    li.setAttribute('data-testid', 'graph-group');
    li.dataset.group = k;
    const features = group.members.filter((i) => d.graph.nodes[i].kind === Kind.feature).length;
    const words = document.createElement('span');
    words.textContent = `“${group.name}”: ${group.members.length} node${group.members.length === 1 ? '' : 's'} ` +
        `(${features} feature${features === 1 ? '' : 's'}), ${d.open[k] ? 'drawn one by one' : 'drawn as one node'}. `;
    const button = (testid, action, text) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary';
      b.setAttribute('data-testid', testid);
      b.dataset.groupAction = action;
      b.dataset.group = k;
      b.textContent = text;
      b.setAttribute('aria-label', `${text} “${group.name}”`);
      return b;
    };
    li.append(words, button('graph-group-toggle', 'toggle', d.open[k] ? 'Close' : 'Open'), ' ',
              button('graph-group-remove', 'remove', 'Ungroup'));
    return li;
  }));
}

// The strongest paths in words. data: {graph, paths, logit}
export function renderPaths(box, d) {
  const g = d.graph;
  if (!g) { box.replaceChildren(); return; }
  if (d.logit < 0) { box.textContent = 'The graph has no logit node to trace paths to.'; return; }
  const head = document.createElement('p');
  head.textContent = d.paths.length ? `Strongest paths from the prompt to ${describeNode(g, d.logit)} ` +
      '(strength: the product of each link’s share of its target’s input):' :
      `No path from the prompt to ${describeNode(g, d.logit)} through the links shown.`;
  const ol = document.createElement('ol');
  ol.replaceChildren(...d.paths.map((p) => {
    const li = document.createElement('li');
    li.textContent = `${fmt(p.strength, 3)}: ` + p.nodes.map((i) => describeNode(g, i)).join(' → ');
    return li;
  }));
  box.replaceChildren(head, ol);
}
