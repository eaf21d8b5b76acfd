// The messages between the page (app.js) and the engine's Web Worker (worker.js and its parts),
// written down once: both sides import the names from here, so a message is renamed or added
// in one place. Every message is an object with a `type`, one of Msg's values.
//
//   page -> worker
//     {type:'load', url}             a .gguf URL, or a .json manifest {"parts":[...],"size":N}
//     {type:'load', file}            a File from <input type=file> or drag and drop
//     {type:'get-gpt2', hf, weights}   GPT-2 small from Hugging Face: the cached conversion if there
//                                    is one, else model.safetensors, config.json, vocab.json and
//                                    merges.txt from hf/openai-community/gpt2/resolve/main/<file>,
//                                    converted to `weights` ('q8_0' | 'q4_0' | 'f16') by the
//                                    engine's Converter (gpt2-convert's code) and cached as a GGUF
//     {type:'generate', prompt, temperature, topK, topP, seed, maxTokens, capture, interventions}
//                                    interventions: engine.setInterventions's spec (src/bindings/
//                                    embind.cc), applied to this and every later run; {} = plain;
//                                    meanAblation: knocked-out heads take their mean output over
//                                    the prompt in the plain model (promptHeadMeans)
//     {type:'experiment', interventions, position, prompt, temperature, topK, topP, seed, maxTokens}
//                                    "Run again": the plain and the intervened model side by side
//                                    at `position` and in the text they generate with the same seed;
//                                    the capture is left holding the intervened conversation
//     {type:'stop'}
//     {type:'inspect', position, layer, head, lens}   activations for the token at `position`
//     {type:'head-sweep', position, target, interventions}  "which heads matter": knock out each
//                                    head in turn (plain model otherwise; zeroed, or with
//                                    interventions.meanAblation replaced by its mean over the prompt)
//                                    and measure the target's log-probability at `position`;
//                                    interventions: restored after
//     {type:'patching', clean, corrupted, interventions}  activation patching: two prompts of the same
//                                    token length; the clean stream entering each block at each
//                                    position patched into the corrupted run, one at a time
//     {type:'cancel-job'}            cancels a head sweep or patching job: received at once, it stops
//                                    the job after the engine call running (about 4 prefills of work)
//     {type:'export', layer}         the chosen block's captured tensors, by TransformerLens names
//     {type:'attribute', position, target, interventions}  direct logit attribution of the
//                                    conversation at `position` for `target` (re-runs it)
//     {type:'attention-map', layer, head}  one head's full [P, P] attention
//     {type:'saliency', position, target, contrast, method, steps}  each token's attribution to
//                                    m = logit[position, target] - logit[position, contrast] of the
//                                    conversation ('grad': gradient x input, 'ig': integrated
//                                    gradients with `steps` steps; -1: the last position, the most
//                                    probable target, no contrast), under the interventions set
//                                    last; the conversation is captured again after
//     {type:'atp', clean, corrupted, target, contrast}  attribution patching of two prompts of the
//                                    same token length: every head's and every (block, position)
//                                    patch's first-order estimate from one backward pass
//     {type:'clear-cache'}
//     {type:'cache-info'}            answered with 'cache' at once, even while a job runs
//   worker -> page
//     {type:'ready', threads, isolated, note, relaxed}  the wasm module is compiled; threads the
//                                                    kernels will use, isolated: the page is
//                                                    cross-origin isolated (so threads are possible);
//                                                    note: why threads are off although isolated;
//                                                    relaxed: the relaxed SIMD build runs
//     {type:'progress', phase, loaded, total, file}  phase: a Phase value (loaded/total: bytes, or
//                                                    tensors for 'convert'); file: the Hugging Face
//                                                    file being downloaded, if any
//     {type:'model', info, source, name, cacheWarning, restored}
//                                                    source: 'network' | 'cache' | 'file' | 'hf'
//                                                    ('hf': downloaded from Hugging Face and converted);
//                                                    restored: a failed load left this model loaded
//     {type:'prompt', ids, pieces}                   the prompt's tokens
//     {type:'token', id, text, index}                one sampled token (text: decoded UTF-8 so far)
//     {type:'stats', promptTokens, prefillMs, blockMs, generated, decodeMs, tokensPerSecond, reason,
//       captured}                                    blockMs: Float64Array [n_layer], each block's
//                                                    measured time in the prefill (engine.blockTimes)
//     {type:'activations', ...}                      see inspect() in worker-jobs.js
//     {type:'attention-map', layer, head, positions, map}
//     {type:'lens-start', begin, end}; {type:'lens', begin, end, topK, nLayer, ids, probs, pieces}
//     {type:'experiment', position, nLayer, fromBlock, kl, before: {ids, probs}, after: {ids,
//       probs, probsBefore}, text: {before: ids, after: ids}, pieces: {id: text}}
//                                                    top 10 at position before and after (probsBefore:
//                                                    the plain model's probability of each after id),
//                                                    KL(before || after) over the whole vocabulary
//     {type:'sweep-progress', done, total}
//     {type:'sweep', position, target, base, heads: [{layer, head, logProb, drop}], done, total,
//       cancelled, ms}                               base: the plain model's log-probability; heads
//                                                    ranked by drop = base - logProb, largest first;
//                                                    ms: the job's time in the worker
//     {type:'export', layer, tensors: [{name, shape, data: Float32Array}]}  shapes with TransformerLens's
//                                                    batch dimension of 1 (e.g. [1, n_head, P, P])
//     {type:'patching-progress', done, total}
//     {type:'patching', nLayer, positions, answer, other, pieces, answerPieces, cleanDiff, corruptedDiff,
//       recovered: Float32Array [nLayer, positions], done, total, cancelled, ms}
//                                                    answer/other: the clean and the corrupted run's
//                                                    top token; diff = log p(answer) - log p(other)
//                                                    (the logit difference); recovered: the share of
//                                                    the clean difference a patch brings back
//     {type:'attribution', position, target, names, values: Float64Array, logit}
//                                                    names in `gpt2 attribute`'s order
//     {type:'saliency', position, target, contrast, method, steps, values: Float64Array [P], total,
//       delta}                                       as `gpt2 saliency` prints them
//     {type:'atp', nLayer, nHead, positions, target, contrast, heads: Float64Array [nLayer, nHead],
//       residPre: Float64Array [nLayer, positions], metric, metricCorrupt, pieces, ms}
//                                                    as `gpt2 atp` prints them
//     {type:'cache', entries, bytes, urls, cleared}  after clear-cache / cache-info
//     {type:'error', kind, message}                  kind: an ErrorKind value

