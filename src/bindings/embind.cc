// The whole JavaScript surface of the engine, in one file (as whisper.cpp's
// examples/whisper.wasm keeps its Embind bindings). The page's Web Worker (web/worker.js) is the
// only caller; it drives generation token by token so it can answer "stop" between tokens.
//
// Usage from JS (every method throws a JS Error carrying the engine's message on failure; the C++
// side returns the error by value, engine-errors.js throws it, see ErrorsByValue):
//   const engine = new Module.Engine();
//   engine.beginLoad(totalBytes);            // one allocation for the whole file
//   for (chunk of download) engine.appendChunk(chunk);   // Uint8Array pieces, copied in place
//   const info = engine.finishLoad(nThreads);  // parse GGUF, bind weights, build tokenizer
//   const ids = engine.tokenize("Hello");      // Int32Array (a copy)
//   engine.reset(); engine.setCapture(true); engine.setSampling(temp, topK, topP, seed);
//   engine.prefill(ids); let id = engine.sample(); engine.step(id); id = engine.sample(); ...
//   engine.attention(layer, position)          // Float32Array VIEW [H, position + 1]
//   engine.headAttention(layer, head, position)  // VIEW [position + 1]: one head's part of it
//   Interventions (src/model/run_options.h) and direct logit attribution (model/attribution.h):
//   engine.setInterventions({ablateHeads: [[0, 3]], meanAblation: false, skipAttn: [1],
//                            skipMlp: [], noResidual: [], postNorm: false,
//                            patches: [{layer, position, value}]});  // {}: the plain model
//   engine.rerun();        // the conversation again under them, reusing the cache (returns the
//                          // first block re-run); then read the views as after a prefill
//   engine.attribute(ids, position, target, contrast)   // -1 = default for the last three
//     -> {position, target, contrast, names: ["embed", "0.0", ..., "ln_f_bias"],
//         values: Float64Array, logit}; restarts the conversation with ids
//   engine.firstChangedBlock()  // first block the interventions change (n_layer: none)
//   engine.finalProbs(position)  // Float32Array [n_vocab]: the whole next-token distribution
//   engine.headMeans()     // Float32Array [n_layer, n_embd]: mean head outputs of the capture
//   engine.ablatedLogProb(layer, head, position, target, means)  // one step of "which heads
//                          // matter" (layer = n_layer: the baseline); then rerun() to go on
//   engine.ablatedLogProbs([[layer, head], ...], position, target, means)  // several at once
//   engine.patchedLogProbs(layer, position, value, ids)  // one cell of activation patching
//   engine.patchedLogProbsAt(layer, positions, stream, ids)  // several cells of one block
//   engine.blockTimes()    // Float64Array [n_layer]: ms per block in the last prefill()
//   engine.sublayerNorms() // Float32Array [n_layer, P, 4]: ln_1 out, attn out, ln_2 out, MLP out
//
// Converting a Hugging Face GPT-2 checkpoint to GGUF in the page, with gpt2-convert's own code
// (tools/common/convert.h): the checkpoint is held once, each tensor is encoded straight into
// the output, one per call, so the caller can report progress in between.
//   const c = new Module.Converter();
//   c.setConfig(configJsonText); c.setVocabulary(vocabJsonText, mergesText);
//   c.beginCheckpoint(totalBytes); for (chunk of download) c.appendChunk(chunk);
//   const {tensors, bytes, name} = c.plan('q8_0');  // parse and check everything, lay out output
//   while (c.convertNext() < tensors) {...}          // returns the tensors done so far
//   const gguf = c.takeOutput();  // Uint8Array copy of the GGUF; frees the converter's memory
//   c.delete();
//
// Lifetime of typed arrays: methods documented as returning a VIEW return a Float32Array over
// wasm memory. It is valid only until the next call into the engine: any call may allocate,
// wasm memory may then grow, and a grown memory detaches every view (length becomes 0). Copy
// (view.slice()) before calling the engine again. Everything else returns a fresh copy.
// In the pthreads build (gpt2-engine-mt.js) wasm memory is a SharedArrayBuffer: a grown shared
// memory does not detach old views, but views over it cannot be transferred with postMessage
// nor read by TextDecoder, so the same rule (copy with slice()) applies there too.
#include <emscripten/bind.h>
#include <emscripten/heap.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>
#ifdef __EMSCRIPTEN_PTHREADS__
#include <atomic>
#include <system_error>
#include <thread>
#endif

#include "base/error.h"
#include "format/gguf.h"
#include "hwy/highway.h"
#include "model/attribution.h"
#include "model/capture.h"
#include "model/config.h"
#include "model/model.h"
#include "model/observer.h"
#include "model/sampler.h"
#include "format/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tools/common/convert.h"

// The page is only worth shipping with SIMD128 kernels; without -msimd128 Highway silently
// compiles its scalar EMU128 fallback instead.
static_assert(HWY_TARGET == HWY_WASM, "Highway must compile for WASM (SIMD128), not EMU128");

namespace gpt2 {
namespace {

using emscripten::val;

// What a failing call returns in place of its result; the caller reads the error itself from
// takeError().
template <typename T>
T FailedResult() {
  return T{};
}
template <>
val FailedResult<val>() {
  return val::undefined();
}

template <typename T>
val CopyToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data)).call<val>("slice");
}

template <typename T>
val ViewToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data));
}

// Converts a JS array of non-negative integers (or undefined) to ints.
std::vector<int> IntList(const val& v) {
  if (v.isUndefined() || v.isNull()) return {};
  return emscripten::convertJSArrayToNumberVector<int>(v);
}

// [[layer, head], ...] (undefined or null: none).
std::vector<gpt2::HeadRef> HeadList(const val& v) {
  std::vector<gpt2::HeadRef> heads;
  if (v.isUndefined() || v.isNull()) return heads;
  const int n = v["length"].as<int>();
  for (int i = 0; i < n; ++i) {
    const std::vector<int> pair = IntList(v[i]);
    if (pair.size() != 2) throw gpt2::Error("heads are given as [layer, head] pairs");
    heads.push_back({pair[0], pair[1]});
  }
  return heads;
}

