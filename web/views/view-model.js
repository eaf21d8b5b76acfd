// The loaded model, in words: its name (with a note for the small offline model) and its shape.
import {kWasmMaxBytes} from '../shared/hf.js';
import {mb} from './viz.js';

// The models this project makes, by file name, in words. The small one gets a note: its odd
// text is expected, not a bug.
const kGpt2Small = 'GPT-2 small (OpenAI, 2019; 124 M parameters)';
const kKnownModels = {
  'gpt2-q8_0.gguf': {name: `${kGpt2Small}, weights in 8 bits`},
  'gpt2-q4_0.gguf': {name: `${kGpt2Small}, weights in 4 bits`},
  'gpt2-f16.gguf': {name: `${kGpt2Small}, weights in 16-bit floats`},
  'gpt2-q8_0.manifest.json': {name: `${kGpt2Small}, weights in 8 bits`},
  'gpt2-q4_0.manifest.json': {name: `${kGpt2Small}, weights in 4 bits`},
  'gpt2-tiny-q8_0.gguf': {
    name: 'gpt2-tiny, the small offline model (4 blocks, 7 M parameters), not GPT-2 itself',
    note: 'This is the small model that ships with this project, opened because the real GPT-2 ' +
        'weights are not here (they need a one-time download: scripts/get-weights.sh, or the demo on a ' +
        'connected machine). It has GPT-2\'s design and vocabulary but is 17 times smaller, and it was ' +
        'trained for an hour and 40 minutes on one shared computer, on 3.4 million tokens of software ' +
        'licences and Python documentation (GPT-2 read some 40 GB of web pages). So its text is ' +
        'English-like but odd: phrases of documentation with little grammar or sense. Every view below ' +
        'works as for GPT-2, and its attention shows two classic patterns: block 0\'s head 0 looks at the ' +
        'previous token, and on repeated text block 2\'s head 0 looks at the token that followed the ' +
        'current one last time (an induction head).',
  },
};

// els: {name, note, info}; data: {info (the engine's), source (URL or file name), threads (in words),
// memoryBytes (the engine's WebAssembly memory after loading)}
export function render(els, d) {
  if (!d.info) {
    els.name.hidden = true;
    els.note.hidden = true;
    els.info.hidden = true;
    return;
  }
  const info = d.info;
  const file = d.source.split(/[?#]/)[0].split('/').pop();
  // A manifest of parts written by build-site.sh --with-weights is named after its .gguf.
  const known = kKnownModels[file] || kKnownModels[file.replace(/\.manifest\.json$/, '.gguf')];
  // The file's own general.name first (gpt2-convert writes "GPT-2 small" for OpenAI's shape);
  // the file name only when the file does not say.
  const shape = `${info.n_layer} blocks, ${(info.parameters / 1e6).toFixed(0)} M parameters`;
  const words = info.name ? `${info.name} (${shape}, ${info.weight_type} weights)`
      : known ? known.name : `${file || 'a GPT-2 model'} (${shape})`;
  els.name.textContent = `Running: ${words}.`;
  els.name.dataset.file = file;
  els.name.hidden = false;
  els.note.textContent = known?.note || '';
  els.note.hidden = !known?.note;
  const rows = [
    ['Name', info.name || '(unnamed)'],
    ['Parameters', `${(info.parameters / 1e6).toFixed(1)} M`],
    ['Blocks × heads', `${info.n_layer} × ${info.n_head}`],
    ['Width (n_embd) / MLP', `${info.n_embd} / ${info.n_ff}`],
    ['Context', `${info.n_ctx} tokens`],
    ['Vocabulary', `${info.n_vocab} tokens`],
    ['Weights', info.weight_type],
    ['SIMD', info.simd],
    // Which int8 multiply the engine's probe picked for prompts (relaxed SIMD's byte dot where the
    // browser makes it exact): only quantized weights take int8 products.
    ['Int8 prompt products', /^q[48]_0$/.test(info.weight_type) ? info.int8_prefill.replace(/^auto: /, '') : ''],
    ['Threads', d.threads],
    ['Engine memory', d.memoryBytes ? `${mb(d.memoryBytes)} of WebAssembly memory after loading (it may grow to ` +
                                      `${(kWasmMaxBytes / 2 ** 30).toFixed(0)} GiB)` : ''],
  ];
  els.info.replaceChildren(...rows.filter(([, v]) => v !== '').flatMap(([k, v]) => {
    const dt = document.createElement('dt'); dt.textContent = k;
    const dd = document.createElement('dd'); dd.textContent = v;
    return [dt, dd];
  }));
  els.info.dataset.memoryBytes = d.memoryBytes || '';
  els.info.hidden = false;
}
