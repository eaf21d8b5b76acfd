// The whole JavaScript surface of the engine, in one file (as whisper.cpp's
// examples/whisper.wasm keeps its Embind bindings). It only forwards: the conversation and the
// experiments are src/lab/lab.h's Lab, the converter src/convert/convert.h; here JS values become
// C++ ones and C++ errors become JS ones. The page's Web Worker (web/worker-jobs.js) is the caller.
//
// Every method throws a JS Error carrying the engine's message on failure (the C++ side returns
// the error by value, engine-errors.js throws it, see ErrorsByValue).
//   const engine = new Module.Engine();
//   engine.beginLoad(totalBytes); engine.appendChunk(uint8Array) ...;  // the file, in pieces
//   const info = engine.finishLoad(nThreads);   // parse GGUF, bind weights, read the tokenizer
//   engine.tokenize(text) -> Int32Array; engine.detokenize(ids), engine.tokenBytes(id) -> bytes
// Generation, one token per call so the caller can read "stop" in between (Lab::NextToken):
//   engine.startGeneration(ids, {temperature, topK, topP, seed, maxTokens, capture}, interventions)
//   for (let id = engine.nextToken(false); id >= 0; id = engine.nextToken(stopRequested)) {...}
//   engine.stopReason()   // 'max-tokens' | 'end-of-text' | 'stopped' | 'context-full'
//   engine.conversation() // Int32Array: the prompt and every sampled token
// By hand (tests, warm-up, benchmarks): engine.reset(); engine.setCapture(on);
//   engine.setSampling(temp, topK, topP, seed); engine.prefill(ids); engine.sample(); engine.step(id)
// Interventions: {ablateHeads: [[layer, head], ...], meanAblation, headMeans: Float32Array
//   [n_layer, n_embd], skipAttn: [layer, ...], skipMlp, noResidual, postNorm,
//   patches: [{layer, position, value: Float32Array[n_embd]}]}, every field optional, {}: plain.
//   engine.setInterventions(spec)  // later runs; meanAblation: means over the captured positions
//   engine.rerun()                 // the conversation again under them, reusing the cache; returns
//                                  // the first block re-run; engine.firstChangedBlock()
// The jobs take the page's interventions (meanAblation: means over the generation's prompt in the
// plain model) and give the conversation back captured under them:
//   engine.experiment(promptIds, interventions, position, settings)
//     -> {position, fromBlock, before, after: Float32Array [n_vocab], textBefore, textAfter}
//   engine.startHeadSweep(position, target, interventions) -> {position, target, base, total}
//   engine.startPatching(cleanIds, corruptedIds, interventions)
//     -> {positions, total, answer, other, cleanDiff, corruptedDiff}
//   engine.startPathPatch(cleanIds, corruptedIds, receivers, target, contrast, interventions)
//     -> {positions, total, target, contrast, clean, corrupt}: path patching's sweep (src/lab/
//     path_patch.h), every head a sender; receivers 'logits' or 'L.H.q|k|v,...'; target -1: the
//     clean run's top token; contrast -1: none; cells: (layer, head, m_patched - m_clean)
//   engine.startSenderPaths(cleanIds, corruptedIds, layer, head, target, contrast, interventions)
//     -> as startPathPatch: one sender's paths alone, cells (n_layer, 0) for the logits, then
//     every later head (its q, k and v together)
//   engine.pathPatch(cleanIds, corruptedIds, layer, head, receivers, target, contrast)
//     -> {patched, clean, corrupt, target, contrast}: one sender
//   while (engine.continueJob() < total && !cancelled) {...}   // ~4 prefills of work per call
//   engine.jobResults(from) -> {layers, indices: Int32Array, values: Float64Array}; engine.endJob()
//   engine.attributeConversation(interventions, position, target), engine.attribute(ids, position,
//     target, contrast) -> {position, target, contrast, names, values: Float64Array, logit}
// Head detection (lab/head_scores.h): engine.defaultHeadIds() -> Int32Array [50] (`gpt2 heads`'s);
//   engine.detectHeads(ids) -> {repeat, nLayer, nHead, prev, dup, induction: Float64Array
//   [n_layer * n_head], uniform: {prev, dup, induction}}; the conversation becomes [50256, ids, ids],
//   captured, run under the interventions set last
// The quantization lens (lab/compare.h): engine.quantizeSecond('q8_0' | 'q4_0' | 'f16' | 'f32')
//   -> {weight_type, file_bytes}: the loaded model re-encoded by gpt2-convert's code, held beside it
//   (its bytes owned, freed by dropSecond() or the next load); engine.compareSecond(ids) ->
//   {positions, agree, cos, rel, kl, topA, topB, headDrift, attribution: {target, names, a, b}};
//   the conversation becomes ids, captured, plain
// Gradients (src/lab/gradients.h) under the interventions set last; the conversation is run
// again afterwards, captured:
//   engine.saliency(position, target, contrast, method ('grad' | 'ig'), steps) (-1: the last
//     position, the most probable target, no contrast) -> {position, target, contrast, values:
//     Float64Array [T], total, delta}
//   engine.attributionPatching(cleanIds, corruptedIds, target, contrast) -> {target, contrast,
//     tokens, heads: Float64Array [n_layer * n_head], residPre: Float64Array [n_layer * T],
//     metric, metricCorrupt}
//   engine.scoreSaliency(layer, head, query, key) -> {layer, head, query, key, values:
//     Float64Array [T], total, score}: gradient x input of that attention score (pre-softmax)
//   engine.atpExact(cleanIds, corruptedIds, kind ('head' | 'resid'), layer, index, target,
//     contrast) -> {target, contrast, value, metric, metricPatched}: one attribution patching cell
//     run exactly (head `index`'s output, or the stream entering `layer` at position `index`)
// Probes of a captured plain run: engine.logProbs(position, ids), engine.ablatedLogProbs(
//   [[layer, head], ...], position, target, means), engine.patchedLogProbsAt(layer, positions,
//   stream [position(), n_embd], ids) -> Float64Array; engine.headMeans()
// Reading the capture (src/model/capture.h): attention(layer, p) VIEW [n_head, p + 1],
//   headAttention(layer, head, p) VIEW [p + 1], mlpActivations(layer, p) VIEW [n_ff],
//   residual(index) VIEW [P, n_embd] (0: embedding, l + 1: after block l), residualNorms(),
//   layerNormStats(), sublayerNorms(), topProbs(p), logitLens(begin, end, k, layerBegin, layerEnd), finalProbs(p),
//   blockTimes() (ms per block of the last prefill), capturedPositions(), position()
//
// Sparse autoencoders (lab/features.h; the SAE GGUF from gpt2-convert --sae or Converter.planSae):
//   engine.loadSae(ggufBytes) -> {id, hook, layer, point, dSae, architecture, k, normalize, bytes}
//   (the engine keeps its own copy); engine.dropSae(id); engine.saes() -> [those objects]
//   engine.saeFeatures(id, position, k) -> {features: Int32Array, activations: Float32Array
//   (descending, zeros left out), explained}; engine.saeStrip(id, feature) -> Float32Array
//   [captured positions]; engine.saeLogitWeights(id, [feature, ...], k) -> [{promoted,
//   promotedValues, suppressed, suppressedValues}, ...] (W_dec[F] @ W_U, one product for all the
//   features). Interventions take
//   sae: [{id, steer: [[feature, alpha], ...], clamp: [[feature, value], ...]}].
// Converting a Hugging Face GPT-2 checkpoint to GGUF in the page, with gpt2-convert's own code
// (its binding: converter.cc):
//   const c = new Module.Converter();
//   c.setConfig(configJsonText); c.setVocabulary(vocabJsonText, mergesText);
//   c.beginCheckpoint(totalBytes); for (chunk of download) c.appendChunk(chunk);
//   const {tensors, bytes, name} = c.plan('q8_0');  // parse and check everything, lay out output
//   while (c.convertNext() < tensors) {...}          // one tensor per call
//   const gguf = c.takeOutput();  // Uint8Array copy of the GGUF; frees the converter's memory
// or a SAELens SAE (convert/sae_convert.h): c.setSaeConfig(cfgJsonText); beginCheckpoint/appendChunk
//   with sae_weights.safetensors; const {tensors, bytes} = c.planSae('q8_0'); convertNext; takeOutput.
// or streamed, never holding the checkpoint (GPT-2 medium, large, XL by HTTP Range requests):
//   const end = c.headerEnd(first8Bytes, fileSize);     // bytes of the file before the data
//   const {tensors, sourceBytes, name} = c.beginStream(firstEndBytes, fileSize, 'q8_0');
//   for (let r; (r = c.nextRange()) !== null;) {        // {offset, bytes} of the file
//     for (chunk of that range) c.appendPiece(chunk);
//     const {fed, tensorsDone, outputBytes} = c.feedPiece();
//   }
//   const gguf = c.takeOutput();
//
// A VIEW is a typed array over wasm memory, valid only until the next call into the engine (a
// call may grow memory, which detaches it; in the pthreads build it cannot be transferred):
// copy it with slice() first. Everything else returns a fresh copy.
#include <emscripten/bind.h>
#include <emscripten/heap.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/error.h"
#include "bindings/download_buffer.h"
#include "bindings/js_calls.h"
#include "bindings/requests_from_js.h"
#include "bindings/result_to_js.h"
#include "bindings/sae_calls.h"
#include "convert/convert.h"
#include "hwy/highway.h"
#include "kernels/kernels.h"
#include "lab/compare.h"
#include "lab/head_scores.h"
#include "lab/lab.h"

