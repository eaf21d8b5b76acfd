// The token strip: one chip per prompt or generated token; the picked one outlined.
import {showPiece} from './viz.js';

function makeChip(d, i) {
  const id = d.ids[i];
  const chip = document.createElement('span');
  chip.className = 'chip' + (i < d.promptLength ? ' prompt' : ' generated') +
      (i === d.picked ? ' picked' : '') + (i < d.captured ? '' : ' no-data');
  chip.setAttribute('role', 'option');
  chip.setAttribute('aria-selected', i === d.picked ? 'true' : 'false');
  chip.tabIndex = i === Math.max(0, d.picked) ? 0 : -1;
  chip.dataset.position = i;
  chip.dataset.id = id;
  const text = document.createElement('span');
  text.className = 'piece';
  text.textContent = d.pieces[i] !== null && d.pieces[i] !== undefined ? showPiece(d.pieces[i]) : '…';
  const small = document.createElement('small');
  small.textContent = id;
  chip.append(text, small);
  chip.title = `position ${i}, id ${id}` + (i < d.captured ? '' : ' (no activations captured)');
  return chip;
}

const drawn = new WeakMap();  // box -> what its chips show, to append or re-mark rather than rebuild

function mark(chip, d) {
  const i = Number(chip.dataset.position);
  chip.classList.toggle('picked', i === d.picked);
  chip.setAttribute('aria-selected', i === d.picked ? 'true' : 'false');
  chip.tabIndex = i === Math.max(0, d.picked) ? 0 : -1;
}

// data: {ids, pieces, promptLength, picked, captured, focusSeq}; a new focusSeq moves keyboard
// focus to the picked chip (the person picked it with a click or a key).
export function render(box, d) {
  const key = `${d.captured}|${d.promptLength}|${d.pieces.filter((p) => p != null).length}`;
  const last = drawn.get(box);
  const focusAsked = !last || last.focusSeq !== d.focusSeq;
  drawn.set(box, {key, n: d.ids.length, focusSeq: d.focusSeq, picked: d.picked});
  const same = last && last.key === key && box.children.length === last.n;
  // While tokens stream in only the new chips are added: rebuilding all of them every frame
  // cost the page a third of a core, which on a 2-core machine is taken from the engine.
  if (same && last.picked === d.picked && last.n <= d.ids.length) {
    const fresh = [];
    for (let i = last.n; i < d.ids.length; i++) fresh.push(makeChip(d, i));
    box.append(...fresh);
    return;
  }
  const hadFocus = box.contains(document.activeElement);
  if (same && last.n === d.ids.length) {
    // Only the pick moved: re-mark the two chips (and the first, which holds the tab stop when
    // nothing is picked) instead of rebuilding every chip.
    for (const i of new Set([last.picked, d.picked, 0])) if (box.children[i]) mark(box.children[i], d);
  } else {
    box.replaceChildren(...d.ids.map((_, i) => makeChip(d, i)));
  }
  // Re-rendering replaces the chips: keep keyboard focus on the picked one.
  if (hadFocus || focusAsked) box.querySelector('.chip[tabindex="0"]')?.focus();
  const chip = box.querySelector('.chip.picked');
  // A long prompt's strip scrolls (style.css): bring the picked chip into it, not the page.
  if (chip && (chip.offsetTop < box.scrollTop || chip.offsetTop + chip.offsetHeight > box.scrollTop + box.clientHeight)) {
    box.scrollTop = chip.offsetTop - box.clientHeight / 2;
  }
}
