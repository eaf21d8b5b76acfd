// The messages between the page (app.js) and the engine's Web Worker (worker.js and its parts),
// written down once: both sides import the names from here, so a message is renamed or added
// in one place. Every message is an object with a `type`, one of Msg's values.
//
// The interventions have one owner, the page's store (interventions.js). Every request that
// computes on the model (those in kComputes) carries `interventions`, the store's at the time it
// was sent: engine.setInterventions's spec (src/bindings/embind.cc), {} = plain; meanAblation:
// knocked-out heads take their mean output over the prompt in the plain model. The worker makes
// the engine run under them (worker-under.js: set again when the engine holds others, the
// conversation run again when the request reads its capture), and the reply carries `under`:
// what it was computed under, in canonical form (the jobs, head detection and the quantization
// lens: the plain model), which the page writes beside the result.
//
//   page -> worker
//     {type:'load', url}             a .gguf URL, or a .json manifest {"parts":[...],"size":N}
//     {type:'load', file}            a File from <input type=file> or drag and drop
//     {type:'get-gpt2', hf, weights, model}   GPT-2 from Hugging Face (model: 'gpt2', 'gpt2-medium',
//                                    'gpt2-large', 'gpt2-xl'; hf.js): the cached conversion if there
//                                    is one, else model.safetensors (streamed by Range requests),
//                                    config.json, vocab.json and merges.txt from
//                                    hf/openai-community/<model>/resolve/main/<file>,
//                                    converted to `weights` ('q8_0' | 'q4_0' | 'f16') by the
//                                    engine's Converter (gpt2-convert's code) and cached as a GGUF
//     {type:'generate', prompt, temperature, topK, topP, seed, maxTokens, capture, interventions}
//     {type:'experiment', interventions, position, prompt, temperature, topK, topP, seed, maxTokens}
//                                    "Run again": the plain and the intervened model side by side
//                                    at `position` and in the text they generate with the same seed;
//                                    the capture is left holding the intervened conversation
//     {type:'stop'}
//     {type:'inspect', position, layer, head, lens, interventions}   activations for the token at
//                                    `position` (and the logit lens, and with layer: the head's map)
//     {type:'head-sweep', position, target, interventions}  "which heads matter": knock out each
//                                    head in turn (plain model otherwise; zeroed, or with
//                                    interventions.meanAblation replaced by its mean over the prompt)
//                                    and measure the target's log-probability at `position`;
//                                    interventions: restored after
//     {type:'patching', clean, corrupted, interventions}  activation patching: two prompts of the same
//                                    token length; the clean stream entering each block at each
//                                    position patched into the corrupted run, one at a time
//     {type:'path-patch', clean, corrupted, receivers, interventions}  path patching's sweep
//                                    (src/lab/path_patch.h): every head in turn the sender, from the
//                                    corrupted run to receivers 'logits' or 'L.H.q|k|v,...';
//                                    m = the clean run's top token's last logit
//     {type:'path-patch-paths', clean, corrupted, layer, head, interventions}  the clicked
//                                    sender's paths, each alone: to the logits and to every head
//                                    of a later block (its q, k and v together)
//     {type:'cancel-job'}            cancels a head sweep, patching or path patching job: received at once, it stops
//                                    the job after the engine call running (about 4 prefills of work)
//     {type:'export', layer, interventions}   the chosen block's captured tensors, by TransformerLens
//                                    names
//     {type:'attribute', position, target, interventions}  direct logit attribution of the
//                                    conversation at `position` for `target` (re-runs it)
//     {type:'attention-map', layer, head, interventions}  one head's full [P, P] attention
//     {type:'heads', text}           head detection (gpt2 heads): the plain model on [50256, ids, ids],
//                                    ids: `gpt2 heads`'s default ids, or with `text` its distinct tokens
//                                    in order (at most what fits the context); the conversation
//                                    becomes that sequence, captured
//     {type:'quant-lens', weights, prompt}  the quantization lens: the loaded model against itself
//                                    re-encoded as `weights` ('q8_0' | 'q4_0' | 'f16') by gpt2-convert's
//                                    code (made once, kept beside it until another model loads), on
//                                    the prompt's tokens; the conversation becomes the prompt, captured
//     {type:'saliency', position, target, contrast, method, steps, interventions}  each token's
//                                    attribution to
//                                    m = logit[position, target] - logit[position, contrast] of the
//                                    conversation ('grad': gradient x input, 'ig': integrated
//                                    gradients with `steps` steps; -1: the last position, the most
//                                    probable target, no contrast); the conversation is captured
//                                    again after
//     {type:'atp', clean, corrupted, target, contrast, interventions}  attribution patching of two
//                                    prompts of the
//                                    same token length: every head's and every (block, position)
//                                    patch's first-order estimate from one backward pass
//     {type:'score-saliency', layer, head, query, key, interventions}  why head layer.head attends
//                                    from `query` to `key`: gradient x input of that pre-softmax
//                                    attention score over the conversation's tokens; the
//                                    conversation is captured again after
//     {type:'atp-exact', clean, corrupted, target, contrast, kind, layer, index, interventions}  one cell of
//                                    'atp' run exactly: kind 'head' (head `index` of block `layer`,
//                                    its output at every position from the corrupted prompt's run)
//                                    or 'resid' (the stream entering block `layer` at position
//                                    `index`), patched into the clean prompt's run
//     {type:'sae-load', source}      a sparse autoencoder into the loaded model (worker-sae.js):
//                                    source {kind:'hf', hf, layer}: jbloom's block-L resid_pre SAE
//                                    from hf/jbloom/GPT2-Small-SAEs-Reformatted (sae.js); {kind:
//                                    'url', folder}: folder/cfg.json + folder/sae_weights.safetensors;
//                                    {kind:'files', files}: a .gguf from gpt2-convert --sae, or a
//                                    cfg.json and a .safetensors. Converted to Q8_0 by the engine's
//                                    Converter and cached as a GGUF (the first two)
//     {type:'sae-drop', id}
//     {type:'sae-features', id, position, k, logitK, interventions}  the SAE's k most active features at a captured
//                                    position of the conversation, each with the logitK tokens its
//                                    decoder direction promotes and suppresses most
//     {type:'sae-strip', id, feature, interventions}  a feature's activation at every captured position
//     {type:'transcoders-load', source}  transcoders for attribution graphs (worker-graph.js), added
//                                    to the blocks held: source {kind:'hf', hf}: every block of the
//                                    public GPT-2 small set from hf/jacobdunefsky/gpt2small-
//                                    transcoders (transcoders.js); {kind:'url', folder}: the blocks
//                                    folder/gpt2-small-dun-chl-mlp-tc{L}/ holds (sae.json,
//                                    sae.safetensors); {kind:'files', files}: .gguf files from
//                                    gpt2-convert --transcoders. Each block converted to Q8_0 and
//                                    cached (the first two); 'cancel-job' stops between blocks
//     {type:'transcoders-drop'}
//     {type:'graph-compute', prompt, maxFeatureNodes}  the attribution graph of [50256] + the
//                                    prompt's ids on the plain model (`gpt2 graph`), in steps with
//                                    'graph-progress'; 'cancel-job' stops it
//     {type:'graph-check', nodeIds, value, group}  the last computed graph's feature nodes
//                                    ('L_F_P') set to value (0: ablated), all at once: its
//                                    predicted change of the top logit beside the exact one
//                                    (`gpt2 graph --check`); group: the name of the group (a
//                                    supernode) they are the features of, or ''
//     {type:'graph-card', layer, feature}  a transcoder feature's card over the graph's prompt
//     {type:'graph-qk', layer, head, query, key}  what makes one head's attention score from query
//                                    to key on the graph's prompt (query < 0: the last position):
//                                    QK attribution (src/graph/qk.h)
//     {type:'dashboard', dictionary, saeId, dictionaryName, blocks, features, corpus, options, request}
//                                    feature dashboards (worker-dashboard.js; `gpt2 dashboard`):
//                                    dictionary 'transcoders' (those loaded for graphs) or 'sae' (the
//                                    SAE saeId); blocks [L, ...] and features [[L, F], ...] as its
//                                    --blocks and --features (empty: every one); corpus {kind:
//                                    'held-out'} (the small model's held-out text beside the page),
//                                    {kind:'file', file} or {kind:'url', url}, .txt or .jsonl,
//                                    streamed; options {context, maxTokens, top, bands, perBand,
//                                    seed} (left out: the CLI's defaults); dictionaryName: names the
//                                    dictionary in the cache's key; request: the page's, echoed;
//                                    'dashboard-progress' while it runs, 'cancel-job' stops it
//     {type:'clear-cache'}
//     {type:'cache-info'}            answered with 'cache' at once, even while a job runs
//   worker -> page (each reply to a request in kComputes also carries `under`, see above)
//   A reply that carries an engine's result is that result as src/bindings/embind.cc declares it
//   (its Shape, a plain object; below, `...` before a Shape's name stands for its fields, listed
//   under "Results" at the end), posted as it is with `type`, `under` and the worker's extras
//   named beside it (worker/reply.js); arrays of numbers are typed arrays (transferred).
//     {type:'ready', threads, isolated, note, relaxed, relaxedError}
//                                                    the wasm module is compiled; threads the
//                                                    kernels will use, isolated: the page is
//                                                    cross-origin isolated (so threads are possible);
//                                                    note: why threads are off although isolated;
//                                                    relaxed: the relaxed SIMD build runs;
//                                                    relaxedError: why it does not, if it was tried
//     {type:'progress', phase, loaded, total, file}  phase: a Phase value (loaded/total: bytes, or
//                                                    tensors for 'convert'); file: the Hugging Face
//                                                    file being downloaded, if any
//     {type:'model', info, source, name, cacheWarning, restored, storing}
//                                                    source: 'network' | 'cache' | 'file' | 'hf'
//                                                    ('hf': downloaded from Hugging Face and converted);
//                                                    restored: a failed load left this model loaded;
//                                                    storing: it is being written into the cache,
//                                                    'cache' with stored: true follows
//     {type:'prompt', ids, pieces}                   the prompt's tokens
//     {type:'token', id, text, index}                one sampled token (text: decoded UTF-8 so far)
//     {type:'stats', blockMs, captured, promptTokens, prefillMs, generated, decodeMs, tokensPerSecond,
//       reason}                                      blockMs: Float64Array [n_layer], each block's
//                                                    measured time in the prefill (engine.blockTimes);
//                                                    captured: engine.capturedPositions()
//     {type:'activations', attention, residualNorms, lnStats, sublayerNorms, top, position, positions,
//       tokens, pieces, mlp, topPieces}              the picked token at `position` of the `positions`
//                                                    captured (tokens, pieces: the conversation's);
//                                                    attention: [nLayer] of Float32Array [nHead,
//                                                    position + 1] (engine.attention); residualNorms,
//                                                    lnStats: the engine's; sublayerNorms: Float32Array
//                                                    [nLayer, 4] at position; top: engine.topProbs
//                                                    {ids, probs} (id -1: none), topPieces: the text of
//                                                    each id that is not -1; mlp: [nLayer] of {hist,
//                                                    lo, hi, min, max, mean, active, n, top: [{neuron,
//                                                    value}]}, the histogram the MLP view draws
//     {type:'attention-map', map, layer, head, positions}  map: Float32Array [positions, positions]
//                                                    (query row, key column; NaN above the diagonal)
//     {type:'lens-start', begin, end}; {type:'lens', ids, probs, begin, end, topK, nLayer, pieces}
//                                                    ids, probs: engine.logitLens's over blocks
//                                                    0..nLayer-1 and positions begin..end-1 (topK each)
//     {type:'restoring', on}         a job (head sweep, patching, path patching) ended and the lab
//                                    runs the conversation again to capture it (on: true), then
//                                    has (false): a request that reads the capture waits for it
//     {type:'experiment', ...ExperimentResult, nLayer, pieces: {id: text}}
//                                                    the plain model before and the intervened after
//                                                    at `position`, and the texts each wrote
//     {type:'sweep-progress', done, total}
//     {type:'sweep', ...HeadSweepStart, heads: [{layer, head, logProb, drop}], done, cancelled,
//       meanAblation, ms}                            heads ranked by drop = base - logProb, largest
//                                                    first; ms: the job's time in the worker
//     {type:'export', tensors: [{name, shape, data: Float32Array}], layer}  shapes with
//                                                    TransformerLens's batch dimension of 1 (e.g.
//                                                    [1, n_head, P, P])
//     {type:'patching-progress', done, total}
//     {type:'patching', ...PatchingStart, nLayer, recovered: Float32Array [nLayer, positions], done,
//       cancelled, ms, pieces, answerPieces}         recovered: the share of the clean difference a
//                                                    patch brings back (NaN: not run); pieces: the
//                                                    corrupted prompt's; answerPieces: [answer, other]
//     {type:'path-patch-progress', done, total, paths}  paths: of a sender's paths, not the sweep
//     {type:'path-patch', ...PathPatchStart, nLayer, nHead, receivers, targetPiece,
//       values: Float64Array [nLayer * nHead], done, cancelled, ms}
//                                                    values: m_patched - m_clean per sender (NaN:
//                                                    not run), the CLI's `gpt2 path-patch --sweep`
//     {type:'path-patch-paths', ...PathPatchStart, layer, head, paths: [{receiver, value}], done,
//       cancelled}                                   receiver 'logits' or 'L.H'; value: m_patched -
//                                                    m_clean of the sender to that receiver alone
//     {type:'attribution', ...Attribution}
//     {type:'heads', ...HeadScores, ids, sequence, pieces, ms}  sequence: [50256, ids, ids], the
//                                                    conversation now
//     {type:'quant-lens', ...Comparison, weights, ids, pieces, nLayer, nHead, targetPiece, secondBytes,
//       ms}                                          targetPiece: the text of attribution.target;
//                                                    secondBytes: the re-encoded model's file size
//     {type:'saliency', ...SaliencyResult, method, steps}
//     {type:'atp', ...AtpResult, nLayer, nHead, pieces, ms}  pieces: the clean prompt's
//     {type:'score-saliency', ...ScoreSaliencyResult}
//     {type:'atp-exact', ...ExactPatchResult, kind, layer, index}  the request's cell
//     {type:'sae-progress', phase, loaded, total, file}  as 'progress', for an SAE's load
//     {type:'saes', saes: [{...SaeInfo, name, share, from}], loaded, note}
//                                                    the SAEs loaded (engine.saes() with where each
//                                                    came from: share: its link text, '' for a
//                                                    local file; from: 'network' | 'cache' |
//                                                    'file' | 'hf'); loaded: the id just loaded, or
//                                                    -1; note: what the page should say (e.g. all
//                                                    dropped because another model loaded)
//     {type:'sae-features', ...SaeFeatureList, id, position, logits: [SaeLogitWeights], pieces}
//                                                    logits: engine.saeLogitWeights, one per feature
//     {type:'sae-strip', values: Float32Array [positions], id, feature}  engine.saeStrip
//     {type:'transcoders-progress', phase, loaded, total, file, block}  as 'progress', per block
//     {type:'transcoders', blocks, bytes, nLayer, note, from}  the blocks held, their bytes; from:
//                                                    'hf' | 'network' | 'cache' | 'file' | '' (none
//                                                    loaded by this request)
//     {type:'graph-progress', ...JobProgress}        blocks whose features are read (encoding),
//                                                    then rows of the graph's adjacency done
//     {type:'graph', ...JobProgress, text, prompt, nodeThreshold, cancelled, ms}  text: circuit-
//                                                    tracer's graph file (pruned loosely, so the
//                                                    page's node threshold can go up to 0.99;
//                                                    nodeThreshold: the one to show first); a
//                                                    cancelled one has no text
//     {type:'graph-check', ...GraphCheck, nodeIds, value, group}
//     {type:'graph-card', ...GraphFeatureCard, layer, feature, ids, pieces}  ids: the graph's prompt
//     {type:'graph-qk', ...QkAttribution, layer, head, query, key, ids, pieces}
//     {type:'dashboard-progress', ...JobProgress, bytes, size}  phase 'windows' (done/total: windows
//                                                    run of those read so far; bytes of the corpus's
//                                                    size read, size 0 when unknown), then 'features'
//     {type:'dashboard', file, metadata, index, cached, cancelled, request, ms}  file: a Blob of the
//                                                    file `gpt2 dashboard --json` writes; index: per
//                                                    feature {layers, indices, maxActs, begins, ends}
//                                                    (typed arrays; its object is file's bytes
//                                                    [begin, end)); cached: read from the Cache API;
//                                                    a cancelled one has file null
//     {type:'cache', entries, bytes, urls, cleared, stored}  after clear-cache / cache-info / a
//                                                    converted model's write (stored: it is cached)
//     {type:'error', kind, message}                  kind: an ErrorKind value
//
// Results: the Shapes of src/bindings/embind.cc the replies carry, field by field (in its order;
// tests/web/protocol.test.mjs checks the names against it).
//   ExperimentResult {position, fromBlock, kl, topBefore, topBeforeProbs, topAfter, topAfterProbs,
//     topAfterProbsBefore, textBefore, textAfter}    kl: KL(before || after) over the whole
//                                                    vocabulary, nats; topBefore, topAfter: the 10
//                                                    most probable ids of each, with their probs;
//                                                    topAfterProbsBefore: the plain model's
//                                                    probability of each topAfter id; textBefore,
//                                                    textAfter: sampled ids; fromBlock: the first
//                                                    block the re-run under the interventions ran
//   HeadSweepStart {position, target, base, total}   base: the plain model's log-probability
//   PatchingStart {positions, total, answer, other, cleanDiff, corruptedDiff}
//                                                    answer/other: the clean and the corrupted run's
//                                                    top token; diff = log p(answer) - log p(other)
//                                                    (the logit difference)
//   PathPatchStart {positions, total, target, contrast, clean, corrupt}
//                                                    m = the target's last logit (minus the
//                                                    contrast's); clean, corrupt: m of each run
//   Attribution {position, target, contrast, names, values, logit}
//                                                    values: Float64Array, names in `gpt2
//                                                    attribute`'s order
//   SaliencyResult {position, target, contrast, values, total, delta}
//                                                    values: Float64Array [P], as `gpt2 saliency`
//                                                    prints them
//   AtpResult {target, contrast, tokens, heads, residPre, metric, metricCorrupt}
//                                                    heads: Float64Array [nLayer, nHead], residPre:
//                                                    [nLayer, tokens], as `gpt2 atp` prints them
//   ScoreSaliencyResult {layer, head, query, key, values, total, score}
//                                                    values: Float64Array [P], x[p] . ds/dx[p] (zero
//                                                    after the query), s the score
//   ExactPatchResult {target, contrast, value, metric, metricPatched}
//                                                    value = metricPatched - metric (the clean run's)
//   UniformScores {prev, dup, induction}             what evenly spread attention scores
//   HeadScores {repeat, nLayer, nHead, prev, dup, induction, uniform}
//                                                    Float64Array [nLayer * nHead] each
//                                                    (src/lab/head_scores.h); uniform: UniformScores
//   Comparison {positions, agree, cos, rel, kl, topA, topB, headDrift, attribution}
//                                                    per block as `gpt2 compare` prints it (Float64Array
//                                                    [nLayer]); topA, topB: Int32Array [positions];
//                                                    headDrift: [nLayer * nHead] mean total variation
//                                                    between the two models' attention rows;
//                                                    attribution {target, names, a, b}: each component
//                                                    for A's top token at the last position, in A and B
//   SaeInfo {id, hook, layer, point, dSae, architecture, k, normalize, bytes}
//   SaeFeatureList {features, activations, explained}  the k most active, descending (zeros left out)
//   SaeLogitWeights {promoted, promotedValues, suppressed, suppressedValues}
//                                                    the tokens a feature's decoder direction promotes
//                                                    and suppresses most (W_dec[F] @ W_U)
//   JobProgress {encoding, phase, done, total, finished}  a graph's: encoding, blocks whose features
//                                                    are read, else rows of its adjacency done;
//                                                    phase: the job's (dashboards': 'windows',
//                                                    'features')
//   GraphCheck {predicted, exact}                    the top logit's change: the graph's, a re-run's
//   GraphFeatureCard {activations, promoted, promotedWeights, suppressed, suppressedWeights}
//                                                    activations: Float32Array [ids]
//   QkPart {kind, layer, feature, activation, score}
//   QkPair {query, key, score}                       indices into the parts
//   QkAttribution {score, probability, queryRest, keyRest, pairs, queryParts, keyParts}
//                                                    parts: QkPart, largest first; pairs: QkPair