// The page is only worth shipping with SIMD128 kernels; without -msimd128 Highway silently
// compiles its scalar EMU128 fallback instead.
static_assert(HWY_TARGET == HWY_WASM, "Highway must compile for WASM (SIMD128), not EMU128");

namespace gpt2 {
namespace {

using emscripten::val;

// Each method forwards one call to the Lab (see the usage above), guarded.
#define LAB_CALL(...) Guarded([&] { RequireModel(); __VA_ARGS__; })

class Engine : public ErrorsByValue {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  std::string TakeError() { return TakeLastError(); }

  void BeginLoad(double total_bytes) {
    Guarded([&] { second_.reset(); lab_.reset(); file_bytes_.Begin(total_bytes); return 0; });
  }
  void AppendChunk(const val& bytes) { Guarded([&] { file_bytes_.Append(bytes); return 0; }); }

  val FinishLoad(int n_threads) {
    return Guarded([&] {
      file_bytes_.RequireComplete();
      lab_ = std::make_unique<Lab>(LoadGguf(file_bytes_.data(), file_bytes_.size()), n_threads);
      return Info();
    });
  }

  val Info() const {
    if (!lab_) return val::null();
    const Config& c = lab_->config();
    const GgufFile& file = lab_->file();
    const GgufValue* name = file.Find("general.name");
    const GgufTensor* qkv = file.FindTensor("blk.0.attn_qkv.weight");
#ifdef __EMSCRIPTEN_PTHREADS__
    const bool pthreads = true;
#else
    const bool pthreads = false;
#endif
    return Object({
        {"n_vocab", val(c.n_vocab)}, {"n_ctx", val(c.n_ctx)}, {"n_embd", val(c.n_embd)}, {"n_head", val(c.n_head)},
        {"n_layer", val(c.n_layer)}, {"n_ff", val(c.n_ff)}, {"kv_cache", val(std::string(c.kv_cache_name()))},
        {"kv_value_bytes", val(c.kv_bytes_per_value())},
        {"parameters", val(static_cast<double>(lab_->model().ParameterCount()))},
        {"flops_per_token", val(lab_->model().ForwardFlopsPerToken())},
        {"file_bytes", val(static_cast<double>(file_bytes_.size()))}, {"gguf_version", val(file.version())},
        {"name", val(name != nullptr && name->type == GgufValueType::kString ? name->str : std::string())},
        {"weight_type", val(std::string(qkv != nullptr ? GgmlTypeName(static_cast<uint32_t>(qkv->type)) : ""))},
        {"simd", val(std::string(RelaxedSimdKernels() ? "wasm-relaxed-simd" : "wasm-simd128"))},
        // 1 in the single-threaded module; in the pthreads one what the ThreadPool could start.
        {"threads", val(lab_->session().n_threads())}, {"pthreads", val(pthreads)}});
  }

