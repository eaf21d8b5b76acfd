// The whole JavaScript surface of the engine, declared once at the bottom of this file: every
// method of Engine (one LAB_METHOD line each, forwarding to src/lab/lab.h's Lab, which documents
// what each does), the fields of every result (a Shape: a plain JS object; `array` fields are
// fresh typed arrays) and of every request object (a RequestOf table below: each field optional,
// one it does not name an error). The caller is the page's Web Worker (web/worker/worker-jobs.js
// and its parts). Every method throws a JS Error with the engine's message on failure (returned by
// value: ErrorsByValue in js_calls.h, rethrown by engine-errors.js).
//   engine.beginLoad(totalBytes); engine.appendChunk(uint8Array) ...; engine.finishLoad(nThreads)
//   engine.startGeneration(ids, {temperature, topK, topP, seed, maxTokens, capture}, interventions)
//   for (let id = engine.nextToken(false); id >= 0; id = engine.nextToken(stopRequested)) {...}
// Interventions: {ablateHeads: [[layer, head], ...], skipAttn: [layer, ...], sae: [{id, steer:
//   [[feature, alpha], ...], clamp}], ...}. setInterventions: for later runs (means over the
//   capture); setInterventionsOverPrompt, jobs and experiments take the page's (means over the
//   prompt) and give the conversation back captured under them (src/lab/conversation.h's Scope).
//   A job (one at a time, the graph's too): start..., then continueJob() (continueGraph()) until
//   done or cancelled, jobResults, endJob().
// A VIEW (attention, headAttention, mlpActivations, residual) is a typed array over wasm memory,
// valid until the next call into the engine (which may grow memory): copy it with slice().
#include <emscripten/bind.h>
#include <emscripten/heap.h>
#include <emscripten/threading.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "bindings/js_calls.h"
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

// --- Requests: each field named once (js_calls.h's Request; the forms at the top of this file) --

struct SamplingSettings {  // startGeneration's and experiment's (capture: startGeneration's only)
  SamplingParams p;
  int max_tokens = 0;
  bool capture = false;
};

template <>
HeadRef ReadJs<HeadRef>(const val& v, const std::string& where) {  // [layer, head]
  if (!IsArray(v) || v["length"].as<int>() != 2)
    throw Error(where + " must be a pair [layer, head]");
  return {ReadJs<int>(v[0], where + "[0]"), ReadJs<int>(v[1], where + "[1]")};
}
template <>
const Request<ResidPatch>& RequestOf() {
  static const Request<ResidPatch> r = Request<ResidPatch>()
                                           .field("layer", &ResidPatch::layer)
                                           .field("position", &ResidPatch::position)
                                           .field("value", &ResidPatch::value);
  return r;
}
template <>
const Request<SaeIntervention>& RequestOf() {  // steer and clamp: [[feature, value], ...]
  static const Request<SaeIntervention> r = Request<SaeIntervention>()
                                                .field("id", &SaeIntervention::id)
                                                .field("steer", &SaeIntervention::steer)
                                                .field("clamp", &SaeIntervention::clamp);
  return r;
}
template <>
const Request<Interventions>& RequestOf() {  // the model's; LabInterventions adds the lab's own
  using I = Interventions;
  static const Request<I> r = Request<I>()
                                  .field("ablateHeads", &I::ablate_heads)
                                  .field("headMeans", &I::head_means)
                                  .field("skipAttn", &I::skip_attn)
                                  .field("skipMlp", &I::skip_mlp)
                                  .field("noResidual", &I::no_residual)
                                  .field("postNorm", &I::post_norm)
                                  .field("patches", &I::patches);
  return r;
}
template <>
const Request<LabInterventions>& RequestOf() {
  using L = LabInterventions;
  static const Request<L> r = Request<L>()
                                  .fields(&L::iv, RequestOf<Interventions>())
                                  .field("meanAblation", &L::mean_ablation)
                                  .field("sae", &L::sae);
  return r;
}
template <>
const Request<GraphOptions>& RequestOf() {  // targets: logit ids (none: the most probable)
  static const Request<GraphOptions> r =
      Request<GraphOptions>()
          .field("targets", &GraphOptions::targets)
          .field("maxFeatureNodes", &GraphOptions::max_feature_nodes);
  return r;
}
template <>
const Request<DashboardOptions>& RequestOf() {  // the CLI's flags' defaults when left out
  using O = DashboardOptions;
  static const Request<O> r = Request<O>()
                                  .field("context", &O::context)
                                  .field("maxTokens", &O::max_tokens)
                                  .field("top", &O::top)
                                  .field("bands", &O::bands)
                                  .field("perBand", &O::per_band)
                                  .field("seed", &O::seed);
  return r;
}
template <>
const Request<DashboardRequest>& RequestOf() {  // features: [[layer, feature], ...]
  using D = DashboardRequest;
  static const Request<D> r = Request<D>()
                                  .fields(&D::options, RequestOf<DashboardOptions>())
                                  .field("corpus", &D::corpus)
                                  .field("model", &D::model)
                                  .field("dictionary", &D::dictionary)
                                  .field("blocks", &D::blocks)
                                  .field("features", &D::features);
  return r;
}
template <>
const Request<SamplingParams>& RequestOf() {  // setSampling's; the Lab checks the ranges
  using P = SamplingParams;
  static const Request<P> r = Request<P>()
                                  .field("temperature", &P::temperature)
                                  .field("topK", &P::top_k)
                                  .field("topP", &P::top_p)
                                  .field("seed", &P::seed);
  return r;
}
template <>
const Request<SamplingSettings>& RequestOf() {
  using S = SamplingSettings;
  static const Request<S> r = Request<S>()
                                  .fields(&S::p, RequestOf<SamplingParams>())
                                  .field("maxTokens", &S::max_tokens)
                                  .field("capture", &S::capture);
  return r;
}

