// Dispatch for the kernels of kernels.h, after Highway's hwy/examples/skeleton.cc: this file is
// compiled once per target by foreach_target.h (which re-includes it with HWY_TARGET set to each
// target), the per-target code lives in matmul-inl.h (which includes the matmul-*-inl.h files,
// one per concern), ops-inl.h and convert-inl.h, and the HWY_ONCE part at the end picks a target
// per call.
//
// Native: every target Highway 1.0.3 can build for x86 (EMU128, SSSE3, SSE4, AVX2, AVX3, and
// AVX3_DL, which CMake asks for with HWY_WANT_AVX3_DL) is compiled and HWY_DYNAMIC_DISPATCH
// picks the best one the CPU has. WebAssembly: CMake defines
// HWY_COMPILE_ONLY_STATIC and -msimd128, so only HWY_WASM is compiled and calls go straight to
// it (HWY_STATIC_DISPATCH; dynamic dispatch would need libhwy, which the wasm build lacks).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/backward-inl.h"
#include "kernels/convert-inl.h"
#include "kernels/matmul-inl.h"
#include "kernels/ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {

// The target this copy of the code was compiled for; dispatched like the kernels, so it tells
// which copy the kernels would run.
HWY_NOINLINE int64_t CompiledTargetKernel() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"
#include "kernels/relaxed_simd.h"

#if defined(__EMSCRIPTEN__)
// Shipping EMU128 (what Highway silently picks without -msimd128) would be several times slower.
static_assert(HWY_STATIC_TARGET == HWY_WASM, "wasm build must compile Highway's WASM target");
#define GPT2_DISPATCH(FUNC) HWY_STATIC_DISPATCH(FUNC)

// HWY_ASSERT and friends call hwy::Abort, which lives in libhwy; the wasm build is headers only.
namespace hwy {
HWY_NORETURN void Abort(const char* file, int line, const char* format, ...) {
  std::fprintf(stderr, "Abort at %s:%d: ", file, line);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::abort();
}
}  // namespace hwy
#else
#define GPT2_DISPATCH(FUNC) HWY_DYNAMIC_DISPATCH(FUNC)
#endif