  // --- Tokenizer and the conversation by hand ------------------------------------------------
  val Tokenize(const std::string& text) const { return LAB_CALL(return CopyToJs(lab_->tokenizer().Encode(text))); }
  val Detokenize(const val& ids) const { return LAB_CALL(return Bytes(lab_->tokenizer().Decode(List(ids)))); }
  val TokenBytes(int id) const { return LAB_CALL(return Bytes(lab_->tokenizer().TokenBytes(id))); }
  void Reset() { LAB_CALL(lab_->Reset(); return 0); }
  void SetCapture(bool on) { LAB_CALL(lab_->SetCapture(on); return 0); }
  void SetSampling(double temperature, int top_k, double top_p, double seed) {
    LAB_CALL(lab_->SetSampling(Sampling(temperature, top_k, top_p, seed)); return 0);
  }
  void Prefill(const val& ids) { LAB_CALL(lab_->Run(List(ids)); return 0); }
  void Step(int id) { LAB_CALL(lab_->Step(id); return 0); }
  int Sample() { return LAB_CALL(return lab_->Sample()); }
  int Position() const { return lab_ ? lab_->position() : 0; }
  int CapturedPositions() const { return lab_ ? lab_->capture().n_positions() : 0; }

  // --- Generation ---------------------------------------------------------------------------
  void StartGeneration(const val& ids, const val& settings, const val& interventions) {
    LAB_CALL(lab_->StartGeneration(List(ids), InterventionsFromJs(interventions), SamplingFromJs(settings),
                                   settings["maxTokens"].as<int>(), settings["capture"].isTrue());
             return 0);
  }
  int NextToken(bool stop) { return LAB_CALL(return lab_->NextToken(stop)); }
  std::string StopReasonText() const {
    static const char* const kNames[] = {"max-tokens", "end-of-text", "context-full", "stopped"};
    return lab_ ? kNames[static_cast<int>(lab_->stop_reason())] : "";
  }
  val Conversation() const { return LAB_CALL(return CopyToJs(lab_->conversation())); }

