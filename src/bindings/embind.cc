// The whole JavaScript surface of the engine, in one file (as whisper.cpp's
// examples/whisper.wasm keeps its Embind bindings). The page's Web Worker (web/worker.js) is the
// only caller; it drives generation token by token so it can answer "stop" between tokens.
//
// Usage from JS (every method throws a JS Error carrying the engine's message on failure):
//   const engine = new Module.Engine();
//   engine.beginLoad(totalBytes);            // one allocation for the whole file
//   for (chunk of download) engine.appendChunk(chunk);   // Uint8Array pieces, copied in place
//   const info = engine.finishLoad(nThreads);  // parse GGUF, bind weights, build tokenizer
//   const ids = engine.tokenize("Hello");      // Int32Array (a copy)
//   engine.reset(); engine.setCapture(true); engine.setSampling(temp, topK, topP, seed);
//   engine.prefill(ids); let id = engine.sample(); engine.step(id); id = engine.sample(); ...
//   engine.attention(layer, position)          // Float32Array VIEW [H, position + 1]
//
// Lifetime of typed arrays: methods documented as returning a VIEW return a Float32Array over
// wasm memory. It is valid only until the next call into the engine: any call may allocate,
// wasm memory may then grow, and a grown memory detaches every view (length becomes 0). Copy
// (view.slice()) before calling the engine again. Everything else returns a fresh copy.
// In the pthreads build (gpt2-engine-mt.js) wasm memory is a SharedArrayBuffer: a grown shared
// memory does not detach old views, but views over it cannot be transferred with postMessage
// nor read by TextDecoder, so the same rule (copy with slice()) applies there too.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/gguf.h"
#include "hwy/highway.h"
#include "model/config.h"
#include "model/model.h"
#include "model/observer.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

// The page is only worth shipping with SIMD128 kernels; without -msimd128 Highway silently
// compiles its scalar EMU128 fallback instead.
static_assert(HWY_TARGET == HWY_WASM, "Highway must compile for WASM (SIMD128), not EMU128");

namespace gpt2 {
namespace {

using emscripten::val;

[[noreturn]] void ThrowJsError(const std::string& message) {
  val::global("Error").new_(val(message)).throw_();
  __builtin_unreachable();
}

// Runs f and turns C++ exceptions into JS Errors. The message is copied out of the catch block
// first so the C++ exception is fully released before the JS exception unwinds the stack.
template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  std::string message;
  try {
    return f();
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::bad_alloc&) {
    message =
        "Not enough memory: the browser tab could not allocate more (WebAssembly is limited to "
        "2 GB). Try a smaller model (q8_0 or q4_0), a shorter prompt, or turn off activation "
        "capture.";
  } catch (const std::exception& e) {
    message = std::string("Internal error: ") + e.what();
  }
  ThrowJsError(message);
}

template <typename T>
val CopyToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data)).call<val>("slice");
}

template <typename T>
val ViewToJs(const T* data, size_t n) {
  return val(emscripten::typed_memory_view(n, data));
}

constexpr int kTopProbs = 10;  // tokens kept per position for the "final probabilities" view

// Activations kept across prefill and steps, position by position, for the page's views.
// Filled only while capture is on and only contiguously from position 0 (a gap would make the
// views lie), so turning capture on mid-generation captures nothing until the next reset.
struct CaptureStore {
  int n_positions = 0;  // positions 0..n_positions-1 are complete
  int n_layer = 0, n_head = 0, n_embd = 0, n_ff = 0;
  // attn[l]: position p's rows start at n_head * p * (p + 1) / 2 as [n_head, p + 1].
  std::vector<std::vector<float>> attn;
  std::vector<std::vector<float>> resid;       // [n_layer + 1][P, C]: 0 embed, l+1 after block l
  std::vector<std::vector<float>> resid_attn;  // [n_layer][P, C] after attention of block l
  std::vector<std::vector<float>> mlp_act;     // [n_layer][P, F] after GELU
  std::vector<int> top_ids;                    // [P, kTopProbs] from the final logits
  std::vector<float> top_probs;                // [P, kTopProbs]