export const Msg = Object.freeze({
  // page -> worker
  load: 'load',
  getGpt2: 'get-gpt2',
  generate: 'generate',
  stop: 'stop',
  inspect: 'inspect',
  headSweep: 'head-sweep',
  patching: 'patching',           // also the worker's reply
  pathPatch: 'path-patch',        // also the worker's reply
  pathPatchPaths: 'path-patch-paths',  // also the worker's reply
  cancelJob: 'cancel-job',
  exportBlock: 'export',          // also the worker's reply
  attribute: 'attribute',
  attentionMap: 'attention-map',  // also the worker's reply
  experiment: 'experiment',       // also the worker's reply
  heads: 'heads',                 // also the worker's reply
  quantLens: 'quant-lens',        // also the worker's reply
  saliency: 'saliency',           // also the worker's reply
  atp: 'atp',                     // also the worker's reply
  scoreSaliency: 'score-saliency',  // also the worker's reply
  atpExact: 'atp-exact',          // also the worker's reply
  saeLoad: 'sae-load',
  saeDrop: 'sae-drop',
  saeFeatures: 'sae-features',    // also the worker's reply
  saeStrip: 'sae-strip',          // also the worker's reply
  transcodersLoad: 'transcoders-load',
  transcodersDrop: 'transcoders-drop',
  graphCompute: 'graph-compute',
  graphCheck: 'graph-check',      // also the worker's reply
  graphCard: 'graph-card',        // also the worker's reply
  graphQk: 'graph-qk',            // also the worker's reply
  dashboard: 'dashboard',         // also the worker's reply
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
  restoring: 'restoring',
  sweepProgress: 'sweep-progress',
  sweep: 'sweep',
  patchingProgress: 'patching-progress',
  pathPatchProgress: 'path-patch-progress',
  attribution: 'attribution',
  saeProgress: 'sae-progress',
  saes: 'saes',
  transcodersProgress: 'transcoders-progress',
  transcoders: 'transcoders',
  graphProgress: 'graph-progress',
  graph: 'graph',
  dashboardProgress: 'dashboard-progress',
  cache: 'cache',
  error: 'error',
});

