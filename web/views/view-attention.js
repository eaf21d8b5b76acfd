// Attention: the grid of every block x head strip for the picked token, and one head's full
// map. A knocked-out head (experiments) is struck through in the grid.
import {Heatmap, fmt, pieceAt, pixelImage, showPiece, viridis} from './viz.js';
import {renderChips} from './view-saliency.js';

// The grid's cells as last built: {from (the data they were drawn from), shape ("L x H"), cells:
// [{el, strip, l, h, words, ...the state written last}], canvas, image (the strips, a row a cell),
// rects (each strip's place on the canvas)}.
const grids = new WeakMap();

// data: {attention: [L] Float32Array [H, p + 1], position, nLayer, nHead, layer, head, pieces,
// ids, ablated: "l.h,l.h,...", knockMode}. The cells are made once per model shape; a new token
// only redraws the strips (grid.dataset.position: the token drawn). Choosing a head or knocking
// one out only marks the cells.
export function render(grid, d) {
  let built = grids.get(grid);
  const shape = `${d.nLayer}x${d.nHead}`;
  if (!built || built.shape !== shape) built = build(grid, d, shape);
  const dataChanged = !['attention', 'position', 'pieces', 'ids'].every((k) => built.from[k] === d[k]);
  if (dataChanged) {
    built.image = describe(built.cells, d);
    grid.dataset.position = d.position;
  }
  const ablatedChanged = built.from.ablated !== d.ablated;
  built.from = d;
  built.ablated = new Set(d.ablated ? d.ablated.split(',') : []);
  if (dataChanged || ablatedChanged) paint(grid, built);
  grid.classList.toggle('knock-mode', !!d.knockMode);
  // Only the cells whose state changed are written: rewriting every cell's classes and labels
  // made the browser restyle the whole grid on each click.
  for (const cell of built.cells) {
    const {el, l, h, words} = cell;
    const knocked = built.ablated.has(`${l}.${h}`);
    const chosen = l === d.layer && h === d.head;
    const text = words + (knocked ? ' (knocked out)' : '') +
        (d.knockMode ? `. Click to ${knocked ? 'restore' : 'knock out'} this head.` : '');
    const pressed = d.knockMode ? String(knocked) : 'false';
    if (cell.chosen !== chosen) el.classList.toggle('chosen', chosen);
    if (cell.knocked !== knocked) {
      el.classList.toggle('knocked-out', knocked);
      if (knocked) el.dataset.knockedOut = 'true';
      else delete el.dataset.knockedOut;
    }
    if (cell.text !== text) {
      el.title = text;
      el.setAttribute('aria-label', text);
    }
    if (cell.pressed !== pressed) el.setAttribute('aria-pressed', pressed);
    Object.assign(cell, {chosen, knocked, text, pressed});
  }
}

function build(grid, d, shape) {
  const {nLayer: L, nHead: H} = d;
  grid.style.setProperty('--heads', H);
  // Every strip is drawn on one canvas behind the cells. Strips as canvases of their own made
  // 1,200 compositor layers at GPT-2 XL, and as CSS gradients 1,200 gradients to repaint on every
  // frame that touched the grid; one canvas is one layer and one bitmap.
  const canvas = document.createElement('canvas');
  canvas.className = 'attn-canvas';
  canvas.setAttribute('aria-hidden', 'true');
  const children = [canvas], cells = [];
  const corner = document.createElement('div');
  corner.className = 'corner';
  children.push(corner);
  for (let h = 0; h < H; ++h) {
    const el = document.createElement('div');
    el.className = 'col-label';
    el.textContent = `h${h}`;
    children.push(el);
  }
  for (let l = 0; l < L; ++l) {
    const label = document.createElement('div');
    label.className = 'row-label';
    label.textContent = `block ${l}`;
    children.push(label);
    for (let h = 0; h < H; ++h) {
      const cell = document.createElement('button');
      cell.type = 'button';
      cell.className = 'attn-cell';
      cell.dataset.layer = l;
      cell.dataset.head = h;
      const strip = document.createElement('span');  // holds the strip's place on the canvas
      strip.className = 'strip';
      cell.append(strip);
      children.push(cell);
      cells.push({el: cell, strip, l, h, words: ''});
    }
  }
  grid.replaceChildren(...children);
  grids.get(grid)?.observer.disconnect();
  const built = {shape, from: {}, cells, canvas, rects: null, image: null};
  // The strips' places change with the grid's width (its columns stretch) and when it is first
  // shown; the canvas is measured and repainted then, not on every token.
  built.observer = new ResizeObserver(() => {
    built.rects = null;
    paint(grid, built);
  });
  built.observer.observe(grid);
  built.observer.observe(cells[0].el);
  grids.set(grid, built);
  return built;
}

