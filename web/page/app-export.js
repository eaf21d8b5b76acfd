// The page's exports: a block's captured tensors (.npy or JSON, by TransformerLens's names), the
// saliency computed last, and any heat map as PNG or SVG. app.js hands it the store, the worker
// and its helpers; protocol.js documents the messages.
import {encodeNpy} from './npy.js';
import {Msg} from '../shared/protocol.js';
import {heatmapOf} from '../views/viz.js';

// Saves blob as a file called name (the browser's download).
export function download(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

// store, $, on: app.js's; compute(msg): sends a request that computes on the model with the
// store's interventions.
export function createExportPanel({store, $, on, compute}) {
  const state = store.state;

  function onExport({tensors}) {
    const t = tensors.find((x) => x.name.endsWith(state.exportTensor)) || tensors[0];
    if (state.exportFormat === 'npy') download(`${t.name}.npy`, new Blob([encodeNpy(t.shape, t.data)]));
    else download(`${t.name}.json`, new Blob([JSON.stringify({name: t.name, shape: t.shape, data: Array.from(t.data)})]));
  }

  // A heat map as the picture on screen (PNG) or as vector graphics (SVG).
  function exportImage(button) {
    const canvas = $(button.dataset.exportFor);
    const heat = heatmapOf(canvas);
    if (!heat || !heat.rows) { store.set({error: 'Nothing to export yet: generate and pick a token first.'}); return; }
    const name = `gpt2-${button.dataset.exportFor}`;
    if (button.dataset.format === 'svg') download(`${name}.svg`, new Blob([heat.toSvg()], {type: 'image/svg+xml'}));
    else canvas.toBlob((blob) => download(`${name}.png`, blob), 'image/png');
  }

  function exportTensor(format) {
    store.set({exportFormat: format});
    if (state.exportTensor === 'saliency') exportSaliency(format);
    else compute({type: Msg.exportBlock, layer: state.layer});
  }

  // The saliency computed last, [1, P] over the conversation's tokens like the hooks' batch
  // dimension; the name says the method (no TransformerLens hook holds it), the JSON also the
  // position, target and sums it was computed for.
  function exportSaliency(format) {
    const s = state.saliency;
    if (!s) { store.set({error: 'Nothing to export yet: run Saliency first.'}); return; }
    const name = s.method === 'ig' ? `saliency.integrated_gradients_${s.steps}` : 'saliency.grad_x_input';
    const shape = [1, s.values.length];
    if (format === 'npy') { download(`${name}.npy`, new Blob([encodeNpy(shape, s.values)])); return; }
    download(`${name}.json`, new Blob([JSON.stringify({
      name, shape, data: Array.from(s.values), position: s.position, target: s.target, contrast: s.contrast,
      method: s.method, steps: s.steps, total: s.total, delta: s.delta,
    })]));
  }

  on($('export-npy'), 'click', () => exportTensor('npy'));
  on($('export-json'), 'click', () => exportTensor('json'));
  // Not on(): drawing at every click on the page would reset a checkbox before its change event.
  document.body.addEventListener('click', (e) => {
    const button = e.target.closest('[data-export-for]');
    if (button) {
      exportImage(button);
      store.flush();
    }
  });

  return {
    render(s) {
      for (const id of ['export-npy', 'export-json']) $(id).disabled = s.captured === 0 || s.generating;
    },
    onMessage(msg) {
      if (msg.type !== Msg.exportBlock) return false;
      onExport(msg);
      return true;
    },
  };
}
