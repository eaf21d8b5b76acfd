// Drawing helpers for the page: a colour-blind-safe colour map and an interactive heat map
// (hover shows the value, arrow keys move a cursor whose value is read out for screen readers),
// and numbers, sizes and progress in words.
import {Phase} from '../shared/protocol.js';

// An element with a class and text (either may be left out).
export const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// A table: a caption, one column header per name, then the rows (tr elements).
export function table(t, caption, head, rows) {
  const tr = el('tr');
  for (const h of head) {
    const th = el('th', '', h);
    th.scope = 'col';
    tr.append(th);
  }
  t.replaceChildren(el('caption', 'hint', caption), el('thead'), el('tbody'));
  t.tHead.append(tr);
  t.tBodies[0].append(...rows);
  return t;
}

// Viridis (matplotlib's default, designed by van der Walt and Smith to be perceptually uniform
// and readable with colour-vision deficiencies and in greyscale): 9 samples of the official
// table, linearly interpolated.
const kViridis = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

export function viridis(t) {
  if (!(t >= 0)) t = 0;  // also NaN
  if (t > 1) t = 1;
  const x = t * (kViridis.length - 1);
  const i = Math.min(kViridis.length - 2, Math.floor(x));
  const f = x - i;
  const a = kViridis[i], b = kViridis[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

export function viridisCss(t) {
  const [r, g, b] = viridis(t);
  return `rgb(${r},${g},${b})`;
}

// Text colour that stays readable on a viridis background: black or white, whichever contrasts
// more (WCAG 2's relative luminance; viridis keeps the better one at 4.5:1 or more everywhere).
export function textOn(t) {
  const linear = (c) => (c <= 10.31 ? c / 3294.6 : ((c / 255 + 0.055) / 1.055) ** 2.4);
  const [r, g, b] = viridis(t).map(linear);
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) ? '#000' : '#fff';
}

// A diverging map for signed values, zero white: blue below, orange above (PuOr's ends, readable
// with the common colour-vision deficiencies). t in [-1, 1].
export function diverging(t) {
  if (!(t === t)) t = 0;  // NaN
  const x = Math.max(-1, Math.min(1, t));
  const end = x < 0 ? [59, 82, 139] : [230, 97, 1];
  const a = Math.abs(x);
  return end.map((c) => Math.round(255 + (c - 255) * a));
}

export function divergingCss(t) {
  const [r, g, b] = diverging(t);
  return `rgb(${r},${g},${b})`;
}

// An image of width x height pixels, pixel i coloured rgb(i) ([r, g, b]): what a heat map or a
// strip of cells draws scaled up with smoothing off, one draw instead of a fillRect per cell (each
// with a colour string to parse: tens of ms a frame on GPT-2 XL's maps).
export function pixelImage(width, height, rgb) {
  const image = new ImageData(width, height);
  for (let i = 0; i < width * height; ++i) {
    const [r, g, b] = rgb(i);
    image.data[4 * i] = r;
    image.data[4 * i + 1] = g;
    image.data[4 * i + 2] = b;
    image.data[4 * i + 3] = 255;
  }
  const canvas = new OffscreenCanvas(width, height);
  canvas.getContext('2d').putImageData(image, 0, 0);
  return canvas;
}

export function drawLegend(canvas) {
  const ctx = canvas.getContext('2d');
  for (let x = 0; x < canvas.width; ++x) {
    ctx.fillStyle = viridisCss(x / (canvas.width - 1));
    ctx.fillRect(x, 0, 1, canvas.height);
  }
}

// A size for the page's text: kB below 1 MiB, else MiB with one decimal (written "MB").
export const mb = (bytes) => (bytes < 1 << 20 ? `${Math.ceil(bytes / 1024)} kB` : `${(bytes / (1024 * 1024)).toFixed(1)} MB`);

// A 'progress' message (protocol.js) in words: {pct, text}; verbs: what each phase is doing.
export function progressWords({phase, loaded, total}, verbs) {
  const pct = total ? Math.floor((loaded / total) * 100) : 0;
  const verb = verbs[phase] || phase;
  const amount = phase === Phase.convert ? `${loaded} of ${total} tensors` : `${mb(loaded)} of ${mb(total)}`;
  return {pct, text: phase === Phase.parse || !total ? `${verb}…` : `${verb}: ${amount} (${pct}%)`};
}

export function fmt(v, digits = 4) {
  if (v === undefined || v === null || Number.isNaN(v)) return '–';
  if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5)) return v.toExponential(2);
  return Number(v.toPrecision(digits)).toString();
}

// An interactive heat map on a canvas. values: Float32Array/array [rows * cols], NaN = empty
// cell (drawn grey). describe(r, c, v) gives the readout text. Colours scale from `min` to `max`
// (defaults: the data's range).
const heatmaps = new WeakMap();  // canvas -> its Heatmap, for export
export const heatmapOf = (canvas) => heatmaps.get(canvas);