  // --- Reading the capture --------------------------------------------------------------------
  val Attention(int layer, int p) const {
    return LAB_CALL(return ViewToJs(lab_->capture().Attention(layer, p), size_t(lab_->config().n_head) * (p + 1)));
  }
  val HeadAttention(int layer, int head, int p) const {
    return LAB_CALL(return ViewToJs(lab_->capture().HeadAttention(layer, head, p), size_t(p) + 1));
  }
  val MlpActivations(int layer, int p) const {
    return LAB_CALL(return ViewToJs(lab_->capture().MlpActivations(layer, p), size_t(lab_->config().n_ff)));
  }
  val Residual(int index) const {
    return LAB_CALL(const std::vector<float>& r = lab_->capture().Residual(index);
                    return ViewToJs(r.data(), size_t(lab_->capture().n_positions()) * lab_->config().n_embd));
  }
  val ResidualNorms() const { return LAB_CALL(return CopyToJs(lab_->capture().ResidualNorms())); }
  val LayerNormStats() const { return LAB_CALL(return CopyToJs(lab_->capture().LayerNormStats())); }
  val SublayerNorms() const { return LAB_CALL(return CopyToJs(lab_->capture().SublayerNorms())); }
  val TopProbs(int p) const {
    return LAB_CALL(return Object({{"ids", CopyToJs(lab_->capture().TopIds(p), CaptureStore::kTopProbs)},
                                   {"probs", CopyToJs(lab_->capture().TopProbs(p), CaptureStore::kTopProbs)}}));
  }
  val LogitLens(int begin, int end, int top_k, int layer_begin, int layer_end) const {
    return LAB_CALL(std::vector<int> ids; std::vector<float> probs;
                    lab_->capture().LogitLensWindow(lab_->model(), begin, end, layer_begin, layer_end, top_k, &ids,
                                                    &probs);
                    return Object({{"ids", CopyToJs(ids)}, {"probs", CopyToJs(probs)}}));
  }
  val FinalProbs(int p) const { return LAB_CALL(return CopyToJs(lab_->FinalProbs(p))); }
  val BlockTimes() const { return CopyToJs(lab_ ? lab_->block_ms() : std::vector<double>()); }