namespace {

LabInterventions InterventionsFromJs(const val& spec) {
  return ReadJs<LabInterventions>(spec, "interventions");
}
SamplingSettings SettingsFromJs(const val& s) {
  return ReadJs<SamplingSettings>(s, "sampling settings");
}

std::vector<uint8_t> BytesFromJs(const val& bytes) {
  return ReadJs<std::vector<uint8_t>>(bytes, "bytes");
}

// --- Results that are not a Shape ----------------------------------------------------------

template <typename T>
val ArrayOf(const std::vector<T>& items) {  // a JS array of Shapes
  val out = val::array();
  for (const T& item : items) out.call<void>("push", val(item));
  return out;
}

val Bytes(const std::string& bytes) {  // raw bytes, maybe partial UTF-8
  return CopyToJs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Holds the model's file, its Lab and the lens's second model; the methods of the JS API are the
// lambdas registered at the bottom, each forwarding one call to the Lab through With().
class Engine : public ErrorsByValue {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;

  void BeginLoad(double total_bytes) {
    second_.reset();
    lab_.reset();
    file_bytes_.Begin(total_bytes);
  }
  void AppendChunk(const val& bytes) { AppendFromJs(file_bytes_, bytes); }
  val FinishLoad(int n_threads) {
    file_bytes_.RequireComplete();
    lab_ = std::make_unique<Lab>(LoadGguf(file_bytes_.data(), file_bytes_.size()), n_threads);
    return Info();
  }
  val Info() const {
    if (!lab_) return val::null();
    const Config& c = lab_->config();
    const GgufValue* name = lab_->file().Find("general.name");
    const GgufTensor* qkv = lab_->file().FindTensor("blk.0.attn_qkv.weight");
    return Object(
        {{"n_vocab", val(c.n_vocab)},
         {"n_ctx", val(c.n_ctx)},
         {"n_embd", val(c.n_embd)},
         {"n_head", val(c.n_head)},
         {"n_layer", val(c.n_layer)},
         {"n_ff", val(c.n_ff)},
         {"kv_cache", val(std::string(c.kv_cache_name()))},
         {"kv_value_bytes", val(c.kv_bytes_per_value())},
         {"parameters", val(static_cast<double>(lab_->model().ParameterCount()))},
         {"flops_per_token", val(lab_->model().ForwardFlopsPerToken())},
         {"file_bytes", val(static_cast<double>(file_bytes_.size()))},
         {"gguf_version", val(lab_->file().version())},
         {"name",
          val(name != nullptr && name->type == GgufValueType::kString ? name->str : std::string())},
         {"weight_type",
          val(std::string(qkv != nullptr ? GgmlTypeName(static_cast<uint32_t>(qkv->type)) : ""))},
         {"simd", val(std::string(RelaxedSimdKernels() ? "wasm-relaxed-simd" : "wasm-simd128"))},
         {"int8_prefill",
          val(Int8DotPathName(Int8DotPath::kAuto))},  // which multiply the probe chose
         // 1 in the single-threaded module; in the pthreads one what the ThreadPool could start.
         {"threads", val(lab_->session().n_threads())},
         {"pthreads", val(emscripten_has_threading_support() != 0)}});
  }

  // f(lab) guarded: its error, or that no model is loaded, reported by value.
  template <typename F>
  auto With(F f) -> decltype(f(std::declval<Lab&>())) {
    return Guarded([&] {
      if (!lab_) throw Error("No model is loaded yet.");
      return f(*lab_);
    });
  }
  const Lab* lab() const { return lab_.get(); }

  // The quantization lens's other model: the loaded one re-encoded, held beside it.
  val QuantizeSecond(const std::string& type) {
    second_.reset();
    second_ = SecondModel::Requantized(lab_->file(), ParseConvertType(type));
    return Object({{"weight_type", val(std::string(second_->matrix_type()))},
                   {"file_bytes", val(double(second_->file_bytes()))}});
  }
  SecondModel& Second() {
    if (!second_) throw Error("Make the second model first (quantizeSecond).");
    return *second_;
  }
  void DropSecond() { second_.reset(); }

 private:
  // Declared first so it is destroyed last: the Lab's GgufFile and Model point into it.
  ArrivingFile file_bytes_{"The model", "beginLoad"};
  std::unique_ptr<Lab> lab_;
  std::unique_ptr<SecondModel> second_;  // after lab_: freed first
};

val LogitLensOf(const Lab& l, int begin, int end, int k, int layer_begin,
                int layer_end) {  // {ids, probs}
  std::vector<int> ids;
  std::vector<float> probs;
  l.capture().LogitLensWindow(l.model(), begin, end, layer_begin, layer_end, k, &ids, &probs);
  return Object({{"ids", CopyToJs(ids)}, {"probs", CopyToJs(probs)}});
}

// {heapBytes, mallocBytes (dlmalloc's, in use), stackAddress (of a local: smaller means frames
// were left on the stack)}: for the tests that check a loop of calls leaks nothing.
val MemoryStats() {
  const struct mallinfo m = mallinfo();
  volatile int local = 0;
  return Object({{"heapBytes", val(static_cast<double>(emscripten_get_heap_size()))},
                 {"mallocBytes", val(static_cast<double>(m.uordblks))},
                 {"stackAddress", val(static_cast<double>(reinterpret_cast<uintptr_t>(&local)))}});
}

val ComponentNames(const Attribution& a) {
  val names = val::array();
  for (const AttributionComponent& c : a.components) names.call<void>("push", val(c.name));
  return names;
}

}  // namespace
}  // namespace gpt2