// A file that arrives from JavaScript in chunks (the page's download), held in one allocation,
// 64-byte aligned so GGUF's 32-byte tensor alignment holds in memory as in the file. `what` names
// the file in errors ("The model", "model.safetensors"); `begin` the call that starts it.
//
// In the pthreads module a second thread writes the buffer's pages in from its end while the
// chunks are copied in from its start. Fresh wasm memory costs the OS a page fault at the first
// write to each 4 KiB: ~12 us on the AMD EPYC guest measured here (BENCHMARKS.md), ~400 ms of
// a cached reload for GPT-2 small's 137 MB, and two threads take the faults side by side. Each
// touch is an atomic compare-exchange of 0 with 0 on one word: a write (x86's locked
// read-modify-write always writes) that leaves whatever the copy has put there. If no pool
// thread is free the copy faults the pages itself, as in the single-threaded module.
class DownloadBuffer {
 public:
  DownloadBuffer(std::string what, std::string begin) : what_(std::move(what)), begin_(std::move(begin)) {}
  DownloadBuffer(const DownloadBuffer&) = delete;
  ~DownloadBuffer() { Free(); }

  void Begin(double total_bytes) {
    Free();
    if (!(total_bytes > 0) || total_bytes > 2147483647.0) {
      throw Error(what_ + " (" + std::to_string(static_cast<int64_t>(total_bytes)) +
                  " bytes) is not something this page can load: WebAssembly memory is limited to 2 GB.");
    }
    size_ = static_cast<size_t>(total_bytes);
    data_ = static_cast<uint8_t*>(std::aligned_alloc(64, (size_ + 63) & ~size_t{63}));
    if (data_ == nullptr) {
      size_ = 0;
      throw Error("Not enough memory to hold " + what_ + " (" +
                  std::to_string(static_cast<int64_t>(total_bytes) >> 20) +
                  " MB): the browser tab could not allocate it. Close other tabs or try a smaller "
                  "model (q8_0 or q4_0).");
    }
    StartTouching();
  }

  // Copies a Uint8Array (or ArrayBuffer view) straight into place.
  void Append(const val& bytes) {
    if (data_ == nullptr) throw Error("appendChunk called before " + begin_);
    const size_t n = bytes["length"].as<size_t>();
    if (n > size_ - filled_) {
      throw Error(what_ + " download is larger than announced (" + std::to_string(size_) +
                  " bytes); the server's size information is wrong.");
    }
    val(emscripten::typed_memory_view(n, data_ + filled_)).call<void>("set", bytes);
    filled_ += n;
#ifdef __EMSCRIPTEN_PTHREADS__
    filled_progress_.store(filled_, std::memory_order_relaxed);
#endif
  }

  // Throws unless every announced byte arrived. Gives the touching thread back to the pool
  // (the session about to be made needs it).
  void RequireComplete() {
    StopTouching();
    if (data_ == nullptr) throw Error(begin_ + " was not called");
    if (filled_ != size_) {
      throw Error(what_ + " is incomplete: received " + std::to_string(filled_) + " of " +
                  std::to_string(size_) + " bytes.");
    }
  }

  void Free() {
    StopTouching();
    std::free(data_);
    data_ = nullptr;
    size_ = filled_ = 0;
  }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t filled() const { return filled_; }

 private:
#ifdef __EMSCRIPTEN_PTHREADS__
  void StartTouching() {
    stop_touching_.store(false);
    filled_progress_.store(0);
    const size_t words = size_ / sizeof(int32_t);
    int32_t* words_begin = reinterpret_cast<int32_t*>(data_);
    try {
      toucher_ = std::thread([this, words_begin, words] {
        constexpr size_t kPageWords = 4096 / sizeof(int32_t);
        for (size_t i = words; i >= kPageWords && !stop_touching_.load(std::memory_order_relaxed);) {
          i -= kPageWords;
          // Once the copy has passed this page the rest are faulted in already.
          if (i * sizeof(int32_t) < filled_at_least()) break;
          int32_t expected = 0;
          __atomic_compare_exchange_n(words_begin + i, &expected, 0, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED);
        }
      });
    } catch (const std::system_error&) {
      // No free pool thread (PTHREAD_POOL_SIZE_STRICT): the copy faults the pages in itself.
    }
  }
  void StopTouching() {
    stop_touching_.store(true);
    if (toucher_.joinable()) toucher_.join();
  }
  size_t filled_at_least() const { return filled_progress_.load(std::memory_order_relaxed); }
  std::thread toucher_;
  std::atomic<bool> stop_touching_{false};
  std::atomic<size_t> filled_progress_{0};  // filled_, as the touching thread may read it
#else
  void StartTouching() {}
  void StopTouching() {}
#endif

  const std::string what_, begin_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t filled_ = 0;
};

// The classes Embind exports report a C++ error by value: Guarded runs a call and turns its
// exception into the message TakeLastError (JS: takeError) hands over once, plus a default
// result. src/bindings/engine-errors.js (linked as --post-js) wraps every method of the exported
// classes to throw that message as the JS Error the method threw before, after the call has
// returned. A JS exception thrown through wasm frames would unwind none of them: every failing
// call used to leave its message, the arguments Embind had copied in, and its frames on wasm's
// own stack behind (about 200 bytes of heap and 88 of stack a call; the stack is 5 MB).
class ErrorsByValue {
 protected:
  template <typename F>
  auto Guarded(F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      error_ = e.what();
    } catch (const std::bad_alloc&) {
      error_ =
          "Not enough memory: the browser tab could not allocate more (WebAssembly is limited to "
          "2 GB). Try a smaller model (q8_0 or q4_0), a shorter prompt, or turn off activation "
          "capture.";
    } catch (const std::exception& e) {
      error_ = std::string("Internal error: ") + e.what();
    }
    return FailedResult<decltype(f())>();
  }

  // The message of the last failing call, cleared by reading it ("" when the call succeeded).
  std::string TakeLastError() {
    std::string message;
    message.swap(error_);
    return message;
  }

 private:
  mutable std::string error_;
};

class Engine : public ErrorsByValue {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  ~Engine() { Unload(); }

  // --- Loading ------------------------------------------------------------------------------

  // Frees any loaded model and allocates one buffer for a file of total_bytes bytes.
  void BeginLoad(double total_bytes) {
    Guarded([&] {
      Unload();
      file_bytes_.Begin(total_bytes);
      return 0;
    });
  }