  // --- Interventions, probes, jobs -------------------------------------------------------------
  void SetInterventions(const val& spec) {
    LAB_CALL(lab_->SetInterventions(InterventionsFromJs(spec), MeansOf::kCapture); return 0);
  }
  int FirstChangedBlock() const { return lab_ ? lab_->FirstChangedBlock() : 0; }
  int Rerun() { return LAB_CALL(return lab_->Rerun()); }
  val HeadMeans() const { return LAB_CALL(return CopyToJs(lab_->HeadMeans())); }
  val LogProbs(int p, const val& ids) { return LAB_CALL(return CopyToJs(lab_->LogProbs(p, List(ids)))); }
  val AblatedLogProbs(const val& heads, int p, int target, const val& means) {
    return LAB_CALL(return CopyToJs(lab_->AblatedLogProbs(HeadList(heads), p, target, List<float>(means))));
  }
  val PatchedLogProbsAt(int layer, const val& positions, const val& stream, const val& ids) {
    return LAB_CALL(return CopyToJs(lab_->PatchedLogProbs(layer, List(positions), List<float>(stream), List(ids))));
  }
  val Attribute(const val& ids, int p, int target, int contrast) {
    return LAB_CALL(return AttributionToJs(lab_->Attribute(List(ids), p, target, contrast)));
  }
  val Saliency(int p, int target, int contrast, const std::string& method, int steps) {
    return LAB_CALL(return SaliencyToJs(lab_->Saliency(SaliencyRequestOf(p, target, contrast, method, steps))));
  }
  val AttributionPatching(const val& clean, const val& corrupt, int target, int contrast) {
    return LAB_CALL(return AtpToJs(lab_->AttributionPatching(List(clean), List(corrupt), target, contrast)));
  }
  val ScoreSaliency(int layer, int head, int query, int key) {
    return LAB_CALL(return ScoreSaliencyToJs(lab_->ScoreSaliency(ScoreSpec{layer, head, query, key})));
  }
  val AtpExact(const val& clean, const val& corrupt, const std::string& kind, int layer, int index, int target,
               int contrast) {
    return LAB_CALL(return ExactPatchToJs(lab_->ExactPatch(List(clean), List(corrupt), AtpCellOf(kind), layer, index,
                                                           target, contrast)));
  }
  val AttributeConversation(const val& interventions, int p, int target) {
    return LAB_CALL(return AttributionToJs(lab_->AttributeConversation(InterventionsFromJs(interventions), p, target)));
  }
  val Experiment(const val& prompt, const val& interventions, int p, const val& settings) {
    return LAB_CALL(return ExperimentToJs(lab_->Experiment(List(prompt), InterventionsFromJs(interventions), p,
                                                           SamplingFromJs(settings), settings["maxTokens"].as<int>())));
  }
  val StartHeadSweep(int p, int target, const val& interventions) {
    return LAB_CALL(return HeadSweepStartToJs(lab_->StartHeadSweep(p, target, InterventionsFromJs(interventions))));
  }
  val StartPatching(const val& clean, const val& corrupted, const val& interventions) {
    return LAB_CALL(return PatchingStartToJs(
        lab_->StartPatching(List(clean), List(corrupted), InterventionsFromJs(interventions))));
  }
  val StartPathPatch(const val& clean, const val& corrupted, const std::string& receivers, int target, int contrast,
                     const val& interventions) {
    return LAB_CALL(return PathPatchStartToJs(lab_->StartPathPatch(List(clean), List(corrupted),
                                                                   ParsePathReceivers(receivers, lab_->config()),
                                                                   target, contrast, InterventionsFromJs(interventions))));
  }
  val StartSenderPaths(const val& clean, const val& corrupted, int layer, int head, int target, int contrast,
                       const val& interventions) {
    return LAB_CALL(return PathPatchStartToJs(lab_->StartSenderPaths(List(clean), List(corrupted), {layer, head}, target,
                                                                     contrast, InterventionsFromJs(interventions))));
  }
  val PathPatch(const val& clean, const val& corrupted, int layer, int head, const std::string& receivers, int target,
                int contrast) {
    return LAB_CALL(return PathPatchToJs(lab_->PathPatch(List(clean), List(corrupted), {layer, head},
                                                         ParsePathReceivers(receivers, lab_->config()), target,
                                                         contrast)));
  }
  int ContinueJob() { return LAB_CALL(return lab_->ContinueJob()); }
  val JobResults(int from) const {
    return LAB_CALL(return JobCellsToJs(lab_->job_results(), from));
  }
  void EndJob() { LAB_CALL(lab_->EndJob(); return 0); }
  val DefaultHeadIds() const { return LAB_CALL(return CopyToJs(gpt2::DefaultHeadIds(lab_->config().n_vocab))); }
  val QuantizeSecond(const std::string& type) {
    return LAB_CALL(second_.reset(); second_ = SecondModel::Requantized(lab_->file(), ParseConvertType(type));
                    return Object({{"weight_type", val(std::string(second_->matrix_type()))},
                                   {"file_bytes", val(double(second_->file_bytes()))}}));
  }
  void DropSecond() { second_.reset(); }
  val CompareSecond(const val& ids) {
    return LAB_CALL(if (!second_) throw Error("Make the second model first (quantizeSecond).");
                    return ComparisonToJs(CompareWithLab(*lab_, *second_, List(ids))));
  }
  val DetectHeads(const val& ids) { return LAB_CALL(return HeadScoresToJs(gpt2::DetectHeads(*lab_, List(ids)))); }
  val LoadSae(const val& bytes) { return LAB_CALL(return SaeInfoToJs(*lab_, lab_->LoadSae(BytesFromJs(bytes)))); }
  void DropSae(int id) { LAB_CALL(lab_->DropSae(id); return 0); }
  val Saes() const { return LAB_CALL(return SaeListToJs(*lab_)); }
  val SaeFeatures(int id, int p, int k) { return LAB_CALL(return SaeFeaturesToJs(lab_->SaeFeatures(id, p, k))); }
  val SaeStrip(int id, int feature) { return LAB_CALL(return CopyToJs(lab_->SaeStrip(id, feature))); }
  val SaeLogitWeights(int id, const val& features, int k) const {
    return LAB_CALL(return SaeLogitWeightsToJs(lab_->SaeLogitWeightsOf(id, List<int>(features), k)));
  }