namespace gpt2 {

#if !defined(__EMSCRIPTEN__)
HWY_EXPORT(StartMatMulInputKernel);
HWY_EXPORT(QuantizeRowsKernel);
HWY_EXPORT(MatMulKernel);
HWY_EXPORT(FastestQuantActivationsKernel);
HWY_EXPORT(LayerNormKernel);
HWY_EXPORT(GeluKernel);
HWY_EXPORT(SoftmaxKernel);
HWY_EXPORT(AddInPlaceKernel);
HWY_EXPORT(AttentionHeadKernel);
HWY_EXPORT(AttentionHeadF16Kernel);
HWY_EXPORT(AttentionHeadQ8Kernel);
HWY_EXPORT(StoreKvRowQ8Kernel);
HWY_EXPORT(F32ToF16SaturatedKernel);
HWY_EXPORT(F16ToF32Kernel);
HWY_EXPORT(CompiledTargetKernel);
HWY_EXPORT(Int8DotKindKernel);
HWY_EXPORT(MatMulTransposedKernel);
HWY_EXPORT(GeluBackwardKernel);
HWY_EXPORT(AttentionHeadBackwardKernel);
#endif

// ---- profiling (SetKernelProfiling) ----------------------------------------------------------

namespace {

std::atomic<bool> g_profiling{false};

struct ProfileBuckets {
  std::mutex mutex;
  std::map<std::tuple<std::string, int, int64_t, int64_t, bool>, KernelProfileEntry> entries;
};
ProfileBuckets& Buckets() {
  static ProfileBuckets* buckets = new ProfileBuckets;  // never destroyed: threads may outlive main
  return *buckets;
}

// The calling thread's CPU time natively (steadier than wall time on a shared machine: time
// spent descheduled does not count); wall time in wasm, which has no CPU clock.
double ProfileClockSeconds() {
#if defined(__EMSCRIPTEN__)
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#else
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#endif
}

// Times one kernel call when profiling is on; a no-op otherwise.
class ProfileScope {
 public:
  explicit ProfileScope(const char* kernel, int64_t work, const WeightView* w = nullptr,
                        int64_t T = 0)
      : on_(g_profiling.load(std::memory_order_relaxed)) {
    if (!on_) return;
    kernel_ = kernel;
    work_ = work;
    if (w != nullptr) {
      type_ = w->type;
      rows_ = w->rows;
      cols_ = w->cols;
      single_token_ = T == 1;
    }
    start_ = ProfileClockSeconds();
  }
  ~ProfileScope() {
    if (!on_) return;
    const double seconds = ProfileClockSeconds() - start_;
    ProfileBuckets& b = Buckets();
    std::lock_guard<std::mutex> lock(b.mutex);
    KernelProfileEntry& e = b.entries[std::make_tuple(std::string(kernel_), static_cast<int>(type_),
                                                      rows_, cols_, single_token_)];
    if (e.calls == 0) {
      e.kernel = kernel_;
      e.type = type_;
      e.rows = rows_;
      e.cols = cols_;
      e.single_token = single_token_;
    }
    ++e.calls;
    e.work += work_;
    e.seconds += seconds;
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  bool on_;
  const char* kernel_ = nullptr;
  int64_t work_ = 0;
  TensorType type_ = TensorType::kF32;
  int64_t rows_ = 0, cols_ = 0;
  bool single_token_ = false;
  double start_ = 0;
};

}  // namespace

void SetKernelProfiling(bool on) { g_profiling.store(on, std::memory_order_relaxed); }

std::vector<KernelProfileEntry> TakeKernelProfile() {
  ProfileBuckets& b = Buckets();
  std::vector<KernelProfileEntry> out;
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    for (const auto& kv : b.entries) out.push_back(kv.second);
    b.entries.clear();
  }
  std::sort(out.begin(), out.end(), [](const KernelProfileEntry& a, const KernelProfileEntry& b) {
    return a.seconds > b.seconds;
  });
  return out;
}

// ---- the kernels -----------------------------------------------------------------------------

MatMulInput::MatMulInput() : data_(new kernels_internal::MatMulInputData) {}
MatMulInput::~MatMulInput() = default;
MatMulInput::MatMulInput(MatMulInput&&) noexcept = default;
MatMulInput& MatMulInput::operator=(MatMulInput&&) noexcept = default;

const kernels_internal::MatMulInputData& kernels_internal::InputData(const MatMulInput& in) {
  if (!in.data_) throw Error("MatMul: the prepared input was moved from");
  return *in.data_;
}

void StartMatMulInput(const float* x, int64_t T, const WeightView& w, QuantActivations act,
                      MatMulInput& in) {
  // The row range 0..0 leaves the row and output checks out: a product's rows come later.
  kernels_internal::CheckMatMulArgs(x, T, w, nullptr, 0, 0);
  if (T > 0 && x == nullptr) throw Error("MatMul: null input pointer");
  if (!in.data_) in.data_.reset(new kernels_internal::MatMulInputData);  // moved from
  GPT2_DISPATCH(StartMatMulInputKernel)(x, T, w, act, *in.data_);
}

void PrepareMatMulInputRows(MatMulInput& in, int64_t t_begin, int64_t t_end) {
  if (!in.data_) throw Error("MatMul: the prepared input was moved from");
  kernels_internal::MatMulInputData& d = *in.data_;
  if (t_begin < 0 || t_begin > t_end || t_end > d.T) {
    throw Error("MatMul: token range [" + std::to_string(t_begin) + ", " + std::to_string(t_end) +
                ") is not inside [0, " + std::to_string(d.T) + ")");
  }
  if (!d.quantized || t_begin == t_end) return;
  if (d.target != GPT2_DISPATCH(CompiledTargetKernel)()) {
    throw Error("MatMul: the input was started for kernel target " + KernelTargetName(d.target) +
                ", but dispatch now picks " + ActiveKernelTargetName());
  }
  const WeightView shape{d.type, nullptr, 0, d.cols};
  ProfileScope profile("PrepareMatMulInput", (t_end - t_begin) * d.cols, &shape, d.T);
  GPT2_DISPATCH(QuantizeRowsKernel)(d, t_begin, t_end);
}

void PrepareMatMulInput(const float* x, int64_t T, const WeightView& w, QuantActivations act,
                        MatMulInput& in) {
  StartMatMulInput(x, T, w, act, in);
  PrepareMatMulInputRows(in, 0, T);
}

void MatMul(const MatMulInput& in, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end) {
  const kernels_internal::MatMulInputData& d = kernels_internal::InputData(in);
  kernels_internal::CheckMatMulArgs(d.x, d.T, w, y, row_begin, row_end);
  if (w.type != d.type || w.cols != d.cols) {
    throw Error("MatMul: the input was prepared for " + std::to_string(d.cols) +
                " columns of weight type id " + std::to_string(static_cast<int>(d.type)) +
                ", not " + std::to_string(w.cols) + " of type id " +
                std::to_string(static_cast<int>(w.type)));
  }
  if (d.target != GPT2_DISPATCH(CompiledTargetKernel)()) {
    throw Error("MatMul: the input was prepared for kernel target " + KernelTargetName(d.target) +
                ", but dispatch now picks " + ActiveKernelTargetName());
  }
  if (d.T == 0 || row_begin == row_end) return;
  ProfileScope profile("MatMul", d.T, &w, d.T);
  GPT2_DISPATCH(MatMulKernel)(d, w, bias, y, row_begin, row_end);
}

void MatMul(const float* x, int64_t T, const WeightView& w, const float* bias, float* y,
            int64_t row_begin, int64_t row_end, QuantActivations act) {
  kernels_internal::CheckMatMulArgs(x, T, w, y, row_begin, row_end);
  if (T == 0 || row_begin == row_end) return;
  // Per thread: callers may split one product's rows over threads, each calling this.
  static thread_local MatMulInput in;
  PrepareMatMulInput(x, T, w, act, in);
  MatMul(in, w, bias, y, row_begin, row_end);
}

QuantActivations FastestQuantActivations(int64_t T) {
  return GPT2_DISPATCH(FastestQuantActivationsKernel)(T);
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, int64_t n,
               float* y) {
  ProfileScope profile("LayerNorm", n);
  GPT2_DISPATCH(LayerNormKernel)(x, gamma, beta, eps, n, y);
}

void Gelu(float* x, int64_t n) {
  ProfileScope profile("Gelu", n);
  GPT2_DISPATCH(GeluKernel)(x, n);
}

void Softmax(float* x, int64_t n) {
  ProfileScope profile("Softmax", n);
  GPT2_DISPATCH(SoftmaxKernel)(x, n);
}

void AddInPlace(float* y, const float* x, int64_t n) {
  ProfileScope profile("AddInPlace", n);
  GPT2_DISPATCH(AddInPlaceKernel)(y, x, n);
}

void AttentionHead(const float* q, const float* k, const float* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out) {
  ProfileScope profile("AttentionHead", n_keys);
  GPT2_DISPATCH(AttentionHeadKernel)
  (q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

void AttentionHead(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                   int64_t n_keys, int64_t head_dim, float scale, float* scores, float* probs,
                   float* out) {
  ProfileScope profile("AttentionHead", n_keys);
  GPT2_DISPATCH(AttentionHeadF16Kernel)
  (q, k, v, kv_stride, n_keys, head_dim, scale, scores, probs, out);
}

void AttentionHead(const float* q, const KvHeadQ8& keys, const KvHeadQ8& values, int64_t n_keys,
                   int64_t head_dim, float scale, float* scores, float* probs, float* out) {
  ProfileScope profile("AttentionHead", n_keys);
  GPT2_DISPATCH(AttentionHeadQ8Kernel)
  (q, keys, values, n_keys, head_dim, scale, scores, probs, out);
}

void MatMulTransposed(const float* dy, int64_t T, const WeightView& w, float* dx, int64_t col_begin,
                      int64_t col_end) {
  kernels_internal::CheckMatMulTransposedArgs(dy, T, w, dx, col_begin, col_end);
  if (T == 0 || col_begin == col_end) return;
  ProfileScope profile("MatMulTransposed", T, &w, T);
  GPT2_DISPATCH(MatMulTransposedKernel)(dy, T, w, dx, col_begin, col_end);
}

void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  ProfileScope profile("GeluBackward", n);
  GPT2_DISPATCH(GeluBackwardKernel)(x, dy, dx, n);
}

void AttentionHeadBackward(const float* q, const float* k, const float* v, int64_t kv_stride,
                           const float* probs, const float* dout, int64_t n_keys, int64_t head_dim,
                           float scale, float* dq, float* dk, float* dv, int64_t dkv_stride,
                           float* dscores) {
  ProfileScope profile("AttentionHeadBackward", n_keys);
  GPT2_DISPATCH(AttentionHeadBackwardKernel)
  (q, k, v, kv_stride, probs, dout, n_keys, head_dim, scale, dq, dk, dv, dkv_stride, dscores);
}

void StoreKeyQ8(const float* x, int64_t head_dim, int64_t j, int8_t* q, uint16_t* d,
                int64_t capacity) {
  GPT2_DISPATCH(StoreKvRowQ8Kernel)(x, head_dim, j, false, q, d, capacity);
}

void StoreValueQ8(const float* x, int64_t head_dim, int64_t j, int8_t* q, uint16_t* d,
                  int64_t capacity) {
  GPT2_DISPATCH(StoreKvRowQ8Kernel)(x, head_dim, j, true, q, d, capacity);
}

void F32ToF16Saturated(const float* x, uint16_t* h, int64_t n) {
  GPT2_DISPATCH(F32ToF16SaturatedKernel)(x, h, n);
}

void F16ToF32(const uint16_t* h, float* x, int64_t n) { GPT2_DISPATCH(F16ToF32Kernel)(h, x, n); }

std::vector<int64_t> KernelTargets() {
#if defined(__EMSCRIPTEN__)
  return {HWY_WASM};
#else
  // Computed once: hwy::SupportedAndGeneratedTargets() only reports the forced target while
  // ForceKernelTarget is in effect.
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
#endif
}

std::string KernelTargetName(int64_t target) { return hwy::TargetName(target); }

void ForceKernelTarget(int64_t target) {
  const std::vector<int64_t> targets = KernelTargets();
  bool known = target == 0;
  for (int64_t t : targets) known = known || t == target;
  if (!known) {
    throw Error("ForceKernelTarget: target " + KernelTargetName(target) +
                " is not compiled into this binary or not supported by this CPU");
  }
#if !defined(__EMSCRIPTEN__)
  hwy::SetSupportedTargetsForTest(target);
#endif
}

std::string ActiveKernelTargetName() {
  return KernelTargetName(GPT2_DISPATCH(CompiledTargetKernel)());
}

bool RelaxedSimdKernels() {
#if defined(__EMSCRIPTEN__)
  return gpt2_wasm_relaxed() != 0;
#else
  return false;
#endif
}

namespace kernels_internal {
std::atomic<int> forced_int8_dot_path{static_cast<int>(Int8DotPath::kAuto)};
}  // namespace kernels_internal

std::vector<Int8DotPath> Int8DotPaths() {
#if defined(__EMSCRIPTEN__)
  return {Int8DotPath::kAuto, Int8DotPath::kWidened, Int8DotPath::kEmulatedUnsignedB,
          Int8DotPath::kEmulatedSignedB, Int8DotPath::kPairs};
#else
  return {Int8DotPath::kAuto};
#endif
}

void ForceInt8DotPath(Int8DotPath path) {
  bool known = false;
  for (Int8DotPath p : Int8DotPaths()) known = known || p == path;
  if (!known) throw Error("ForceInt8DotPath: this build has one int8 prefill path (kAuto)");
  kernels_internal::forced_int8_dot_path.store(static_cast<int>(path), std::memory_order_relaxed);
}

std::string Int8DotPathName(Int8DotPath path) {
  const int kind = GPT2_DISPATCH(Int8DotKindKernel)(path);
  // matmul::DotKind's order (matmul-wasm-inl.h).
  static const char* const kNames[] = {"widened to int16",
                                       "relaxed 4-byte dot, b unsigned",
                                       "relaxed 4-byte dot, b signed",
                                       "4-byte dot emulated, b unsigned",
                                       "4-byte dot emulated, b signed",
                                       "int16 pairs"};
  const std::string what = kind < 0 ? "the target's own" : kNames[kind];
  return path == Int8DotPath::kAuto ? "auto: " + what : what;
}

}  // namespace gpt2

#endif  // HWY_ONCE