  void AppendChunk(const val& bytes) {
    Guarded([&] {
      file_bytes_.Append(bytes);
      return 0;
    });
  }

  double BytesLoaded() const { return static_cast<double>(file_bytes_.filled()); }

  // Parses the file, binds the weights, reads the tokenizer and creates the session.
  val FinishLoad(int n_threads) {
    return Guarded([&] {
      file_bytes_.RequireComplete();
      std::shared_ptr<const GgufFile> file(GgufFile::Parse(file_bytes_.data(), file_bytes_.size()));
      std::unique_ptr<Model> model = Model::FromGguf(file);
      std::unique_ptr<Tokenizer> tokenizer = Tokenizer::FromGguf(*file);
      if (tokenizer->vocab_size() > model->config().n_vocab) {
        throw Error("The tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                    " tokens but the model only " + std::to_string(model->config().n_vocab) + ".");
      }
      file_ = file;
      model_ = std::move(model);
      tokenizer_ = std::move(tokenizer);
      session_ = std::make_unique<Session>(*model_, std::max(1, n_threads));
      capture_.Init(*model_);
      interventions_ = Interventions();
      cache_first_changed_ = model_->config().n_layer;
      capture_plain_ = probed_ = false;
      block_ms_.clear();
      sampler_ = std::make_unique<Sampler>(SamplingParams{});
      return Info();
    });
  }

  bool loaded() const { return session_ != nullptr; }

  std::string TakeError() { return TakeLastError(); }

  val Info() const {
    if (!model_) return val::null();
    const Config& c = model_->config();
    val info = val::object();
    info.set("n_vocab", c.n_vocab);
    info.set("n_ctx", c.n_ctx);
    info.set("n_embd", c.n_embd);
    info.set("n_head", c.n_head);
    info.set("n_layer", c.n_layer);
    info.set("n_ff", c.n_ff);
    info.set("kv_cache", std::string(c.kv_cache_name()));
    info.set("kv_value_bytes", c.kv_bytes_per_value());
    info.set("parameters", static_cast<double>(model_->ParameterCount()));
    info.set("flops_per_token", model_->ForwardFlopsPerToken());
    info.set("file_bytes", static_cast<double>(file_bytes_.size()));
    info.set("gguf_version", file_->version());
    const GgufValue* name = file_->Find("general.name");
    info.set("name", name != nullptr && name->type == GgufValueType::kString ? name->str : "");
    const GgufTensor* qkv = file_->FindTensor("blk.0.attn_qkv.weight");
    info.set("weight_type", qkv != nullptr ? GgmlTypeName(static_cast<uint32_t>(qkv->type)) : "");
    info.set("simd", RelaxedSimdKernels() ? "wasm-relaxed-simd" : "wasm-simd128");
    // Threads running the kernels: 1 in the single-threaded module; in the pthreads module
    // (gpt2-engine-mt) what the ThreadPool could start from the pre-made pool of Web Workers.
    info.set("threads", session_ ? session_->n_threads() : 1);
#ifdef __EMSCRIPTEN_PTHREADS__
    info.set("pthreads", true);
#else
    info.set("pthreads", false);
#endif
    return info;
  }

  // --- Tokenizer ----------------------------------------------------------------------------

  val Tokenize(const std::string& text) const {
    return Guarded([&] {
      RequireModel();
      const std::vector<int> ids = tokenizer_->Encode(text);
      return CopyToJs(ids.data(), ids.size());
    });
  }

  // Raw bytes (maybe partial UTF-8): decode with a streaming TextDecoder.
  val Detokenize(const val& ids) const {
    return Guarded([&] {
      RequireModel();
      const std::string bytes = tokenizer_->Decode(emscripten::convertJSArrayToNumberVector<int>(ids));
      return CopyToJs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    });
  }

  val TokenBytes(int id) const {
    return Guarded([&] {
      RequireModel();
      const std::string bytes = tokenizer_->TokenBytes(id);
      return CopyToJs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    });
  }

  // --- Generation ---------------------------------------------------------------------------

  // Starts a new conversation: position 0, capture cleared, stop flag cleared.
  void Reset() {
    Guarded([&] {
      RequireModel();
      session_->Reset();
      capture_.Clear();
      cache_first_changed_ = model_->config().n_layer;
      probed_ = false;
      logits_ = nullptr;
      stopped_ = false;
      return 0;
    });
  }

  // A new Sampler: the seed restarts its random sequence (SplitMix64, same as the CLI).
  // seed is a JS number; integers up to 2^53 are exact.
  void SetSampling(double temperature, int top_k, double top_p, double seed) {
    Guarded([&] {
      SamplingParams params;
      params.temperature = static_cast<float>(temperature);
      params.top_k = top_k;
      params.top_p = static_cast<float>(top_p);
      if (!(temperature >= 0) || top_k < 0 || !(top_p > 0 && top_p <= 1) || !(seed >= 0)) {
        throw Error("Sampling settings out of range: temperature >= 0, top-k >= 0, "
                    "0 < top-p <= 1, seed >= 0.");
      }
      params.seed = static_cast<uint64_t>(seed);
      sampler_ = std::make_unique<Sampler>(params);
      return 0;
    });
  }

  // Runs the tokens at the current position (the prompt, or one token via Step).
  void Prefill(const val& ids_js) {
    Guarded([&] {
      RequireModel();
      const std::vector<int> ids = emscripten::convertJSArrayToNumberVector<int>(ids_js);
      const Config& c = model_->config();
      const int n = static_cast<int>(ids.size());
      if (n == 0) throw Error("The prompt is empty: type at least one character.");
      if (session_->position() + n > c.n_ctx) {
        throw Error(session_->position() == 0
                        ? "The prompt is " + std::to_string(n) +
                              " tokens long, longer than the model's context of " +
                              std::to_string(c.n_ctx) + " tokens. Shorten it."
                        : "The context is full (" + std::to_string(c.n_ctx) + " tokens).");
      }
      Forward(ids.data(), n, &block_ms_);
      return 0;
    });
  }

  void StepToken(int id) {
    Guarded([&] {
      RequireModel();
      if (session_->position() + 1 > model_->config().n_ctx) {
        throw Error("The context is full (" + std::to_string(model_->config().n_ctx) +
                    " tokens).");
      }
      Forward(&id, 1, nullptr);
      return 0;
    });
  }

  // Draws the next token from the logits of the last forward pass.
  int Sample() {
    return Guarded([&] {
      RequireModel();
      if (logits_ == nullptr) throw Error("sample called before prefill");
      return sampler_->Sample(logits_, model_->config().n_vocab);
    });
  }

  // The worker is single-threaded, so stop takes effect between calls: it marks the
  // generation finished and the worker's loop checks stopped() before its next step.
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  int position() const { return session_ ? session_->position() : 0; }

  // --- Activations --------------------------------------------------------------------------

  // Capture costs memory per position (GPT-2 small: ~260 kB, most of it MLP activations), so
  // the page lets the user turn it off for long generations.
  void SetCapture(bool on) { capture_on_ = on; }
  bool capture() const { return capture_on_; }
  int capturedPositions() const { return capture_.n_positions(); }

  // VIEW [n_head, position + 1]: attention probabilities of query `position` in block `layer`.
  val Attention(int layer, int position) const {
    return Guarded([&] {
      return ViewToJs(capture_.Attention(layer, position),
                      static_cast<size_t>(model_->config().n_head) * (position + 1));
    });
  }

  // VIEW [position + 1]: head `head`'s part of Attention(layer, position).
  val HeadAttention(int layer, int head, int position) const {
    return Guarded([&] {
      return ViewToJs(capture_.HeadAttention(layer, head, position), static_cast<size_t>(position) + 1);
    });
  }

  // VIEW [n_ff]: GELU outputs of block `layer`'s MLP at `position`.
  val MlpActivations(int layer, int position) const {
    return Guarded([&] {
      return ViewToJs(capture_.MlpActivations(layer, position),
                      static_cast<size_t>(model_->config().n_ff));
    });
  }

  // VIEW [P, n_embd]: residual stream; index 0 is the embedding, index l + 1 after block l.
  val Residual(int index) const {
    return Guarded([&] {
      const std::vector<float>& r = capture_.Residual(index);
      return ViewToJs(r.data(), static_cast<size_t>(capture_.n_positions()) * model_->config().n_embd);
    });
  }

  // Copy [n_layer + 1, P]: L2 norm of the residual stream (row 0 the embedding).
  val ResidualNorms() const {
    return Guarded([&] {
      const std::vector<float> out = capture_.ResidualNorms();
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copy [2 * n_layer + 1, P, 2]: mean and standard deviation of each LayerNorm's input
  // (CaptureStore::LayerNormStats in src/model/capture.h).
  val LayerNormStats() const {
    return Guarded([&] {
      const std::vector<float> out = capture_.LayerNormStats();
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copies {ids: Int32Array[10], probs: Float32Array[10]}: the model's final next-token
  // distribution at `position` (softmax of the logits, before any sampling settings).
  val TopProbs(int position) const {
    return Guarded([&] {
      val out = val::object();
      out.set("ids", CopyToJs(capture_.TopIds(position), CaptureStore::kTopProbs));
      out.set("probs", CopyToJs(capture_.TopProbs(position), CaptureStore::kTopProbs));
      return out;
    });
  }

  // Copies {ids: Int32Array, probs: Float32Array}, both [n_layer, end - begin, top_k]: the
  // logit lens of every block for positions [begin, end). Costs n_layer * (end - begin)
  // unembeddings (n_embd x n_vocab each), so the page asks for a window.
  val LogitLensWindow(int begin, int end, int top_k) const {
    return Guarded([&] {
      RequireModel();
      std::vector<int> ids;
      std::vector<float> probs;
      capture_.LogitLensWindow(*model_, begin, end, top_k, &ids, &probs);
      val out = val::object();
      out.set("ids", CopyToJs(ids.data(), ids.size()));
      out.set("probs", CopyToJs(probs.data(), probs.size()));
      return out;
    });
  }

  // Copies Float32Array[n_vocab]: the model's whole next-token distribution at captured
  // `position`, indexed by token id (ln_f and the unembedding of the final stream, as the logit
  // lens computes it; one layer instead of LogitLensWindow's every layer).
  val FinalProbs(int position) const {
    return Guarded([&] {
      RequireModel();
      const Config& c = model_->config();
      const int P = capture_.n_positions();
      if (position < 0 || position >= P) {
        throw Error("position " + std::to_string(position) + " is out of range; valid positions are 0.." +
                    std::to_string(P - 1));
      }
      const std::vector<float>& r = capture_.Residual(c.n_layer);
      const size_t C = static_cast<size_t>(c.n_embd);
      const std::vector<std::vector<float>> final_stream{
          std::vector<float>(r.begin() + position * C, r.begin() + (position + 1) * C)};
      const std::vector<LensEntry> lens = LogitLens(*model_, final_stream, 1, position, c.n_vocab);
      std::vector<float> probs(static_cast<size_t>(c.n_vocab), 0.0f);
      for (size_t k = 0; k < lens[0].top_ids.size(); ++k) probs[lens[0].top_ids[k]] = lens[0].top_probs[k];
      return CopyToJs(probs.data(), probs.size());
    });
  }

  // --- Interventions and attribution ----------------------------------------------------

  // Sets the interventions applied by every later prefill, step, rerun and attribute (until
  // the next call); spec is {ablateHeads: [[layer, head], ...], meanAblation: bool,
  // skipAttn: [layer, ...], skipMlp: [...], noResidual: [...], postNorm: bool,
  // patches: [{layer, position, value: Float32Array[n_embd]}]}, every field optional; {} is the
  // plain model; headMeans: Float32Array [n_layer, n_embd], the values meanAblation would take
  // (e.g. headMeans() of another run). A patch replaces the residual stream entering block `layer` at `position`
  // (e.g. with row `position` of residual(layer) copied from another run). meanAblation replaces the ablated heads by their mean
  // output over the captured positions (so capture a clean run first). A layer or head out of
  // range throws, naming the valid range.
  void SetInterventions(const val& spec) {
    Guarded([&] {
      RequireModel();
      Interventions iv;
      iv.ablate_heads = HeadList(spec["ablateHeads"]);
      iv.skip_attn = IntList(spec["skipAttn"]);
      iv.skip_mlp = IntList(spec["skipMlp"]);
      iv.no_residual = IntList(spec["noResidual"]);
      iv.post_norm = spec["postNorm"].isTrue();
      const val patches = spec["patches"];
      if (!patches.isUndefined() && !patches.isNull()) {
        const int n = patches["length"].as<int>();
        for (int i = 0; i < n; ++i) {
          const val p = patches[i];
          ResidPatch patch;
          patch.layer = p["layer"].as<int>();
          patch.position = p["position"].as<int>();
          patch.value = emscripten::convertJSArrayToNumberVector<float>(p["value"]);
          iv.patches.push_back(std::move(patch));
        }
      }
      const val means = spec["headMeans"];
      if (!means.isUndefined() && !means.isNull()) {
        iv.head_means = emscripten::convertJSArrayToNumberVector<float>(means);
      } else if (spec["meanAblation"].isTrue() && !iv.ablate_heads.empty()) {
        iv.head_means = capture_.HeadMeans();
      }
      iv.Validate(model_->config());
      interventions_ = std::move(iv);
      return 0;
    });
  }

  // The first block the current interventions change (n_layer: none).
  int FirstChangedBlock() const {
    return model_ ? interventions_.FirstChangedBlock(model_->config().n_layer) : 0;
  }

  // Runs every position of the conversation again under the current interventions, reusing
  // the KV cache and the captured residual stream before the first block that differs from
  // the last run (so it costs at most one prefill), and refills the capture. Needs capture on
  // for the whole conversation. Returns the block it started from.
  int Rerun() {
    return Guarded([&] {
      RequireModel();
      const int P = session_->position(), L = model_->config().n_layer;
      if (P == 0) throw Error("Nothing to re-run: run a prompt first.");
      if (capture_.n_positions() != P) {
        throw Error("Re-running needs the activations of every position: turn on capture and run the prompt again.");
      }
      const int first = std::min(cache_first_changed_, interventions_.FirstChangedBlock(L));
      // The cache and the capture are already those of this run (e.g. the plain run before a
      // heads sweep): running the unembedding of every position again would only repeat them.
      if (first >= L && !probed_ && logits_ != nullptr) return L;
      RunOptions run;
      run.interventions = &interventions_;
      const bool full = first >= L;
      const int from = full ? L : first;
      std::vector<float> resid_in = capture_.Residual(from);  // a copy: the capture is rewritten
      capture_.BeginRerun(from);
      capture_.Watch(run);
      try {
        logits_ = session_->Rerun({0, P, from}, resid_in.data(), run);
      } catch (...) {
        capture_.Clear();
        throw;
      }
      capture_.Commit();
      cache_first_changed_ = interventions_.FirstChangedBlock(L);
      capture_plain_ = cache_first_changed_ >= L;
      probed_ = false;
      return from;
    });
  }

  // Direct logit attribution (src/model/attribution.h) of the prompt `ids` under the current
  // interventions: the conversation restarts with ids (as reset + prefill(ids), captured if
  // capture is on). position, target, contrast: -1 for the defaults (last position, most
  // probable token, no contrast). Returns {position, target, contrast, names: [..],
  // values: Float64Array, logit}: names in `gpt2 attribute`'s order.
  val Attribute(const val& ids_js, int position, int target, int contrast) {
    return Guarded([&] {
      RequireModel();
      const std::vector<int> ids = emscripten::convertJSArrayToNumberVector<int>(ids_js);
      if (ids.empty()) throw Error("The prompt is empty: type at least one character.");
      if (static_cast<int>(ids.size()) > model_->config().n_ctx) {
        throw Error("The prompt is longer than the model's context of " +
                    std::to_string(model_->config().n_ctx) + " tokens. Shorten it.");
      }
      AttributionRequest request;
      request.position = position;
      request.target = target;
      request.contrast = contrast;
      request.interventions = &interventions_;
      capture_.Clear();
      logits_ = nullptr;
      stopped_ = false;
      if (capture_on_) {
        capture_.Begin(0, static_cast<int>(ids.size()));
        request.observer = capture_.Observer();
      }
      Attribution a;
      try {
        a = AttributeLogit(*session_, ids, request);
      } catch (...) {
        // The conversation is gone either way: leave the session and the capture both empty.
        session_->Reset();
        capture_.Clear();
        throw;
      }
      if (capture_on_) capture_.Commit();
      logits_ = a.last_logits;
      cache_first_changed_ = interventions_.FirstChangedBlock(model_->config().n_layer);
      capture_plain_ = cache_first_changed_ >= model_->config().n_layer;
      probed_ = false;
      val names = val::array();
      std::vector<double> values;
      for (const AttributionComponent& c : a.components) {
        names.call<void>("push", val(c.name));
        values.push_back(c.value);
      }
      val out = val::object();
      out.set("position", a.position);
      out.set("target", a.target);
      out.set("contrast", a.contrast);
      out.set("names", names);
      out.set("values", CopyToJs(values.data(), values.size()));
      out.set("logit", a.logit);
      return out;
    });
  }

  // --- Which heads matter; block timings (issue 8) --------------------------------------------

  // Copies Float32Array [n_layer, n_embd]: each head's output ("attn_heads") averaged over the
  // captured positions, for setInterventions({headMeans}) and ablatedLogProb.
  val HeadMeans() const {
    return Guarded([&] {
      RequireModel();
      const std::vector<float> means = capture_.HeadMeans();
      return CopyToJs(means.data(), means.size());
    });
  }

  // One step of "which heads matter": log P(target) at captured `position` with head (layer,
  // head) knocked out of the plain model (zeroed, or replaced by means [n_layer, n_embd] unless
  // that is empty); layer = n_layer: nothing knocked out (the baseline). Positions
  // 0..position run again from block `layer` (the cache before it reused), nothing captured:
  // a sweep from the last block down costs sum_l (n_layer - l) / n_layer prefills per head.
  double AblatedLogProb(int layer, int head, int position, int target, const val& means) {
    return Guarded([&] { return AblatedLogProbsOf({{layer, head}}, position, target, means).at(0); });
  }

  // Several steps of "which heads matter" in one call: as ablatedLogProb for each [layer, head]
  // of `heads` in turn (Float64Array, one log-probability each), but the probes' final rows go
  // through the unembedding together, kProbeRows at a time: one pass over its weights instead of
  // one per head (for GPT-2 small a one-row pass costs ~1/10 of a 32-token prefill).
  val AblatedLogProbs(const val& heads, int position, int target, const val& means) {
    return Guarded([&] {
      const std::vector<double> out = AblatedLogProbsOf(HeadList(heads), position, target, means);
      return CopyToJs(out.data(), out.size());
    });
  }

  // One cell of activation patching: the log-probabilities (Float64Array) of `ids` after the
  // last captured position when the stream entering block `layer` at `position` is `value`
  // (Float32Array [n_embd]). Positions position.. run again from block `layer`, nothing
  // captured: every (block, position) of a T-token prompt costs about T (n_layer + 1) / 4 prefills.
  val PatchedLogProbs(int layer, int position, const val& value, const val& ids_js) {
    return Guarded([&] {
      RequireModel();
      const std::vector<float> row = emscripten::convertJSArrayToNumberVector<float>(value);
      const std::vector<double> out = PatchedLogProbsOf(layer, {position}, [&](int) { return row; }, ids_js);
      return CopyToJs(out.data(), out.size());
    });
  }

  // The cells of one block of activation patching in one call: for each of `positions` in turn,
  // as patchedLogProbs(layer, position, row `position` of stream, ids), where stream is
  // Float32Array [position(), n_embd] (e.g. another run's residual(layer)); returns Float64Array
  // [positions.length, ids.length]. The probes' final rows share the unembedding's passes (see
  // ablatedLogProbs); going down the positions, each probe re-runs only the rows from its own on.
  val PatchedLogProbsAt(int layer, const val& positions_js, const val& stream_js, const val& ids_js) {
    return Guarded([&] {
      RequireModel();
      const size_t C = size_t(model_->config().n_embd);
      const std::vector<float> stream = emscripten::convertJSArrayToNumberVector<float>(stream_js);
      if (stream.size() != size_t(session_->position()) * C) {
        throw Error("patching: the stream has " + std::to_string(stream.size()) + " values; " +
                    std::to_string(session_->position()) + " positions x " + std::to_string(C) + " wanted");
      }
      const std::vector<double> out = PatchedLogProbsOf(layer, IntList(positions_js), [&](int p) {
        return std::vector<float>(stream.begin() + size_t(p) * C, stream.begin() + size_t(p + 1) * C);
      }, ids_js);
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copy [n_layer, P, 4]: norms of ln_1's output, attention's output, ln_2's output and the
  // MLP's output at each position (CaptureStore::SublayerNorms).
  val SublayerNorms() const {
    return Guarded([&] {
      const std::vector<float> out = capture_.SublayerNorms();
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copies Float64Array [n_layer]: each block's wall time (ms) in the last prefill() call.
  val BlockTimes() const { return CopyToJs(block_ms_.data(), block_ms_.size()); }

 private:

  void RequireModel() const {
    if (!session_) throw Error("No model is loaded yet.");
  }

  void RequireProbePosition(int position) const {
    const int P = session_->position();
    if (P == 0 || capture_.n_positions() != P || !capture_plain_) {
      throw Error("This experiment needs a captured run of the plain model: run the text with capture "
                  "on and no interventions first.");
    }
    if (position < 0 || position >= P) {
      throw Error("position " + std::to_string(position) + " is out of range; valid positions are 0.." +
                  std::to_string(P - 1));
    }
  }

  void RequireToken(int id) const {
    const int V = model_->config().n_vocab;
    if (id < 0 || id >= V) {
      throw Error("The token id " + std::to_string(id) + " is not in the vocabulary (0.." + std::to_string(V - 1) +
                  ").");
    }
  }

  // Probes unembedded together (their logits: rows x n_vocab floats, 3.2 MB for GPT-2).
  static constexpr int kProbeRows = 16;

  std::vector<double> AblatedLogProbsOf(const std::vector<HeadRef>& heads, int position, int target,
                                        const val& means_js) {
    RequireModel();
    const Config& c = model_->config();
    RequireProbePosition(position);
    RequireToken(target);
    const std::vector<float> means = emscripten::convertJSArrayToNumberVector<float>(means_js);
    std::vector<Interventions> probes(heads.size());
    for (size_t i = 0; i < heads.size(); ++i) {  // all checked before any runs
      if (heads[i].layer == c.n_layer) continue;  // the baseline
      probes[i].ablate_heads.push_back(heads[i]);
      probes[i].head_means = means;
      probes[i].Validate(c);
    }
    return ProbeLogProbs(static_cast<int>(heads.size()), {target}, [&](int i) {
      return Probe(probes[i], std::min(heads[i].layer, c.n_layer), 0, position + 1, 0);
    });
  }

  // row_of(position): the patch's value there, [n_embd].
  template <typename RowOf>
  std::vector<double> PatchedLogProbsOf(int layer, const std::vector<int>& positions, RowOf row_of,
                                        const val& ids_js) {
    const Config& c = model_->config();
    const std::vector<int> ids = IntList(ids_js);
    if (ids.empty()) throw Error("patching: name at least one token id to measure");
    for (int id : ids) RequireToken(id);
    std::vector<Interventions> probes(positions.size());
    for (size_t i = 0; i < positions.size(); ++i) {  // all checked before any runs
      RequireProbePosition(positions[i]);
      probes[i].patches.push_back({layer, positions[i], row_of(positions[i])});
      probes[i].Validate(c);
    }
    return ProbeLogProbs(static_cast<int>(positions.size()), ids, [&](int i) {
      return Probe(probes[i], layer, positions[i], session_->position(), positions[i]);
    });
  }

  // Runs n probes in turn (probe(i) returns its final stream row), unembeds their rows
  // kProbeRows at a time and returns the log-probabilities of ids for each: [n, ids.size()].
  template <typename RunProbe>
  std::vector<double> ProbeLogProbs(int n, const std::vector<int>& ids, RunProbe probe) {
    const Config& c = model_->config();
    const size_t C = size_t(c.n_embd), V = size_t(c.n_vocab);
    const int rows = std::min(n, kProbeRows);
    std::vector<float> stream(size_t(rows) * C), logits(size_t(rows) * V);
    std::vector<double> out;
    out.reserve(size_t(n) * ids.size());
    for (int i0 = 0; i0 < n; i0 += kProbeRows) {
      const int k = std::min(kProbeRows, n - i0);
      for (int i = 0; i < k; ++i) std::copy_n(probe(i0 + i), C, stream.data() + size_t(i) * C);
      session_->FinalLogits(stream.data(), k, logits.data());
      for (int i = 0; i < k; ++i) {
        const float* row = logits.data() + size_t(i) * V;
        // One softmax normaliser per row: log p(id) = log p(ids[0]) + logit(id) - logit(ids[0]).
        const double first = LogProbability(row, c.n_vocab, ids[0]);
        for (int id : ids) out.push_back(first + (double(row[id]) - double(row[ids[0]])));
      }
    }
    return out;
  }

  // Positions [begin, end) of the captured plain run again from first_block under iv, nothing
  // captured; returns position end - 1's residual stream leaving the last block. iv changes
  // rows changed_begin.. (a patch: from its position; a knocked-out head: every row). Rows an
  // earlier probe left changed that this one reads (those before `end`) run again with it, which
  // gives them back the plain run's values where iv does not change them.
  const float* Probe(const Interventions& iv, int first_block, int begin, int end, int changed_begin) {
    const int L = model_->config().n_layer;
    int from = first_block, b = begin;
    const bool reread = probed_ && probe_begin_ < end;
    if (reread) {
      from = std::min(from, probe_block_);
      b = std::min(b, probe_begin_);
    }
    // What is changed afterwards (a bounding box): this probe's own rows, and an earlier probe's
    // rows from `end` on, which this one does not run.
    bool dirty = false;
    int d_block = L, d_begin = end, d_end = end;
    if (first_block < L && std::max(b, changed_begin) < end) {
      dirty = true;
      d_block = first_block;
      d_begin = std::max(b, changed_begin);
    }
    const int left_begin = reread ? std::max(probe_begin_, end) : probe_begin_;
    if (probed_ && left_begin < probe_end_) {
      d_block = std::min(d_block, probe_block_);
      d_begin = dirty ? std::min(d_begin, left_begin) : left_begin;
      d_end = dirty ? std::max(d_end, probe_end_) : probe_end_;
      dirty = true;
    }
    probed_ = dirty;
    probe_block_ = d_block;
    probe_begin_ = d_begin;
    probe_end_ = d_end;
    cache_first_changed_ = std::min(cache_first_changed_, from);
    logits_ = nullptr;  // the session's logits are no longer the captured run's
    RunOptions run;
    run.interventions = &iv;
    return session_->Rerun({b, end, from, /*final_stream=*/true},
                           capture_.Residual(from).data() + size_t(b) * model_->config().n_embd, run);
  }

  // block_ms: where this call's per-block times go (null: not timed).
  void Forward(const int* ids, int n, std::vector<double>* block_ms) {
    const int pos0 = session_->position();
    if (pos0 > 0 && probed_) {
      throw Error("The cache holds a probe's partial re-run: call rerun() before running on.");
    }
    const bool observe = capture_on_ && capture_.n_positions() == pos0;
    RunOptions run;
    run.interventions = &interventions_;
    run.block_ms = block_ms;
    if (observe) {
      capture_.Begin(pos0, n);
      capture_.Watch(run);
    }
    try {
      logits_ = session_->Prefill(ids, n, run);
    } catch (...) {
      if (observe) capture_.Abort();
      throw;
    }
    if (observe) capture_.Commit();
    if (pos0 == 0) {
      cache_first_changed_ = model_->config().n_layer;
      probed_ = false;
    }
    cache_first_changed_ =
        std::min(cache_first_changed_, interventions_.FirstChangedBlock(model_->config().n_layer));
    capture_plain_ = cache_first_changed_ >= model_->config().n_layer;
  }

  void Unload() {
    session_.reset();
    model_.reset();
    tokenizer_.reset();
    file_.reset();
    file_bytes_.Free();
    logits_ = nullptr;
  }

  DownloadBuffer file_bytes_{"The model", "beginLoad"};  // the GgufFile and Model point into it
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Sampler> sampler_;
  const float* logits_ = nullptr;  // [n_vocab] of the last forward, owned by the session
  bool stopped_ = false;
  bool capture_on_ = false;
  CaptureStore capture_;
  Interventions interventions_;  // applied to every forward pass; empty: the plain model
  // The first block where the KV cache may differ from a plain run's (n_layer: nowhere).
  int cache_first_changed_ = 0;
  // The captured run is the plain model's (so a probe may start from its stream).
  bool capture_plain_ = false;
  // Probes (AblatedLogProb, PatchedLogProbs) changed the cache of blocks probe_block_.. at
  // positions [probe_begin_, probe_end_) (a bounding box): later probes re-run it, Rerun
  // restores it all.
  bool probed_ = false;
  int probe_block_ = 0, probe_begin_ = 0, probe_end_ = 0;
  std::vector<double> block_ms_;  // [n_layer] per-block times of the last prefill, ms
};

// Forwards to tools/common/convert.h; see the usage at the top of this file.
class Converter : public ErrorsByValue {
 public:
  std::string TakeError() { return TakeLastError(); }
  Converter() = default;
  Converter(const Converter&) = delete;
  ~Converter() { Free(); }

  void SetConfig(const std::string& json) {
    Guarded([&] {
      config_ = ConfigFromHfJson(json);
      has_config_ = true;
      return 0;
    });
  }

  void SetVocabulary(const std::string& vocab_json, const std::string& merges_text) {
    Guarded([&] {
      tokenizer_ = Tokenizer::FromText(vocab_json, merges_text, "vocab.json");
      return 0;
    });
  }

  void BeginCheckpoint(double total_bytes) {
    Guarded([&] {
      Free();
      checkpoint_bytes_.Begin(total_bytes);
      return 0;
    });
  }

  void AppendChunk(const val& bytes) {
    Guarded([&] {
      checkpoint_bytes_.Append(bytes);
      return 0;
    });
  }

  val Plan(const std::string& type) {
    return Guarded([&] {
      if (!has_config_ || tokenizer_ == nullptr) throw Error("plan needs setConfig and setVocabulary first");
      checkpoint_bytes_.RequireComplete();
      conversion_.reset();  // a second plan() replaces the first
      std::free(output_);
      output_ = nullptr;
      checkpoint_ = SafetensorsFile::Parse(checkpoint_bytes_.data(), checkpoint_bytes_.size(), "model.safetensors");
      const std::string name = Gpt2DefaultModelName(config_);
      conversion_ = std::make_unique<Gpt2GgufConversion>(*checkpoint_, config_, tokenizer_.get(),
                                                         ParseConvertType(type), name);
      const uint64_t size = conversion_->layout().size;
      if (size > 2147483647u) throw Error("The converted model would not fit in WebAssembly memory.");
      output_ = static_cast<uint8_t*>(std::malloc(static_cast<size_t>(size)));
      if (output_ == nullptr) {
        throw Error("Not enough memory for the converted model (" + std::to_string(size >> 20) + " MB).");
      }
      conversion_->WriteHeader(output_);
      done_ = 0;
      val plan = val::object();
      plan.set("tensors", conversion_->num_tensors());
      plan.set("bytes", static_cast<double>(size));
      plan.set("name", name);
      return plan;
    });
  }

  int ConvertNext() {
    return Guarded([&] {
      if (conversion_ == nullptr || output_ == nullptr) throw Error("convertNext called before plan");
      if (done_ < conversion_->num_tensors()) conversion_->EncodeTensor(done_++, output_, nullptr);
      return done_;
    });
  }

  val TakeOutput() {
    return Guarded([&] {
      if (conversion_ == nullptr || done_ != conversion_->num_tensors()) {
        throw Error("takeOutput called before every tensor was converted");
      }
      // The checkpoint goes first, so the copy's transient JS memory is not on top of it.
      const size_t size = static_cast<size_t>(conversion_->layout().size);
      checkpoint_.reset();
      checkpoint_bytes_.Free();
      val out = CopyToJs(output_, size);
      Free();
      return out;
    });
  }

 private:
  void Free() {
    conversion_.reset();
    checkpoint_.reset();
    checkpoint_bytes_.Free();
    std::free(output_);
    output_ = nullptr;
    done_ = 0;
  }

  Config config_;
  bool has_config_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  DownloadBuffer checkpoint_bytes_{"model.safetensors", "beginCheckpoint"};  // checkpoint_ points into it
  std::unique_ptr<SafetensorsFile> checkpoint_;
  std::unique_ptr<Gpt2GgufConversion> conversion_;
  uint8_t* output_ = nullptr;  // the GGUF file, conversion_->layout().size bytes
  int done_ = 0;
};

int EndOfTextId() { return kEndOfText; }

// {heapBytes, mallocBytes, stackAddress}: wasm memory's size, the bytes malloc has handed out and
// not taken back (dlmalloc's mallinfo), and the address of a local here (the stack grows down, so
// a smaller one means frames were left on the stack). For tests that check a loop of calls leaks
// nothing (tests/web/embind.test.mjs) and for the page's long-session test.
val MemoryStats() {
  const struct mallinfo m = mallinfo();
  volatile int local = 0;
  val out = val::object();
  out.set("heapBytes", static_cast<double>(emscripten_get_heap_size()));
  out.set("mallocBytes", static_cast<double>(m.uordblks));
  out.set("stackAddress", static_cast<double>(reinterpret_cast<uintptr_t>(&local)));
  return out;
}

}  // namespace
}  // namespace gpt2

EMSCRIPTEN_BINDINGS(gpt2_engine) {
  using gpt2::Engine;
  emscripten::function("endOfTextId", &gpt2::EndOfTextId);
  emscripten::function("memoryStats", &gpt2::MemoryStats);
  emscripten::class_<Engine>("Engine")
      .constructor<>()
      .function("beginLoad", &Engine::BeginLoad)
      .function("appendChunk", &Engine::AppendChunk)
      .function("bytesLoaded", &Engine::BytesLoaded)
      .function("finishLoad", &Engine::FinishLoad)
      .function("loaded", &Engine::loaded)
      .function("takeError", &Engine::TakeError)
      .function("info", &Engine::Info)
      .function("tokenize", &Engine::Tokenize)
      .function("detokenize", &Engine::Detokenize)
      .function("tokenBytes", &Engine::TokenBytes)
      .function("reset", &Engine::Reset)
      .function("setSampling", &Engine::SetSampling)
      .function("prefill", &Engine::Prefill)
      .function("step", &Engine::StepToken)
      .function("sample", &Engine::Sample)
      .function("stop", &Engine::Stop)
      .function("stopped", &Engine::stopped)
      .function("position", &Engine::position)
      .function("setCapture", &Engine::SetCapture)
      .function("capture", &Engine::capture)
      .function("capturedPositions", &Engine::capturedPositions)
      .function("attention", &Engine::Attention)
      .function("headAttention", &Engine::HeadAttention)
      .function("mlpActivations", &Engine::MlpActivations)
      .function("residual", &Engine::Residual)
      .function("residualNorms", &Engine::ResidualNorms)
      .function("layerNormStats", &Engine::LayerNormStats)
      .function("topProbs", &Engine::TopProbs)
      .function("logitLens", &Engine::LogitLensWindow)
      .function("finalProbs", &Engine::FinalProbs)
      .function("setInterventions", &Engine::SetInterventions)
      .function("firstChangedBlock", &Engine::FirstChangedBlock)
      .function("rerun", &Engine::Rerun)
      .function("attribute", &Engine::Attribute)
      .function("headMeans", &Engine::HeadMeans)
      .function("ablatedLogProb", &Engine::AblatedLogProb)
      .function("ablatedLogProbs", &Engine::AblatedLogProbs)
      .function("patchedLogProbs", &Engine::PatchedLogProbs)
      .function("patchedLogProbsAt", &Engine::PatchedLogProbsAt)
      .function("blockTimes", &Engine::BlockTimes)
      .function("sublayerNorms", &Engine::SublayerNorms);
  emscripten::class_<gpt2::Converter>("Converter")
      .constructor<>()
      .function("setConfig", &gpt2::Converter::SetConfig)
      .function("setVocabulary", &gpt2::Converter::SetVocabulary)
      .function("beginCheckpoint", &gpt2::Converter::BeginCheckpoint)
      .function("appendChunk", &gpt2::Converter::AppendChunk)
      .function("plan", &gpt2::Converter::Plan)
      .function("convertNext", &gpt2::Converter::ConvertNext)
      .function("takeOutput", &gpt2::Converter::TakeOutput)
      .function("takeError", &gpt2::Converter::TakeError);
}