 private:
  void RequireModel() const {
    if (!lab_) throw Error("No model is loaded yet.");
  }
  static val Bytes(const std::string& bytes) {  // raw bytes, maybe partial UTF-8
    return CopyToJs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }

  // Declared first so it is destroyed last: the Lab's GgufFile and Model point into it.
  DownloadBuffer file_bytes_{"The model", "beginLoad"};
  std::unique_ptr<Lab> lab_;
  std::unique_ptr<SecondModel> second_;  // the quantization lens's other model (after lab_: freed first)
};

int EndOfTextId() { return kEndOfText; }

// {heapBytes, mallocBytes, stackAddress}: wasm memory's size, the bytes malloc has handed out and
// not taken back (dlmalloc's mallinfo), and the address of a local here (the stack grows down, so
// a smaller one means frames were left on the stack). For tests that check a loop of calls leaks
// nothing (tests/web/embind.test.mjs) and for the page's long-session test.
val MemoryStats() {
  const struct mallinfo m = mallinfo();
  volatile int local = 0;
  return Object({{"heapBytes", val(static_cast<double>(emscripten_get_heap_size()))},
                 {"mallocBytes", val(static_cast<double>(m.uordblks))},
                 {"stackAddress", val(static_cast<double>(reinterpret_cast<uintptr_t>(&local)))}});
}

}  // namespace
}  // namespace gpt2

