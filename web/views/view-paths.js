// Path patching (src/lab/path_patch.h): every head as the sender, how much the metric moves when
// only its path to the receivers carries the corrupted run (m_patched - m_clean; orange raises
// the clean run's top token's logit, blue lowers it), as a blocks x heads grid of buttons; and
// for the clicked sender its strongest paths: of its paths to the logits and to each head of a
// later block (through the head's q, k and v), each measured alone, the largest, drawn on a
// diagram of the blocks (line width: the size of the effect).
import {divergingCss, fmt, showPiece} from './viz.js';

const kSvg = 'http://www.w3.org/2000/svg';

// data: {job: {running, done, total, result, sender, pathsRunning, pathsDone, pathsTotal, paths},
//        status, progress, diagram}
export function render(box, d) {
  const {running, done = 0, total = 0, result: r} = d.job;
  const {pathsRunning, pathsDone = 0, pathsTotal = 0} = d.job;
  d.progress.hidden = !running && !pathsRunning;
  d.progress.max = (running ? total : pathsTotal) || 1;
  d.progress.value = running ? done : pathsDone;
  d.status.textContent = !running ? '' : total ? `Patching sender ${Math.min(done + 1, total)} of ${total}…` : 'Running both prompts…';
  if (!r) {
    box.replaceChildren();
    d.diagram.replaceChildren();
    return;
  }
  if (!running) {
    d.status.textContent = `${r.cancelled ? `Cancelled after ${r.done} of ${r.total} senders. ` : ''}` +
        `Receivers: ${r.receivers}. Metric: the logit of “${showPiece(r.targetPiece)}” at the last token, ` +
        `clean ${fmt(r.clean)}, corrupted ${fmt(r.corrupt)}; each cell: patched − clean ` +
        `(${(r.ms / 1000).toFixed(1)} s). Click a sender for its paths.`;
  }
  let absMax = 1e-9;
  for (const v of r.values) if (!Number.isNaN(v)) absMax = Math.max(absMax, Math.abs(v));
  const table = document.createElement('table');
  table.className = 'path-grid';
  const head = table.createTHead().insertRow();
  head.append(document.createElement('th'));
  for (let h = 0; h < r.nHead; ++h) {
    const th = document.createElement('th');
    th.textContent = h;
    th.scope = 'col';
    head.append(th);
  }
  const body = table.createTBody();
  for (let l = 0; l < r.nLayer; ++l) {
    const row = body.insertRow();
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = `block ${l}`;
    row.append(th);
    for (let h = 0; h < r.nHead; ++h) {
      const v = r.values[l * r.nHead + h];
      const b = document.createElement('button');
      b.type = 'button';
      b.setAttribute('data-testid', `path-patch-cell-${l}-${h}`);
      b.dataset.layer = l;
      b.dataset.head = h;
      b.dataset.value = v;
      b.style.background = Number.isNaN(v) ? '#ccc' : divergingCss(v / absMax);
      if (d.job.sender && d.job.sender[0] === l && d.job.sender[1] === h) b.classList.add('picked');
      b.title = `Sender ${l}.${h}: ${Number.isNaN(v) ? 'not run' : `${v >= 0 ? '+' : ''}${fmt(v)}`}`;
      b.setAttribute('aria-label', b.title);
      row.insertCell().append(b);
    }
  }
  box.replaceChildren(table);
  drawPaths(d.diagram, r, d.job);
}

const kDrawn = 8;  // paths drawn, the largest first

// The blocks as a column of boxes, the sender's block marked, and a line from it to each
// receiver's block (or to the logits below the last), thick for a large effect.
function drawPaths(element, r, job) {
  if (!job.sender) {
    element.replaceChildren();
    return;
  }
  const [sl, sh] = job.sender;
  const caption = document.createElement('p');
  caption.className = 'hint';
  if (!job.paths) {
    caption.textContent = job.pathsRunning ? `Measuring the paths of sender ${sl}.${sh}: ` +
        `${Math.min(job.pathsDone || 0, job.pathsTotal || 0)} of ${job.pathsTotal || '…'}…` : '';
    element.replaceChildren(caption);
    return;
  }
  const sorted = [...job.paths.paths].sort((a, b) => Math.abs(b.value) - Math.abs(a.value)).slice(0, kDrawn);
  caption.textContent = `${job.paths.cancelled ? `Cancelled after ${job.paths.done} of ${job.paths.total} paths. ` : ''}` +
      `Sender ${sl}.${sh}, its strongest paths, each alone (patched − clean; a head through its q, k and v): ` +
      sorted.map((p) => `${p.receiver} ${p.value >= 0 ? '+' : ''}${fmt(p.value)}`).join(', ') + '.';
  const rowH = 22, width = 360, boxX = 20, boxW = 90;
  const height = (r.nLayer + 1) * rowH + 10;
  const svg = document.createElementNS(kSvg, 'svg');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', caption.textContent);
  const y = (l) => 5 + l * rowH + rowH / 2;  // l = nLayer: the logits
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(kSvg, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  for (let l = 0; l <= r.nLayer; ++l) {
    add('rect', {x: boxX, y: y(l) - rowH / 2 + 2, width: boxW, height: rowH - 4, rx: 3,
                 fill: l === sl ? '#ffe3c4' : '#f2f2f2', stroke: '#999'});
    add('text', {x: boxX + 6, y: y(l) + 4, 'font-size': 11}, l === r.nLayer ? 'logits' : `block ${l}`);
  }
  const absMax = Math.max(1e-9, ...sorted.map((p) => Math.abs(p.value)));
  sorted.forEach((p, i) => {
    const to = p.receiver === 'logits' ? r.nLayer : Number(p.receiver.split('.')[0]);
    const x0 = boxX + boxW, bend = x0 + 30 + i * 22;
    const path = add('path', {d: `M ${x0} ${y(sl)} C ${bend} ${y(sl)}, ${bend} ${y(to)}, ${x0} ${y(to)}`, fill: 'none',
                              stroke: divergingCss(p.value / absMax), 'stroke-width': 1 + 5 * Math.abs(p.value) / absMax});
    path.setAttribute('data-receiver', p.receiver);
    add('text', {x: bend + 4, y: (y(sl) + y(to)) / 2, 'font-size': 10}, p.receiver);
  });
  element.replaceChildren(caption, svg);
}