// The requests that compute on the model: each carries `interventions` (the page sends them
// through one function, app.js compute) and its reply `under`.
export const kComputes = Object.freeze([
  Msg.generate, Msg.inspect, Msg.attentionMap, Msg.experiment, Msg.headSweep, Msg.patching, Msg.pathPatch,
  Msg.pathPatchPaths, Msg.exportBlock, Msg.attribute, Msg.saliency, Msg.atp, Msg.scoreSaliency, Msg.atpExact,
  Msg.saeFeatures, Msg.saeStrip,
]);

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
  heads: 'heads',
  quantLens: 'quant-lens',
  pathPatch: 'path-patch',
  saliency: 'saliency',
  atp: 'atp',
  scoreSaliency: 'score-saliency',
  atpExact: 'atp-exact',
  sae: 'sae',
  graph: 'graph',
  dashboard: 'dashboard',
});

// Between the engine's worker and the download worker of a streamed conversion (worker-fetch.js,
// whose header documents the shapes).
export const FetchMsg = Object.freeze({
  open: 'open',      // engine -> fetch: read a file from an offset
  taken: 'taken',    // engine -> fetch: bytes used, more may come
  chunk: 'chunk',    // fetch -> engine: the next bytes
  end: 'end',        // fetch -> engine: the end of the file
  error: 'error',    // fetch -> engine
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