export class Heatmap {
  constructor(canvas, readout, {onPick} = {}) {
    heatmaps.set(canvas, this);
    this.canvas = canvas;
    this.readout = readout;
    this.onPick = onPick;
    this.rows = 0;
    this.cols = 0;
    this.cursor = [0, 0];
    this.highlightRow = -1;
    canvas.addEventListener('mousemove', (e) => {
      const cell = this.cellAt(e);
      if (cell) this.show(cell[0], cell[1], false);
    });
    canvas.addEventListener('mouseleave', () => this.show(this.cursor[0], this.cursor[1], false));
    canvas.addEventListener('click', (e) => {
      const cell = this.cellAt(e);
      if (!cell) return;
      this.cursor = cell;
      this.draw();
      this.show(cell[0], cell[1], true);
      this.onPick?.(cell[0], cell[1]);
    });
    canvas.addEventListener('focus', () => this.show(this.cursor[0], this.cursor[1], true));
    canvas.addEventListener('keydown', (e) => {
      if (!this.rows) return;
      let [r, c] = this.cursor;
      const step = e.shiftKey ? 10 : 1;
      if (e.key === 'ArrowUp') r -= step;
      else if (e.key === 'ArrowDown') r += step;
      else if (e.key === 'ArrowLeft') c -= step;
      else if (e.key === 'ArrowRight') c += step;
      else if (e.key === 'Home') c = 0;
      else if (e.key === 'End') c = this.cols - 1;
      else if (e.key === 'Enter' || e.key === ' ') { this.onPick?.(r, c); e.preventDefault(); return; }
      else return;
      e.preventDefault();
      this.cursor = [Math.max(0, Math.min(this.rows - 1, r)), Math.max(0, Math.min(this.cols - 1, c))];
      this.draw();
      this.show(this.cursor[0], this.cursor[1], true);
    });
  }