EMSCRIPTEN_BINDINGS(gpt2_engine) {
  using namespace gpt2;
  using emscripten::val;
  emscripten::function(
      "endOfTextId", +[] { return kEndOfText; });
  emscripten::function("memoryStats", &MemoryStats);

  // Results.
  Shape<Attribution>("Attribution")
      .field("position", &Attribution::position)
      .field("target", &Attribution::target)
      .field("contrast", &Attribution::contrast)
      .computed("names", &ComponentNames)
      .computed(
          "values",
          +[](const Attribution& a) { return Column(a.components, &AttributionComponent::value); })
      .field("logit", &Attribution::logit);
  // "Run again"'s numbers; the two [n_vocab] distributions they come from stay in C++.
  Shape<ExperimentResult>("ExperimentResult")
      .field("position", &ExperimentResult::position)
      .field("fromBlock", &ExperimentResult::from_block)
      .field("kl", &ExperimentResult::kl)
      .array<&ExperimentResult::top_before>("topBefore")
      .array<&ExperimentResult::top_before_probs>("topBeforeProbs")
      .array<&ExperimentResult::top_after>("topAfter")
      .array<&ExperimentResult::top_after_probs>("topAfterProbs")
      .array<&ExperimentResult::top_after_probs_before>("topAfterProbsBefore")
      .array<&ExperimentResult::text_before>("textBefore")
      .array<&ExperimentResult::text_after>("textAfter");
  Shape<HeadSweepStart>("HeadSweepStart")
      .field("position", &HeadSweepStart::position)
      .field("target", &HeadSweepStart::target)
      .field("base", &HeadSweepStart::base)
      .field("total", &HeadSweepStart::total);
  Shape<PatchingStart>("PatchingStart")
      .field("positions", &PatchingStart::positions)
      .field("total", &PatchingStart::total)
      .field("answer", &PatchingStart::answer)
      .field("other", &PatchingStart::other)
      .field("cleanDiff", &PatchingStart::clean_diff)
      .field("corruptedDiff", &PatchingStart::corrupted_diff);
  Shape<PathPatchStart>("PathPatchStart")
      .field("positions", &PathPatchStart::positions)
      .field("total", &PathPatchStart::total)
      .field("target", &PathPatchStart::target)
      .field("contrast", &PathPatchStart::contrast)
      .field("clean", &PathPatchStart::clean)
      .field("corrupt", &PathPatchStart::corrupt);
  Shape<SaliencyResult>("SaliencyResult")
      .field("position", &SaliencyResult::position)
      .field("target", &SaliencyResult::target)
      .field("contrast", &SaliencyResult::contrast)
      .array<&SaliencyResult::values>("values")
      .field("total", &SaliencyResult::total)
      .field("delta", &SaliencyResult::delta);
  Shape<AtpResult>("AtpResult")
      .field("target", &AtpResult::target)
      .field("contrast", &AtpResult::contrast)
      .field("tokens", &AtpResult::tokens)
      .array<&AtpResult::heads>("heads")
      .array<&AtpResult::resid_pre>("residPre")
      .field("metric", &AtpResult::metric_clean)
      .field("metricCorrupt", &AtpResult::metric_corrupt);
  Shape<ScoreSaliencyResult>("ScoreSaliencyResult")
      .computed(
          "layer", +[](const ScoreSaliencyResult& r) { return r.spec.layer; })
      .computed(
          "head", +[](const ScoreSaliencyResult& r) { return r.spec.head; })
      .computed(
          "query", +[](const ScoreSaliencyResult& r) { return r.spec.query; })
      .computed(
          "key", +[](const ScoreSaliencyResult& r) { return r.spec.key; })
      .array<&ScoreSaliencyResult::values>("values")
      .field("total", &ScoreSaliencyResult::total)
      .field("score", &ScoreSaliencyResult::score);
  Shape<ExactPatchResult>("ExactPatchResult")
      .field("target", &ExactPatchResult::target)
      .field("contrast", &ExactPatchResult::contrast)
      .field("value", &ExactPatchResult::value)
      .field("metric", &ExactPatchResult::metric_clean)
      .field("metricPatched", &ExactPatchResult::metric_patched);
  Shape<DashboardPiece>("DashboardPiece")
      .computed(
          "text", +[](const DashboardPiece& p) { return Bytes(p.text); })  // UTF-8 bytes
      .array<&DashboardPiece::layers>("layers")
      .array<&DashboardPiece::indices>("indices")
      .array<&DashboardPiece::max_acts>("maxActs")
      .array<&DashboardPiece::begins>("begins")
      .array<&DashboardPiece::ends>("ends");
  Shape<UniformScores>("UniformScores")
      .field("prev", &UniformScores::prev)
      .field("dup", &UniformScores::dup)
      .field("induction", &UniformScores::induction);
  Shape<HeadScores>("HeadScores")
      .field("repeat", &HeadScores::repeat)
      .field("nLayer", &HeadScores::n_layer)
      .field("nHead", &HeadScores::n_head)
      .array<&HeadScores::prev>("prev")
      .array<&HeadScores::dup>("dup")
      .array<&HeadScores::induction>("induction")
      .computed(
          "uniform", +[](const HeadScores& s) { return UniformHeadScores(s.repeat); });
  Shape<Comparison>("Comparison")
      .field("positions", &Comparison::positions)
      .field("agree", &Comparison::agree)
      .computed(
          "cos", +[](const Comparison& r) { return Column(r.blocks, &BlockDrift::cos); })
      .computed(
          "rel", +[](const Comparison& r) { return Column(r.blocks, &BlockDrift::rel); })
      .computed(
          "kl", +[](const Comparison& r) { return Column(r.blocks, &BlockDrift::kl); })
      .array<&Comparison::top_a>("topA")
      .array<&Comparison::top_b>("topB")
      .array<&Comparison::head_drift>("headDrift")
      .computed(
          "attribution", +[](const Comparison& r) {  // {target, names, a, b}: A's and B's values
            return Object(
                {{"target", val(r.attribution_a.target)},
                 {"names", ComponentNames(r.attribution_a)},
                 {"a", Column(r.attribution_a.components, &AttributionComponent::value)},
                 {"b", Column(r.attribution_b.components, &AttributionComponent::value)}});
          });
  Shape<SaeInfo>("SaeInfo")
      .field("id", &SaeInfo::id)
      .field("hook", &SaeInfo::hook)
      .field("layer", &SaeInfo::layer)
      .field("point", &SaeInfo::point)
      .field("dSae", &SaeInfo::d_sae)
      .field("architecture", &SaeInfo::architecture)
      .field("k", &SaeInfo::k)
      .field("normalize", &SaeInfo::normalize)
      .field("bytes", &SaeInfo::bytes);
  Shape<SaeFeatureList>("SaeFeatureList")
      .array<&SaeFeatureList::features>("features")
      .array<&SaeFeatureList::activations>("activations")
      .field("explained", &SaeFeatureList::explained);
  Shape<SaeLogitWeights>("SaeLogitWeights")
      .array<&SaeLogitWeights::promoted>("promoted")
      .array<&SaeLogitWeights::promoted_values>("promotedValues")
      .array<&SaeLogitWeights::suppressed>("suppressed")
      .array<&SaeLogitWeights::suppressed_values>("suppressedValues");
  Shape<JobProgress>("JobProgress")
      .computed("encoding", &GraphJob::Encoding)  // the graph's
      .computed(
          "phase", +[](const JobProgress& p) { return std::string(p.phase); })
      .field("done", &JobProgress::done)
      .field("total", &JobProgress::total)
      .field("finished", &JobProgress::finished);
  Shape<GraphCheck>("GraphCheck")
      .field("predicted", &GraphCheck::predicted)
      .field("exact", &GraphCheck::exact);
  Shape<GraphFeatureCard>("GraphFeatureCard")
      .array<&GraphFeatureCard::activations>("activations")
      .array<&GraphFeatureCard::promoted>("promoted")
      .array<&GraphFeatureCard::promoted_weights>("promotedWeights")
      .array<&GraphFeatureCard::suppressed>("suppressed")
      .array<&GraphFeatureCard::suppressed_weights>("suppressedWeights");
  Shape<QkPart>("QkPart")
      .computed("kind", &QkPartKindName)
      .field("layer", &QkPart::layer)
      .field("feature", &QkPart::feature)
      .field("activation", &QkPart::activation)
      .field("score", &QkPart::score);
  Shape<QkPair>("QkPair")
      .field("query", &QkPair::query_part)
      .field("key", &QkPair::key_part)
      .field("score", &QkPair::score);
  Shape<QkAttribution>("QkAttribution")
      .field("score", &QkAttribution::score)
      .field("probability", &QkAttribution::probability)
      .field("queryRest", &QkAttribution::query_rest)
      .field("keyRest", &QkAttribution::key_rest)
      .computed(
          "pairs", +[](const QkAttribution& r) { return ArrayOf(r.pairs); })
      .computed(
          "queryParts", +[](const QkAttribution& r) { return ArrayOf(r.query_parts); })
      .computed(
          "keyParts", +[](const QkAttribution& r) { return ArrayOf(r.key_parts); });
  // The methods. LAB_METHOD(name, (, arguments...), what it returns from the Lab `l`): one line
  // each.
#define LAB_METHOD(js_name, params, ...) \
  function(                              \
      js_name,                           \
      +[](Engine& e GPT2_UNPAREN params) { return e.With([&](Lab& l) { return __VA_ARGS__; }); })
  emscripten::class_<Engine>("Engine")
      .constructor<>()
      .function(
          "takeError", +[](Engine& e) { return e.TakeError(); })
      .GUARDED_METHOD(Engine, e, "beginLoad", (, double total_bytes), e.BeginLoad(total_bytes))
      .GUARDED_METHOD(Engine, e, "appendChunk", (, val bytes), e.AppendChunk(bytes))
      .GUARDED_METHOD(Engine, e, "finishLoad", (, int n_threads), e.FinishLoad(n_threads))
      .function("info", &Engine::Info)
      // The tokenizer, the conversation by hand, generation.
      .LAB_METHOD("tokenize", (, std::string text), CopyToJs(l.tokenizer().Encode(text)))
      .LAB_METHOD("detokenize", (, val ids), Bytes(l.tokenizer().Decode(List(ids))))
      .LAB_METHOD("tokenBytes", (, int id), Bytes(l.tokenizer().TokenBytes(id)))
      .LAB_METHOD("reset", (), l.Reset())
      .LAB_METHOD("setCapture", (, bool on), l.SetCapture(on))
      .LAB_METHOD("setSampling", (, val settings),
                  l.SetSampling(ReadJs<SamplingParams>(settings, "sampling settings")))
      .LAB_METHOD("prefill", (, val ids), l.Run(List(ids)))
      .LAB_METHOD("step", (, int id), l.Step(id))
      .LAB_METHOD("sample", (), l.Sample())
      .function(
          "position", +[](Engine& e) { return e.lab() ? e.lab()->position() : 0; })
      .function(
          "capturedPositions",
          +[](Engine& e) { return e.lab() ? e.lab()->capture().n_positions() : 0; })
      .LAB_METHOD("startGeneration", (, val ids, val settings, val iv),
                  [&] {
                    const SamplingSettings s = SettingsFromJs(settings);
                    l.StartGeneration(List(ids), InterventionsFromJs(iv), s.p, s.max_tokens,
                                      s.capture);
                  }())
      .LAB_METHOD("nextToken", (, bool stop), l.NextToken(stop))
      .function(
          "stopReason",
          +[](Engine& e) {
            return std::string(e.lab() ? StopReasonName(e.lab()->stop_reason()) : "");
          })
      .LAB_METHOD("conversation", (), CopyToJs(l.conversation()))
      // Reading the capture (src/model/capture.h). VIEWs: attention, headAttention,
      // mlpActivations, residual (0: the embedding, l + 1: after block l).
      .LAB_METHOD("attention", (, int layer, int p),
                  ViewToJs(l.capture().Attention(layer, p), size_t(l.config().n_head) * (p + 1)))
      .LAB_METHOD("headAttention", (, int layer, int head, int p),
                  ViewToJs(l.capture().HeadAttention(layer, head, p), size_t(p) + 1))
      .LAB_METHOD("mlpActivations", (, int layer, int p),
                  ViewToJs(l.capture().MlpActivations(layer, p), size_t(l.config().n_ff)))
      .LAB_METHOD("residual", (, int index),
                  ViewToJs(l.capture().Residual(index).data(),
                           size_t(l.capture().n_positions()) * l.config().n_embd))
      .LAB_METHOD("residualNorms", (), CopyToJs(l.capture().ResidualNorms()))
      .LAB_METHOD("layerNormStats", (), CopyToJs(l.capture().LayerNormStats()))
      .LAB_METHOD("sublayerNorms", (), CopyToJs(l.capture().SublayerNorms()))
      .LAB_METHOD("topProbs", (, int p),
                  Object({{"ids", CopyToJs(l.capture().TopIds(p), CaptureStore::kTopProbs)},
                          {"probs", CopyToJs(l.capture().TopProbs(p), CaptureStore::kTopProbs)}}))
      .LAB_METHOD("logitLens", (, int begin, int end, int k, int layer_begin, int layer_end),
                  LogitLensOf(l, begin, end, k, layer_begin, layer_end))
      .LAB_METHOD("finalProbs", (, int p), CopyToJs(l.FinalProbs(p)))
      .function(
          "blockTimes",
          +[](Engine& e) {
            return CopyToJs(e.lab() ? e.lab()->block_ms() : std::vector<double>());
          })
      // Interventions, probes, experiments.
      .LAB_METHOD("setInterventions", (, val iv),
                  l.SetInterventions(InterventionsFromJs(iv), MeansOf::kCapture))
      .LAB_METHOD("setInterventionsOverPrompt", (, val iv),
                  l.SetInterventionsOverPrompt(InterventionsFromJs(iv)))
      .function(
          "firstChangedBlock",
          +[](Engine& e) { return e.lab() ? e.lab()->FirstChangedBlock() : 0; })
      .LAB_METHOD("rerun", (), l.Rerun())
      .LAB_METHOD("headMeans", (), CopyToJs(l.HeadMeans()))
      .LAB_METHOD("logProbs", (, int p, val ids), CopyToJs(l.LogProbs(p, List(ids))))
      .LAB_METHOD("ablatedLogProbs", (, val heads, int p, int target, val means),
                  CopyToJs(l.AblatedLogProbs(ReadJs<std::vector<HeadRef>>(heads, "heads"), p,
                                             target, List<float>(means))))
      .LAB_METHOD(
          "patchedLogProbsAt", (, int layer, val positions, val stream, val ids),
          CopyToJs(l.PatchedLogProbs(layer, List(positions), List<float>(stream), List(ids))))
      .LAB_METHOD("attribute", (, val ids, int p, int target, int contrast),
                  l.Attribute(List(ids), p, target, contrast))
      .LAB_METHOD("attributeConversation", (, val iv, int p, int target),
                  l.AttributeConversation(InterventionsFromJs(iv), p, target))
      .LAB_METHOD("saliency", (, int p, int target, int contrast, std::string method, int steps),
                  l.Saliency({p, target, contrast, SaliencyMethodNamed(method), steps}))
      .LAB_METHOD("attributionPatching", (, val clean, val corrupt, int target, int contrast),
                  l.AttributionPatching(List(clean), List(corrupt), target, contrast))
      .LAB_METHOD("scoreSaliency", (, int layer, int head, int query, int key),
                  l.ScoreSaliency(ScoreSpec{layer, head, query, key}))
      .LAB_METHOD("atpExact",
                  (, val clean, val corrupt, std::string kind, int layer, int index, int target,
                   int contrast),
                  l.ExactPatch(List(clean), List(corrupt), AtpCellNamed(kind), layer, index, target,
                               contrast))
      .LAB_METHOD("experiment", (, val prompt, val iv, int p, val settings),
                  [&] {
                    const SamplingSettings s = SettingsFromJs(settings);
                    return l.Experiment(List(prompt), InterventionsFromJs(iv), p, s.p,
                                        s.max_tokens);
                  }())
      // Jobs. Path patching's receivers: 'logits' or 'L.H.q|k|v,...'; target -1: the clean run's
      // top token; contrast -1: none.
      .LAB_METHOD("startHeadSweep", (, int p, int target, val iv),
                  l.StartHeadSweep(p, target, InterventionsFromJs(iv)))
      .LAB_METHOD("startPatching", (, val clean, val corrupted, val iv),
                  l.StartPatching(List(clean), List(corrupted), InterventionsFromJs(iv)))
      .LAB_METHOD(
          "startPathPatch",
          (, val clean, val corrupted, std::string receivers, int target, int contrast, val iv),
          l.StartPathPatch(List(clean), List(corrupted), ParsePathReceivers(receivers, l.config()),
                           target, contrast, InterventionsFromJs(iv)))
      .LAB_METHOD(
          "startSenderPaths",
          (, val clean, val corrupted, int layer, int head, int target, int contrast, val iv),
          l.StartSenderPaths(List(clean), List(corrupted), {layer, head}, target, contrast,
                             InterventionsFromJs(iv)))
      .LAB_METHOD("continueJob", (), l.ContinueJob())
      .LAB_METHOD("jobResults", (, int from),  // the cells from `from` on
                  Object({{"layers", Column(l.job_results(), &JobCell::layer, from)},
                          {"indices", Column(l.job_results(), &JobCell::index, from)},
                          {"values", Column(l.job_results(), &JobCell::value, from)}}))
      .LAB_METHOD("endJob", (), l.EndJob())
      // Circuits: head detection (lab/head_scores.h), the quantization lens (lab/compare.h).
      .LAB_METHOD("defaultHeadIds", (), CopyToJs(DefaultHeadIds(l.config().n_vocab)))
      .LAB_METHOD("detectHeads", (, val ids), DetectHeads(l.conv(), List(ids)))
      .LAB_METHOD("quantizeSecond", (, std::string type), e.QuantizeSecond(type))
      .function("dropSecond", &Engine::DropSecond)
      .LAB_METHOD("compareSecond", (, val ids),
                  CompareOnConversation(l.conv(), e.Second(), List(ids)))
      // Sparse autoencoders (lab/features.h; the GGUF from gpt2-convert --sae or planSae).
      .LAB_METHOD("loadSae", (, val bytes), InfoOf(l.loaded_sae(l.LoadSae(BytesFromJs(bytes)))))
      .LAB_METHOD("dropSae", (, int id), l.DropSae(id))
      .LAB_METHOD("saes", (), ArrayOf(l.sae_infos()))
      .LAB_METHOD("saeFeatures", (, int id, int p, int k), l.SaeFeatures(id, p, k))
      .LAB_METHOD("saeStrip", (, int id, int feature), CopyToJs(l.SaeStrip(id, feature)))
      .LAB_METHOD("saeLogitWeights", (, int id, val features, int k),
                  ArrayOf(l.SaeLogitWeightsOf(id, List<int>(features), k)))
      // Attribution graphs (lab/graph.h; the transcoders from gpt2-convert --transcoders).
      .LAB_METHOD("loadTranscoders", (, val bytes), CopyToJs(l.LoadTranscoders(BytesFromJs(bytes))))
      .LAB_METHOD("dropTranscoders", (), l.DropTranscoders())
      .LAB_METHOD("startGraph", (, val prompt, val options),
                  l.StartGraph(List(prompt), ReadJs<GraphOptions>(options, "graph options")))
      .LAB_METHOD("continueGraph", (), l.ContinueGraph())  // then endJob, as any job
      .LAB_METHOD("graphJson", (, double node_threshold, double edge_threshold, bool prune),
                  l.GraphJsonText(node_threshold, edge_threshold, prune))
      .LAB_METHOD("checkGraph", (, val node_ids, double value),
                  l.CheckGraph(ReadJs<std::vector<std::string>>(node_ids, "node ids"),
                               static_cast<float>(value)))
      .LAB_METHOD("graphFeatureCard", (, int layer, int feature, int k),
                  l.FeatureCard(layer, feature, k))
      .LAB_METHOD("graphQk", (, int layer, int head, int query, int key, int k),
                  l.GraphQk({layer, head, query, key}, k))
      // Feature dashboards (lab/dashboard_file.h): then continueJob until finished (taking the
      // file's pieces between calls), endJob.
      .LAB_METHOD("startDashboard", (, val request, int sae_id),
                  l.StartDashboard(ReadJs<DashboardRequest>(request, "dashboard request"), sae_id))
      .LAB_METHOD("feedDashboard", (, val bytes), l.FeedDashboard(BytesFromJs(bytes)))
      .LAB_METHOD("endDashboardInput", (), l.EndDashboardInput())
      .LAB_METHOD("dashboardWantsInput", (), l.DashboardWantsInput())
      .LAB_METHOD("dashboardInputFull", (), l.DashboardInputFull())
      .LAB_METHOD("jobProgress", (), l.job_progress())
      .LAB_METHOD("takeDashboardPiece", (), l.TakeDashboardPiece());
#undef LAB_METHOD
}