export const Msg = Object.freeze({
  // page -> worker
  load: 'load',
  getGpt2: 'get-gpt2',
  generate: 'generate',
  stop: 'stop',
  inspect: 'inspect',
  headSweep: 'head-sweep',
  patching: 'patching',           // also the worker's reply
  cancelJob: 'cancel-job',
  exportBlock: 'export',          // also the worker's reply
  attribute: 'attribute',
  attentionMap: 'attention-map',  // also the worker's reply
  experiment: 'experiment',       // also the worker's reply
  saliency: 'saliency',           // also the worker's reply
  atp: 'atp',                     // also the worker's reply
  clearCache: 'clear-cache',
  cacheInfo: 'cache-info',
  // worker -> page
  ready: 'ready',
  progress: 'progress',
  model: 'model',
  prompt: 'prompt',
  token: 'token',
  stats: 'stats',
  activations: 'activations',
  lensStart: 'lens-start',
  lens: 'lens',
  sweepProgress: 'sweep-progress',
  sweep: 'sweep',
  patchingProgress: 'patching-progress',
  attribution: 'attribution',
  cache: 'cache',
  error: 'error',
});

// The `kind` of an 'error' message: which request failed, so the page can end what it waits for.
export const ErrorKind = Object.freeze({
  load: 'load',
  generate: 'generate',
  inspect: 'inspect',
  cache: 'cache',
  experiment: 'experiment',
  sweep: 'sweep',
  exportBlock: 'export',
  attribute: 'attribute',
  patching: 'patching',
  saliency: 'saliency',
  atp: 'atp',
});

// The `phase` of a 'progress' message.
export const Phase = Object.freeze({
  download: 'download',  // from the network
  cache: 'cache',        // from the worker's Cache API copy
  file: 'file',          // a local file
  parse: 'parse',        // the engine checks the file and builds the model
  convert: 'convert',    // Hugging Face weights to GGUF (loaded/total: tensors)
});

// The text of an 'error' message for anything thrown.
export function errorMessage(e) {
  return (e && e.message) ? e.message : String(e);
}