  void Init(const Config& c) {
    n_layer = c.n_layer;
    n_head = c.n_head;
    n_embd = c.n_embd;
    n_ff = c.n_ff;
    Clear();
  }
  void Clear() {
    n_positions = 0;
    attn.assign(n_layer, {});
    resid.assign(n_layer + 1, {});
    resid_attn.assign(n_layer, {});
    mlp_act.assign(n_layer, {});
    top_ids.clear();
    top_probs.clear();
  }
  static size_t AttnOffset(int n_head, int p) {
    return static_cast<size_t>(n_head) * p * (p + 1) / 2;
  }
  // Makes room for positions [0, end).
  void Resize(int end) {
    for (int l = 0; l < n_layer; ++l) {
      attn[l].resize(AttnOffset(n_head, end));
      resid_attn[l].resize(static_cast<size_t>(end) * n_embd);
      mlp_act[l].resize(static_cast<size_t>(end) * n_ff);
    }
    for (auto& r : resid) r.resize(static_cast<size_t>(end) * n_embd);
    top_ids.resize(static_cast<size_t>(end) * kTopProbs);
    top_probs.resize(static_cast<size_t>(end) * kTopProbs);
  }

  void CopyRows(std::vector<float>& dst, const Activation& a, int width) {
    const int64_t rows = a.shape[0];
    std::memcpy(dst.data() + static_cast<size_t>(a.pos0) * width, a.data,
                sizeof(float) * rows * width);
  }

  void Observe(const Activation& a) {
    const std::string name = a.name;
    if (name == "embed") {
      CopyRows(resid[0], a, n_embd);
    } else if (name == "resid_out") {
      CopyRows(resid[a.layer + 1], a, n_embd);
    } else if (name == "resid_attn") {
      CopyRows(resid_attn[a.layer], a, n_embd);
    } else if (name == "mlp_act") {
      CopyRows(mlp_act[a.layer], a, n_ff);
    } else if (name == "attn_probs") {
      // [H, T, n_keys]; position p = pos0 + t sees keys 0..p.
      const int64_t T = a.shape[1], n_keys = a.shape[2];
      for (int64_t t = 0; t < T; ++t) {
        const int p = a.pos0 + static_cast<int>(t);
        float* dst = attn[a.layer].data() + AttnOffset(n_head, p);
        for (int h = 0; h < n_head; ++h) {
          std::memcpy(dst + static_cast<size_t>(h) * (p + 1), a.data + (h * T + t) * n_keys,
                      sizeof(float) * (p + 1));
        }
      }
    } else if (name == "logits") {
      // [T, V] (or only the last row): softmax and keep the kTopProbs largest.
      const int64_t rows = a.shape[0], V = a.shape[1];
      const int first = a.pos0 + static_cast<int>(pending_T - rows);
      for (int64_t t = 0; t < rows; ++t) TopProbs(a.data + t * V, V, first + static_cast<int>(t));
    }
  }

  void TopProbs(const float* logits, int64_t V, int p) {
    float max_logit = logits[0];
    for (int64_t i = 1; i < V; ++i) max_logit = std::max(max_logit, logits[i]);
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
    // Partial selection by repeated scan: K is 10, V is 50k; ties go to the lower id.
    int* ids = top_ids.data() + static_cast<size_t>(p) * kTopProbs;
    float* probs = top_probs.data() + static_cast<size_t>(p) * kTopProbs;
    std::vector<std::pair<float, int>> best;  // (logit, id), kept sorted descending
    for (int64_t i = 0; i < V; ++i) {
      const float x = logits[i];
      if (static_cast<int>(best.size()) == kTopProbs && x <= best.back().first) continue;
      auto it = std::upper_bound(best.begin(), best.end(), std::make_pair(x, static_cast<int>(i)),
                                 [](const auto& a, const auto& b) {
                                   return a.first > b.first || (a.first == b.first && a.second < b.second);
                                 });
      best.insert(it, {x, static_cast<int>(i)});
      if (static_cast<int>(best.size()) > kTopProbs) best.pop_back();
    }
    for (int k = 0; k < kTopProbs; ++k) {
      const bool have = k < static_cast<int>(best.size());
      ids[k] = have ? best[k].second : -1;
      probs[k] = have ? static_cast<float>(std::exp(static_cast<double>(best[k].first - max_logit)) / sum) : 0.0f;
    }
  }

