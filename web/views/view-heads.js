// "What each head does": head detection scores (src/lab/head_scores.h, `gpt2 heads`) as a grid of
// blocks x heads, each cell a button that opens the head's attention on the repeated sequence.
// A cell names a kind where one score stands out (headKind); its full scores are in its title.
//   data-testid="heads-grid"      the grid (data-rows, data-cols, data-repeat)
//   data-testid="heads-cell-L-H"  block L, head H: data-prev, data-dup, data-induction, data-kind
//   data-testid="heads-status"    what was scored, or the job running
import {fmt} from './viz.js';

// A head gets a kind when a score reaches this: on average at least 40 % of its attention goes to
// that one key of the p + 1 it may see. Evenly spread attention gives the previous token 0.042 and
// the duplicate or induction target 0.014 on 50 repeated ids, so 0.4 is 10x and ~30x those: a head
// there attends to that key on purpose, not by being diffuse. The kind is the highest such score.
export const kKindThreshold = 0.4;

export const kKinds = Object.freeze({
  prev: {letter: 'P', color: [31, 119, 180], words: 'previous-token head'},
  dup: {letter: 'D', color: [44, 160, 44], words: 'duplicate-token head'},
  induction: {letter: 'I', color: [230, 110, 10], words: 'induction head'},
});

// 'prev' | 'dup' | 'induction' | '' for one head's scores.
export function headKind(prev, dup, induction) {
  let kind = '', best = kKindThreshold;
  for (const [k, v] of [['prev', prev], ['dup', dup], ['induction', induction]]) {
    if (v >= best) { kind = k; best = v; }
  }
  return kind;
}

// data: {heads: {running, result (the worker's 'heads' reply)}, layer, head (the chosen head),
//        status (element)}
export function render(box, d) {
  const {running, result} = d.heads;
  d.status.textContent = running ? 'Scoring every head on the repeated sequence…' : result ?
      `${result.repeat} ids repeated (${2 * result.repeat + 1} positions with <|endoftext|>), ` +
      `scored in ${Math.round(result.ms)} ms. Evenly spread attention would score ${fmt(result.uniform.prev, 3)} ` +
      `(previous token) and ${fmt(result.uniform.induction, 3)} (duplicate, induction); a kind is named from ` +
      `${kKindThreshold}. Click a head to open its attention on the sequence.` : '';
  if (!result) {
    box.replaceChildren();
    built.delete(box);
    return;
  }
  // The grid is built once per result; choosing a head only moves the pressed mark (at GPT-2 XL a
  // rebuild is 1,200 buttons on every head clicked anywhere on the page).
  if (built.get(box) !== result) {
    build(box, result);
    built.set(box, result);
  }
  box.querySelector('.head-cell[aria-pressed="true"]')?.setAttribute('aria-pressed', 'false');
  box.querySelector(`.head-cell[data-layer="${d.layer}"][data-head="${d.head}"]`)?.setAttribute('aria-pressed', 'true');
}

const built = new WeakMap();  // box -> the result its grid shows

function build(box, result) {
  const L = result.nLayer, H = result.nHead;
  const grid = document.createElement('div');
  grid.className = 'heads-grid';
  grid.setAttribute('data-testid', 'heads-grid');
  grid.setAttribute('role', 'grid');
  grid.dataset.rows = L;
  grid.dataset.cols = H;
  grid.dataset.repeat = result.repeat;
  grid.style.gridTemplateColumns = `5em repeat(${H}, 4.2em)`;
  grid.append(document.createElement('span'));
  for (let h = 0; h < H; ++h) {
    const c = document.createElement('span');
    c.className = 'heads-label';
    c.textContent = `head ${h}`;
    grid.append(c);
  }
  for (let l = 0; l < L; ++l) {
    const r = document.createElement('span');
    r.className = 'heads-label';
    r.textContent = `block ${l}`;
    grid.append(r);
    for (let h = 0; h < H; ++h) {
      const i = l * H + h;
      const prev = result.prev[i], dup = result.dup[i], induction = result.induction[i];
      const kind = headKind(prev, dup, induction);
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'head-cell';
      b.setAttribute('data-testid', `heads-cell-${l}-${h}`);
      Object.assign(b.dataset, {layer: l, head: h, prev, dup, induction, kind});
      const score = kind ? result[kind][i] : Math.max(prev, dup, induction);
      const [cr, cg, cb] = kind ? kKinds[kind].color : [120, 120, 120];
      b.style.background = `rgba(${cr}, ${cg}, ${cb}, ${kind ? 0.3 + 0.7 * Math.min(1, score) : 0.08 + 0.3 * Math.min(1, score)})`;
      b.style.color = kind && score > 0.6 ? '#fff' : '';
      b.textContent = kind ? `${kKinds[kind].letter} ${fmt(score, 2)}` : fmt(score, 2);
      b.title = `Block ${l}, head ${h}${kind ? `: ${kKinds[kind].words}` : ''}. previous token ${fmt(prev, 3)}, ` +
          `duplicate ${fmt(dup, 3)}, induction ${fmt(induction, 3)}`;
      b.setAttribute('aria-pressed', 'false');
      grid.append(b);
    }
  }
  const legend = document.createElement('p');
  legend.className = 'hint';
  legend.textContent = Object.values(kKinds).map((k) => `${k.letter}: ${k.words}`).join(' · ') +
      ' · no letter: no score reaches the threshold (the number is the highest).';
  box.replaceChildren(grid, legend);
}
