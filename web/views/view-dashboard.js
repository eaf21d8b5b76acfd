// One feature's dashboard, as Neuronpedia shows it (shared/dashboard.js's shape, computed by the
// worker or read from a file): what it promotes and suppresses, how often it fires and the
// histogram of its nonzero activations, its top windows with every token shaded by its activation,
// then windows drawn from equal-width bands of their maximum (SAEDashboard's "quantiles").
//   data-testid="dashboard"           data-layer, data-index, data-max (maxActApprox)
//   data-testid="dashboard-pos" / "dashboard-neg"   the logit tables, a row per token (data-value)
//   data-testid="dashboard-hist"      the histogram, a bar per bin (data-centre, data-height)
//   data-testid="dashboard-top"       the top windows; each data-testid="dashboard-window"
//                                     (data-data-index, data-max), its tokens data-value
//   data-testid="dashboard-band"      a band (data-min, data-max, data-contains) and its windows
import {splitWindows} from '../shared/dashboard.js';
import {el, fmt, showPiece} from './viz.js';

// Shading: white at 0 to the diverging map's orange at the feature's largest activation, so a
// window's text stays readable (Neuronpedia's look).
const shade = (t) => `rgba(230, 97, 1, ${Math.max(0, Math.min(1, t)).toFixed(3)})`;

function logitTable(testid, caption, tokens, values) {
  const t = el('table', 'dashboard-logits');
  t.setAttribute('data-testid', testid);
  t.append(el('caption', 'hint', caption));
  const body = el('tbody');
  tokens.forEach((s, i) => {
    const tr = el('tr');
    tr.dataset.value = values[i];
    tr.append(el('td', 'tok', showPiece(s)), el('td', 'num', fmt(values[i], 3)));
    body.append(tr);
  });
  t.append(body);
  return t;
}

function histogram(f) {
  const box = el('div', 'dashboard-hist');
  box.setAttribute('data-testid', 'dashboard-hist');
  box.setAttribute('role', 'img');
  const heights = f.freq_hist_data_bar_heights;
  const top = Math.max(1, ...heights);
  box.setAttribute('aria-label', `Histogram of the nonzero activations over (0, ${fmt(f.maxActApprox, 3)}], ` +
      `${heights.length} bins, the tallest ${top}`);
  heights.forEach((h, i) => {
    const bar = el('span', 'dashboard-bar');
    bar.dataset.centre = f.freq_hist_data_bar_values[i];
    bar.dataset.height = h;
    bar.style.height = `${(h / top) * 100}%`;
    bar.title = `around ${fmt(f.freq_hist_data_bar_values[i], 3)}: ${h}`;
    box.append(bar);
  });
  return box;
}

// One window: its tokens as running text, each shaded by its activation over the feature's max.
function windowLine(w, max, onWindow) {
  const p = el('p', 'dashboard-window');
  p.setAttribute('data-testid', 'dashboard-window');
  p.dataset.dataIndex = w.dataIndex;
  p.dataset.max = w.maxValue;
  const head = el('span', 'dashboard-window-max num', fmt(w.maxValue, 3));
  head.title = `window ${w.dataIndex}: largest activation ${fmt(w.maxValue)}`;
  p.append(head);
  w.tokens.forEach((s, i) => {
    const v = w.values[i];
    const span = el('span', `dashboard-token${i === w.maxValueTokenIndex ? ' top' : ''}`, showPiece(s));
    span.dataset.value = v;
    if (v > 0) span.style.background = shade(v / max);
    span.title = `${showPiece(s)}: ${fmt(v)}`;
    p.append(span);
  });
  if (onWindow) {
    p.tabIndex = 0;
    p.addEventListener('click', () => onWindow(w));
  }
  return p;
}

// data: {feature (shared/dashboard.js's), label (a loaded label, or ''), source (where it came from,
// in words), onWindow (optional: a window clicked)}
export function render(box, d) {
  const f = d.feature;
  if (!f) {
    box.replaceChildren(el('p', 'hint', 'Pick a feature, or compute or open dashboards, to see what it reads.'));
    return;
  }
  const root = el('div', 'dashboard');
  root.setAttribute('data-testid', 'dashboard');
  root.dataset.layer = f.layer;
  root.dataset.index = f.index;
  root.dataset.max = f.maxActApprox;
  const label = d.label || f.label;
  const title = el('h4', '', `Block ${f.layer}, feature #${f.index}${label ? `: ${label}` : ''}`);
  const fires = Number.isFinite(f.frac_nonzero) ?
      `fires on ${(f.frac_nonzero * 100).toPrecision(3)}% of the tokens` : 'how often it fires is not in the file';
  const summary = el('p', 'hint', `${fires}; largest activation ${fmt(f.maxActApprox, 4)}` +
      `${d.source ? ` (${d.source})` : ''}.`);
  const {top, bands} = splitWindows(f);
  const max = f.maxActApprox > 0 ? f.maxActApprox : 1;
  const logits = el('div', 'dashboard-logit-pair');
  logits.append(logitTable('dashboard-pos', 'Promotes (decoder · W_U)', f.pos_str, f.pos_values),
                logitTable('dashboard-neg', 'Suppresses', f.neg_str, f.neg_values));
  const topBox = el('section', 'dashboard-top');
  topBox.setAttribute('data-testid', 'dashboard-top');
  topBox.append(el('h5', '', top.length ? `Top ${top.length} windows` : 'It never fires on this corpus.'),
                ...top.map((w) => windowLine(w, max, d.onWindow)));
  const bandBoxes = [...bands].reverse().map((b) => {
    const s = el('section', 'dashboard-band');
    s.setAttribute('data-testid', 'dashboard-band');
    s.dataset.min = b.min;
    s.dataset.max = b.max;
    s.dataset.contains = b.contains;
    s.append(el('h5', '', `Maximum in (${fmt(b.min, 3)}, ${fmt(b.max, 3)}]: ` +
        `${b.windows.length} of ${b.contains} windows`), ...b.windows.map((w) => windowLine(w, max, d.onWindow)));
    return s;
  });
  const parts = [title, summary, logits];
  if (f.freq_hist_data_bar_heights.length) parts.push(histogram(f));
  root.append(...parts, topBox, ...bandBoxes);
  box.replaceChildren(root);
}
