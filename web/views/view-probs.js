// Next-token probabilities at the picked token; the token that actually came next in bold.
import {probList} from './viz.js';

// data: {top ({ids, probs}: the engine's topProbs; id -1: none), topPieces (the text of each id that
// is not -1), next (the id that came next), target (the heads ranking's), where}
export function render(list, d) {
  const items = [];
  let k = 0;
  d.top.ids.forEach((id, i) => {
    if (id < 0) return;
    items.push({id, prob: d.top.probs[i], piece: d.topPieces[k++], mark: `${id === d.next ? 'actual' : ''} ${id === d.target ? 'target' : ''}`});
  });
  probList(list, items, {title: (id) => `id ${id}${id === d.next ? ' (the token that came next)' : ''}. Click to rank the heads for it.`});
  list.setAttribute('aria-label', `Most likely next tokens after ${d.where}`);
}