  int pending_T = 0;  // tokens of the forward pass being observed
};

class Engine {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  ~Engine() { Unload(); }

  // --- Loading ------------------------------------------------------------------------------

  // Frees any loaded model and allocates one buffer for a file of total_bytes bytes.
  void BeginLoad(double total_bytes) {
    Guarded([&] {
      Unload();
      if (!(total_bytes > 0) || total_bytes > 2147483647.0) {
        throw Error("The model size (" + std::to_string(static_cast<int64_t>(total_bytes)) +
                    " bytes) is not something this page can load: WebAssembly memory is "
                    "limited to 2 GB.");
      }
      size_ = static_cast<size_t>(total_bytes);
      // 64-byte aligned so GGUF's 32-byte tensor alignment holds in memory as in the file.
      buffer_ = static_cast<uint8_t*>(std::aligned_alloc(64, (size_ + 63) & ~size_t{63}));
      if (buffer_ == nullptr) {
        size_ = 0;
        throw Error("Not enough memory to hold the model (" +
                    std::to_string(static_cast<int64_t>(total_bytes) >> 20) +
                    " MB): the browser tab could not allocate it. Close other tabs or try a "
                    "smaller model (q8_0 or q4_0).");
      }
      filled_ = 0;
      return 0;
    });
  }

  // Copies a Uint8Array (or ArrayBuffer view) straight into the model buffer.
  void AppendChunk(const val& bytes) {
    Guarded([&] {
      if (buffer_ == nullptr) throw Error("appendChunk called before beginLoad");
      const size_t n = bytes["length"].as<size_t>();
      if (n > size_ - filled_) {
        throw Error("The model download is larger than announced (" + std::to_string(size_) +
                    " bytes); the server's size information is wrong.");
      }
      val(emscripten::typed_memory_view(n, buffer_ + filled_)).call<void>("set", bytes);
      filled_ += n;
      return 0;
    });
  }

  double BytesLoaded() const { return static_cast<double>(filled_); }

  // Parses the file, binds the weights, reads the tokenizer and creates the session.
  val FinishLoad(int n_threads) {
    return Guarded([&] {
      if (buffer_ == nullptr) throw Error("finishLoad called before beginLoad");
      if (filled_ != size_) {
        throw Error("The model file is incomplete: received " + std::to_string(filled_) +
                    " of " + std::to_string(size_) + " bytes.");
      }
      std::shared_ptr<const GgufFile> file(GgufFile::Parse(buffer_, size_));
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
      capture_.Init(model_->config());
      sampler_ = std::make_unique<Sampler>(SamplingParams{});
      return Info();
    });
  }

  bool loaded() const { return session_ != nullptr; }

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
    info.set("parameters", static_cast<double>(model_->ParameterCount()));
    info.set("flops_per_token", model_->ForwardFlopsPerToken());
    info.set("file_bytes", static_cast<double>(size_));
    info.set("gguf_version", file_->version());
    const GgufValue* name = file_->Find("general.name");
    info.set("name", name != nullptr && name->type == GgufValueType::kString ? name->str : "");
    const GgufTensor* qkv = file_->FindTensor("blk.0.attn_qkv.weight");
    info.set("weight_type", qkv != nullptr ? GgmlTypeName(static_cast<uint32_t>(qkv->type)) : "");
    info.set("simd", "wasm-simd128");
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
      Forward(ids.data(), n);
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
      Forward(&id, 1);
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

  // Capture costs memory per position (GPT-2 small: ~190 kB plus the attention triangle), so
  // the page lets the user turn it off for long generations.
  void SetCapture(bool on) { capture_on_ = on; }
  bool capture() const { return capture_on_; }
  int capturedPositions() const { return capture_.n_positions; }

  // VIEW [n_head, position + 1]: attention probabilities of query `position` in block `layer`.
  val Attention(int layer, int position) const {
    return Guarded([&] {
      CheckCaptured(layer, position);
      return ViewToJs(capture_.attn[layer].data() + CaptureStore::AttnOffset(capture_.n_head, position),
                      static_cast<size_t>(capture_.n_head) * (position + 1));
    });
  }