  // diverging: colour signed values with divergingCss, zero white, scaled by the largest |value|.
  set({rows, cols, values, describe, min, max, rowLabels, colLabels, highlightRow = -1, highlightCol = -1, cursor,
       diverging = false}) {
    this.diverging = diverging;
    this.rows = rows;
    this.cols = cols;
    this.values = values;
    this.describe = describe;
    this.rowLabels = rowLabels || [];
    this.colLabels = colLabels || [];
    this.highlightRow = highlightRow;
    this.highlightCol = highlightCol;
    let lo = Infinity, hi = -Infinity;
    for (const v of values) {
      if (Number.isNaN(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    this.min = min ?? (lo === Infinity ? 0 : lo);
    this.max = max ?? (hi === -Infinity ? 1 : hi);
    if (cursor) this.cursor = cursor;
    this.cursor = [Math.min(this.cursor[0], rows - 1), Math.min(this.cursor[1], cols - 1)].map((x) => Math.max(0, x));
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', `Heat map, ${rows} rows by ${cols} columns. Use the arrow keys to read values.`);
    this.canvas.dataset.rows = rows;
    this.canvas.dataset.cols = cols;
    this.draw();
    this.show(this.cursor[0], this.cursor[1], false);
  }

  layout() {
    const labelW = this.rowLabels.length ? 64 : 0;
    const w = this.canvas.width - labelW, h = this.canvas.height;
    return {labelW, cw: w / Math.max(1, this.cols), ch: h / Math.max(1, this.rows)};
  }

  cellAt(e) {
    if (!this.rows) return null;
    const rect = this.canvas.getBoundingClientRect();
    const x = (e.clientX - rect.left) * (this.canvas.width / rect.width);
    const y = (e.clientY - rect.top) * (this.canvas.height / rect.height);
    const {labelW, cw, ch} = this.layout();
    const c = Math.floor((x - labelW) / cw), r = Math.floor(y / ch);
    if (r < 0 || c < 0 || r >= this.rows || c >= this.cols) return null;
    return [r, c];
  }

  draw() {
    const ctx = this.canvas.getContext('2d');
    const {labelW, cw, ch} = this.layout();
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    if (this.rows && this.cols) {
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(pixelImage(this.cols, this.rows, (i) => this.rgb(this.values[i])), labelW, 0, this.cols * cw, this.rows * ch);
    }
    if (labelW) {
      ctx.fillStyle = '#222';
      ctx.font = `${Math.min(12, Math.max(8, ch - 2))}px system-ui, sans-serif`;
      ctx.textBaseline = 'middle';
      const every = Math.ceil(10 / ch);
      for (let r = 0; r < this.rows; r += every) ctx.fillText(this.rowLabels[r] ?? '', 2, r * ch + ch / 2);
    }
    ctx.lineWidth = 2;
    if (this.highlightRow >= 0) {
      ctx.strokeStyle = '#ff6e00';
      ctx.strokeRect(labelW + 1, this.highlightRow * ch + 1, this.cols * cw - 2, ch - 2);
    }
    if (this.highlightCol >= 0) {
      ctx.strokeStyle = '#ff6e00';
      ctx.strokeRect(labelW + this.highlightCol * cw + 1, 1, Math.max(2, cw - 2), this.rows * ch - 2);
    }
    if (document.activeElement === this.canvas) {
      ctx.strokeStyle = '#d6006e';
      ctx.strokeRect(labelW + this.cursor[1] * cw + 1, this.cursor[0] * ch + 1, Math.max(2, cw - 2), Math.max(2, ch - 2));
    }
  }

  rgb(v) {
    const absMax = Math.max(Math.abs(this.min), Math.abs(this.max)) || 1;
    if (Number.isNaN(v)) return [228, 228, 228];
    return this.diverging ? diverging(v / absMax) : viridis((v - this.min) / (this.max - this.min || 1));
  }

  colour(v) {
    const [r, g, b] = this.rgb(v);
    return `rgb(${r},${g},${b})`;
  }

  // The same picture as vector graphics: one rect per cell (its value in a <title>), the labels.
  toSvg() {
    const {labelW, cw, ch} = this.layout();
    const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${this.canvas.width}" height="${this.canvas.height}" ` +
                   `viewBox="0 0 ${this.canvas.width} ${this.canvas.height}">`];
    for (let r = 0; r < this.rows; ++r) {
      if (labelW) {
        parts.push(`<text x="2" y="${(r + 0.5) * ch}" dominant-baseline="middle" font-size="${Math.min(12, Math.max(8, ch - 2))}" ` +
                   `font-family="system-ui, sans-serif">${esc(this.rowLabels[r] ?? '')}</text>`);
      }
      for (let c = 0; c < this.cols; ++c) {
        const v = this.values[r * this.cols + c];
        parts.push(`<rect x="${labelW + c * cw}" y="${r * ch}" width="${cw}" height="${ch}" fill="${this.colour(v)}">` +
                   `<title>${esc(this.describe ? this.describe(r, c, v) : fmt(v))}</title></rect>`);
      }
    }
    parts.push('</svg>');
    return parts.join('\n');
  }

  show(r, c, announce) {
    if (!this.rows || !this.readout) return;
    const v = this.values[r * this.cols + c];
    this.readout.textContent = this.describe ? this.describe(r, c, v) : `${r}, ${c}: ${fmt(v)}`;
    this.readout.dataset.row = r;
    this.readout.dataset.col = c;
    this.readout.dataset.value = Number.isNaN(v) ? '' : String(v);
  }
}

// A bar histogram on a canvas.
export function drawHistogram(canvas, counts, {lo, hi, label}) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height - 16;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  // Log scale: most neurons sit near 0, the interesting ones are a few large values.
  const maxLog = Math.log1p(Math.max(...counts));
  const bw = w / counts.length;
  counts.forEach((n, i) => {
    const bh = maxLog ? (Math.log1p(n) / maxLog) * h : 0;
    ctx.fillStyle = viridisCss(0.15 + 0.7 * (i / counts.length));
    ctx.fillRect(i * bw + 1, h - bh, bw - 2, bh);
  });
  ctx.fillStyle = '#222';
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'top';
  ctx.fillText(fmt(lo, 3), 2, h + 2);
  const hiText = fmt(hi, 3);
  ctx.fillText(hiText, w - ctx.measureText(hiText).width - 2, h + 2);
  if (label) ctx.fillText(label, w / 2 - ctx.measureText(label).width / 2, h + 2);
}

// How a token looks in a chip or a label: spaces and line breaks made visible.
export function showPiece(text) {
  if (text === undefined || text === null) return '';
  return text.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/ /g, '·') || '∅';
}

// A token at position i in words: its text in quotes, or its id while the text is unknown.
export function pieceAt(pieces, ids, i) {
  const s = pieces[i];
  return s === undefined || s === null ? `#${ids[i]}` : `“${showPiece(s)}”`;
}

// A ranked list of next tokens with bars (the probability panels and the experiment's before
// and after). items: [{id, prob, piece, mark}], mark: a class (e.g. 'actual').
export function probList(list, items, {title} = {}) {
  list.replaceChildren(...items.map(({id, prob, piece, mark, note}) => {
    const li = document.createElement('li');
    li.dataset.id = id;
    li.dataset.prob = prob;
    if (mark) li.classList.add(...mark.split(' ').filter(Boolean));
    const tok = document.createElement('span');
    tok.className = 'tok';
    tok.textContent = showPiece(piece);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${prob * 100}%`;
    bar.style.background = viridisCss(prob);
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = `${(prob * 100).toFixed(2)}%` + (note ? ` ${note}` : '');
    li.append(tok, bar, num);
    if (title) li.title = title(id);
    return li;
  }));
}