EMSCRIPTEN_BINDINGS(gpt2_engine) {
  using gpt2::Engine;
  emscripten::function("endOfTextId", &gpt2::EndOfTextId);
  emscripten::function("memoryStats", &gpt2::MemoryStats);
  emscripten::class_<Engine>("Engine")
      .constructor<>()
      .function("takeError", &Engine::TakeError)
      .function("beginLoad", &Engine::BeginLoad)
      .function("appendChunk", &Engine::AppendChunk)
      .function("finishLoad", &Engine::FinishLoad)
      .function("info", &Engine::Info)
      .function("tokenize", &Engine::Tokenize)
      .function("detokenize", &Engine::Detokenize)
      .function("tokenBytes", &Engine::TokenBytes)
      .function("reset", &Engine::Reset)
      .function("setCapture", &Engine::SetCapture)
      .function("setSampling", &Engine::SetSampling)
      .function("prefill", &Engine::Prefill)
      .function("step", &Engine::Step)
      .function("sample", &Engine::Sample)
      .function("position", &Engine::Position)
      .function("capturedPositions", &Engine::CapturedPositions)
      .function("startGeneration", &Engine::StartGeneration)
      .function("nextToken", &Engine::NextToken)
      .function("stopReason", &Engine::StopReasonText)
      .function("conversation", &Engine::Conversation)
      .function("attention", &Engine::Attention)
      .function("headAttention", &Engine::HeadAttention)
      .function("mlpActivations", &Engine::MlpActivations)
      .function("residual", &Engine::Residual)
      .function("residualNorms", &Engine::ResidualNorms)
      .function("layerNormStats", &Engine::LayerNormStats)
      .function("sublayerNorms", &Engine::SublayerNorms)
      .function("topProbs", &Engine::TopProbs)
      .function("logitLens", &Engine::LogitLens)
      .function("finalProbs", &Engine::FinalProbs)
      .function("blockTimes", &Engine::BlockTimes)
      .function("setInterventions", &Engine::SetInterventions)
      .function("firstChangedBlock", &Engine::FirstChangedBlock)
      .function("rerun", &Engine::Rerun)
      .function("headMeans", &Engine::HeadMeans)
      .function("logProbs", &Engine::LogProbs)
      .function("ablatedLogProbs", &Engine::AblatedLogProbs)
      .function("patchedLogProbsAt", &Engine::PatchedLogProbsAt)
      .function("attribute", &Engine::Attribute)
      .function("attributeConversation", &Engine::AttributeConversation)
      .function("saliency", &Engine::Saliency)
      .function("attributionPatching", &Engine::AttributionPatching)
      .function("scoreSaliency", &Engine::ScoreSaliency)
      .function("atpExact", &Engine::AtpExact)
      .function("experiment", &Engine::Experiment)
      .function("startHeadSweep", &Engine::StartHeadSweep)
      .function("startPatching", &Engine::StartPatching)
      .function("startPathPatch", &Engine::StartPathPatch)
      .function("startSenderPaths", &Engine::StartSenderPaths)
      .function("pathPatch", &Engine::PathPatch)
      .function("continueJob", &Engine::ContinueJob)
      .function("jobResults", &Engine::JobResults)
      .function("endJob", &Engine::EndJob)
      .function("defaultHeadIds", &Engine::DefaultHeadIds)
      .function("detectHeads", &Engine::DetectHeads)
      .function("quantizeSecond", &Engine::QuantizeSecond)
      .function("dropSecond", &Engine::DropSecond)
      .function("compareSecond", &Engine::CompareSecond)
      .function("loadSae", &Engine::LoadSae)
      .function("dropSae", &Engine::DropSae)
      .function("saes", &Engine::Saes)
      .function("saeFeatures", &Engine::SaeFeatures)
      .function("saeStrip", &Engine::SaeStrip)
      .function("saeLogitWeights", &Engine::SaeLogitWeights);
}