  // VIEW [n_ff]: GELU outputs of block `layer`'s MLP at `position`.
  val MlpActivations(int layer, int position) const {
    return Guarded([&] {
      CheckCaptured(layer, position);
      return ViewToJs(capture_.mlp_act[layer].data() + static_cast<size_t>(position) * capture_.n_ff,
                      static_cast<size_t>(capture_.n_ff));
    });
  }

  // VIEW [P, n_embd]: residual stream; index 0 is the embedding, index l + 1 after block l.
  val Residual(int index) const {
    return Guarded([&] {
      if (index < 0 || index > capture_.n_layer) throw Error("residual index out of range");
      return ViewToJs(capture_.resid[index].data(),
                      static_cast<size_t>(capture_.n_positions) * capture_.n_embd);
    });
  }

  // Copy [n_layer + 1, P]: L2 norm of the residual stream (row 0 the embedding).
  val ResidualNorms() const {
    return Guarded([&] {
      const int P = capture_.n_positions, C = capture_.n_embd;
      std::vector<float> out(static_cast<size_t>(capture_.n_layer + 1) * P);
      for (int r = 0; r <= capture_.n_layer; ++r) {
        for (int p = 0; p < P; ++p) {
          const float* x = capture_.resid[r].data() + static_cast<size_t>(p) * C;
          double s = 0;
          for (int i = 0; i < C; ++i) s += static_cast<double>(x[i]) * x[i];
          out[static_cast<size_t>(r) * P + p] = static_cast<float>(std::sqrt(s));
        }
      }
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copy [2 * n_layer + 1, P, 2]: mean and standard deviation (biased, as torch.nn.LayerNorm
  // normalises with) of each LayerNorm's input: rows ln_1 of block 0, ln_2 of block 0, ln_1 of
  // block 1, ..., ln_f. The inputs are the residual stream before the block, after its
  // attention, and after the last block.
  val LayerNormStats() const {
    return Guarded([&] {
      const int P = capture_.n_positions, C = capture_.n_embd, L = capture_.n_layer;
      std::vector<float> out(static_cast<size_t>(2 * L + 1) * P * 2);
      for (int r = 0; r < 2 * L + 1; ++r) {
        const std::vector<float>& src =
            r == 2 * L ? capture_.resid[L] : (r % 2 == 0 ? capture_.resid[r / 2] : capture_.resid_attn[r / 2]);
        for (int p = 0; p < P; ++p) {
          const float* x = src.data() + static_cast<size_t>(p) * C;
          double mean = 0;
          for (int i = 0; i < C; ++i) mean += x[i];
          mean /= C;
          double var = 0;
          for (int i = 0; i < C; ++i) var += (x[i] - mean) * (x[i] - mean);
          var /= C;
          float* o = out.data() + (static_cast<size_t>(r) * P + p) * 2;
          o[0] = static_cast<float>(mean);
          o[1] = static_cast<float>(std::sqrt(var));
        }
      }
      return CopyToJs(out.data(), out.size());
    });
  }

  // Copies {ids: Int32Array[10], probs: Float32Array[10]}: the model's final next-token
  // distribution at `position` (softmax of the logits, before any sampling settings).
  val TopProbs(int position) const {
    return Guarded([&] {
      CheckCaptured(0, position);
      val out = val::object();
      out.set("ids", CopyToJs(capture_.top_ids.data() + static_cast<size_t>(position) * kTopProbs, kTopProbs));
      out.set("probs", CopyToJs(capture_.top_probs.data() + static_cast<size_t>(position) * kTopProbs, kTopProbs));
      return out;
    });
  }

  // Copies {ids: Int32Array, probs: Float32Array}, both [n_layer, end - begin, top_k]: the
  // logit lens of every block for positions [begin, end). Costs n_layer * (end - begin)
  // unembeddings (n_embd x n_vocab each), so the page asks for a window.
  val LogitLensWindow(int begin, int end, int top_k) const {
    return Guarded([&] {
      RequireModel();
      if (begin < 0 || end > capture_.n_positions || begin >= end || top_k < 1) {
        throw Error("logit lens window out of range");
      }
      const int L = capture_.n_layer, C = capture_.n_embd, T = end - begin;
      std::vector<std::vector<float>> residuals(L);
      for (int l = 0; l < L; ++l) {
        residuals[l].assign(capture_.resid[l + 1].begin() + static_cast<size_t>(begin) * C,
                            capture_.resid[l + 1].begin() + static_cast<size_t>(end) * C);
      }
      const std::vector<LensEntry> lens = LogitLens(*model_, residuals, T, begin, top_k);
      std::vector<int> ids(static_cast<size_t>(L) * T * top_k, -1);
      std::vector<float> probs(ids.size(), 0.0f);
      for (const LensEntry& e : lens) {
        const int t = e.position - begin;
        if (e.layer < 0 || e.layer >= L || t < 0 || t >= T) continue;
        const size_t base = (static_cast<size_t>(e.layer) * T + t) * top_k;
        for (int k = 0; k < top_k && k < static_cast<int>(e.top_ids.size()); ++k) {
          ids[base + k] = e.top_ids[k];
          probs[base + k] = e.top_probs[k];
        }
      }
      val out = val::object();
      out.set("ids", CopyToJs(ids.data(), ids.size()));
      out.set("probs", CopyToJs(probs.data(), probs.size()));
      return out;
    });
  }

 private:
  void RequireModel() const {
    if (!session_) throw Error("No model is loaded yet.");
  }

  void CheckCaptured(int layer, int position) const {
    if (layer < 0 || layer >= capture_.n_layer) throw Error("layer out of range");
    if (position < 0 || position >= capture_.n_positions) {
      throw Error("No activations were captured for position " + std::to_string(position) +
                  " (turn on capture and generate again).");
    }
  }

  void Forward(const int* ids, int n) {
    const int pos0 = session_->position();
    const bool observe = capture_on_ && capture_.n_positions == pos0;
    if (observe) {
      capture_.Resize(pos0 + n);
      capture_.pending_T = n;
      session_->SetObserver([this](const Activation& a) { capture_.Observe(a); });
    } else {
      session_->SetObserver(nullptr);
    }
    try {
      logits_ = session_->Prefill(ids, n);
    } catch (...) {
      session_->SetObserver(nullptr);
      if (observe) capture_.Resize(capture_.n_positions);
      throw;
    }
    session_->SetObserver(nullptr);
    if (observe) capture_.n_positions = pos0 + n;
  }

  void Unload() {
    session_.reset();
    model_.reset();
    tokenizer_.reset();
    file_.reset();
    std::free(buffer_);
    buffer_ = nullptr;
    size_ = filled_ = 0;
    logits_ = nullptr;
  }

  uint8_t* buffer_ = nullptr;  // the whole GGUF file; the GgufFile and Model point into it
  size_t size_ = 0;
  size_t filled_ = 0;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Sampler> sampler_;
  const float* logits_ = nullptr;  // [n_vocab] of the last forward, owned by the session
  bool stopped_ = false;
  bool capture_on_ = false;
  CaptureStore capture_;
};

int EndOfTextId() { return kEndOfText; }

}  // namespace
}  // namespace gpt2

EMSCRIPTEN_BINDINGS(gpt2_engine) {
  using gpt2::Engine;
  emscripten::function("endOfTextId", &gpt2::EndOfTextId);
  emscripten::class_<Engine>("Engine")
      .constructor<>()
      .function("beginLoad", &Engine::BeginLoad)
      .function("appendChunk", &Engine::AppendChunk)
      .function("bytesLoaded", &Engine::BytesLoaded)
      .function("finishLoad", &Engine::FinishLoad)
      .function("loaded", &Engine::loaded)
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
      .function("mlpActivations", &Engine::MlpActivations)
      .function("residual", &Engine::Residual)
      .function("residualNorms", &Engine::ResidualNorms)
      .function("layerNormStats", &Engine::LayerNormStats)
      .function("topProbs", &Engine::TopProbs)
      .function("logitLens", &Engine::LogitLensWindow);
}
