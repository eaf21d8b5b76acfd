// "Which heads matter": the heads ranked by how much knocking each out alone lowers the
// target token's log-probability, with the job's progress.
import {fmt, viridisCss} from './viz.js';

// data: {sweep: {running, done, total, result}, targetWords}
export function render(box, d) {
  const {running, done = 0, total = 0, result} = d.sweep;
  const status = document.createElement('p');
  status.className = 'hint';
  const progress = document.createElement('progress');
  progress.max = total || 1;
  progress.value = done;
  progress.setAttribute('data-testid', 'sweep-progress');
  progress.hidden = !running;
  if (running) status.textContent = `Knocking out head ${done + 1} of ${total}…`;
  else if (result) {
    status.textContent = `${result.cancelled ? `Cancelled after ${result.done} of ${result.total} heads. ` : ''}` +
        `Target ${d.targetWords} at position ${result.position}: log-probability ${fmt(result.base)} with every head; ` +
        `the heads whose loss lowers it most first (${(result.ms / 1000).toFixed(1)} s).`;
  }
  const list = document.createElement('ol');
  list.className = 'sweep-results';
  list.setAttribute('data-testid', 'sweep-results');
  if (result) {
    const maxDrop = Math.max(1e-9, ...result.heads.map((x) => Math.abs(x.drop)));
    for (const x of result.heads.slice(0, 20)) {
      const li = document.createElement('li');
      li.dataset.layer = x.layer;
      li.dataset.head = x.head;
      li.dataset.drop = x.drop;
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'link';
      b.textContent = `block ${x.layer}, head ${x.head}`;
      b.title = 'Open this head\'s attention';
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.style.width = `${(Math.abs(x.drop) / maxDrop) * 100}%`;
      bar.style.background = x.drop >= 0 ? viridisCss(0.3 + 0.7 * (x.drop / maxDrop)) : '#bbb';
      const num = document.createElement('span');
      num.className = 'num';
      num.textContent = `${x.drop >= 0 ? '−' : '+'}${fmt(Math.abs(x.drop), 3)}`;
      li.append(b, bar, num);
      list.append(li);
    }
  }
  box.replaceChildren(progress, status, list);
}