// Each cell's strip: the head's attention from the picked token to every position so far, one
// segment per position up to kSegments (beyond, a segment shows the largest weight it covers).
// Returns the strips as an image, a row of pixels per cell; sets what each cell says.
const kSegments = 96;
function describe(cells, d) {
  const p = d.position, n = p + 1;
  const S = Math.min(n, kSegments);
  const edges = Array.from({length: S + 1}, (_, j) => Math.floor((j * n) / S));
  const values = new Float32Array(S * cells.length);
  cells.forEach((cell, i) => {
    const {l, h} = cell;
    const row = d.attention[l].subarray(h * n, (h + 1) * n);
    let best = 0;
    for (let k = 1; k <= p; ++k) if (row[k] > row[best]) best = k;
    for (let j = 0; j < S; ++j) {
      let v = row[edges[j]];
      for (let k = edges[j] + 1; k < edges[j + 1]; ++k) v = Math.max(v, row[k]);
      values[i * S + j] = v;
    }
    cell.words = `block ${l}, head ${h}: attends most to ${pieceAt(d.pieces, d.ids, best)} ` +
                 `(position ${best}) with ${fmt(row[best], 3)}`;
  });
  return pixelImage(S, cells.length, (i) => viridis(values[i]));  // probabilities: absolute scale 0..1
}

function paint(grid, built) {
  const {canvas, cells, image} = built;
  if (!image) return;
  if (!built.rects) {
    // The canvas must not hold the grid wider than its cells while they are measured.
    canvas.style.width = canvas.style.height = '0';
    const g = grid.getBoundingClientRect();
    const x0 = g.left + grid.clientLeft - grid.scrollLeft, y0 = g.top + grid.clientTop - grid.scrollTop;
    built.rects = cells.map(({strip}) => {
      const r = strip.getBoundingClientRect();
      return [r.left - x0, r.top - y0, r.width, r.height];
    });
    const scale = window.devicePixelRatio || 1;
    canvas.style.width = `${grid.scrollWidth}px`;
    canvas.style.height = `${grid.scrollHeight}px`;
    canvas.width = Math.round(grid.scrollWidth * scale);
    canvas.height = Math.round(grid.scrollHeight * scale);
    built.scale = scale;
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(built.scale, 0, 0, built.scale, 0, 0);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.imageSmoothingEnabled = false;
  cells.forEach(({l, h}, i) => {
    const [x, y, w, hgt] = built.rects[i];
    ctx.globalAlpha = built.ablated.has(`${l}.${h}`) ? 0.55 : 1;  // as a knocked-out cell's opacity
    ctx.drawImage(image, 0, i, image.width, 1, x, y, w, hgt);
  });
  ctx.globalAlpha = 1;
}

const maps = new WeakMap();  // canvas -> its Heatmap

// One head's [P, P] map. data: {map: {layer, head, positions, map}, picked, pieces, ids,
// readout, title, onPick}
export function renderHead(canvas, d) {
  let heat = maps.get(canvas);
  if (!heat) {
    heat = new Heatmap(canvas, d.readout, {onPick: (r, c) => heat.pickHandler?.(r, c)});
    maps.set(canvas, heat);
  }
  heat.pickHandler = d.onPick;
  const {layer, head, positions: P, map} = d.map;
  d.title.textContent = `Block ${layer}, head ${head}: attention of every token (rows) to earlier tokens (columns)`;
  const size = Math.max(160, Math.min(480, P * 24));
  canvas.width = size + 64;
  canvas.height = size;
  const label = (i) => pieceAt(d.pieces, d.ids, i);
  heat.set({
    rows: P, cols: P, values: map, min: 0, max: 1,
    rowLabels: Array.from({length: P}, (_, i) => showPiece(d.pieces[i] ?? `#${d.ids[i]}`).slice(0, 8)),
    highlightRow: d.picked,
    cursor: d.picked >= 0 ? [d.picked, 0] : undefined,
    describe: (r, c, v) => Number.isNaN(v) ? `${label(r)} (position ${r}) cannot see position ${c} (later token)` :
        `${label(r)} (position ${r}) → ${label(c)} (position ${c}): ${fmt(v)}`,
  });
}

// "Why this head attends here": the worker's 'score-saliency' reply, each token coloured by its
// gradient x input to the head's attention score from the query to the key (as the saliency
// view colours them). data: {why, pieces, ids, summary, readout}
export function renderWhy(box, d) {
  const w = d.why;
  renderChips(box, w.values, d.pieces, d.readout);
  d.summary.textContent = `Why block ${w.layer}, head ${w.head} attends from ${pieceAt(d.pieces, d.ids, w.query)} ` +
      `(position ${w.query}) to ${pieceAt(d.pieces, d.ids, w.key)} (position ${w.key}): each token's ` +
      `gradient × input (its embedding plus position, times the gradient) of the attention score, the scaled ` +
      `q·k before the softmax, ${fmt(w.score)}. Orange raises the score, blue lowers it; tokens after the ` +
      `query cannot reach it. Total ${fmt(w.total)}.` +
      (w.layer === 0 ? ' In block 0 a token reaches the score only through ln_1, which ignores how large its ' +
                       'input is, so these values stay near zero: compare them with a later block\'s.' : '');
}
