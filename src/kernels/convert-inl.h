// Per-target f32 <-> f16 array conversions (kernels.h F32ToF16Saturated, F16ToF32), included
// once per Highway target by kernels.cc. Highway 1.0.3 has no f32 -> f16 demotion on every
// target (and none that saturates), so both directions are integer vector arithmetic on the bit
// patterns, written to give format/f16.cc's scalar bits exactly on every target: the page and
// the native CLI must round the KV cache alike. Leftover elements (n % lanes) go through a
// lane-sized stack buffer and the same arithmetic, as in ops-inl.h.
#if defined(GPT2_KERNELS_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GPT2_KERNELS_CONVERT_INL_H_
#undef GPT2_KERNELS_CONVERT_INL_H_
#else
#define GPT2_KERNELS_CONVERT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace gpt2 {
namespace HWY_NAMESPACE {
namespace convert {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DH = hn::Rebind<uint16_t, DF>;   // one half per float lane
using DH16 = hn::Rebind<int16_t, DF>;  // the same bits, for the sign-extending promotion
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VH = hn::Vec<DH>;
constexpr size_t kLanes = hn::MaxLanes(DF());

// Half bits to float, exact for all 65536 patterns (format/f16.cc F16ToF32). Sign-extending the
// half to 32 bits and shifting left by 13 puts its exponent and mantissa where a float's go, with
// the exponent 112 too small (a half subnormal lands on the float subnormal of the same
// significand); the mask keeps the sign and clears the sign-extension copies. Multiplying by
// 2^112 then rebiases normals and normalizes subnormals without rounding (a power of two, the
// product a float normal or zero). Exponent 31 (inf, NaN) becomes float exponent 143 that way:
// or-ing 0x7f800000 in makes it 255 and keeps the sign and the payload.
HWY_INLINE VF HalfToFloat(VH h) {
  const DF df;
  const DI di;
  const VI wide = hn::PromoteTo(di, hn::BitCast(DH16(), h));
  const VI bits = hn::And(hn::ShiftLeft<13>(wide), hn::Set(di, static_cast<int32_t>(0x8fffffffu)));
  const VF scaled = hn::Mul(hn::BitCast(df, bits), hn::Set(df, 5.192296858534828e+33f));  // 2^112
  const VI exponent = hn::Set(di, 0x0f800000);  // the half's exponent field, shifted
  const auto inf_or_nan = hn::Eq(hn::And(bits, exponent), exponent);
  return hn::BitCast(
      df, hn::Or(hn::BitCast(di, scaled), hn::IfThenElseZero(inf_or_nan, hn::Set(di, 0x7f800000))));
}

// Float to half bits as the 16-bit KV cache stores them: clamped to +-65504, then rounded to
// nearest, ties to even (format/f16.cc F32ToF16 of the clamped value); NaN keeps F32ToF16's quiet
// NaN with the top payload bits. Works on the magnitude as an integer, after the classic
// "float_to_half_fast3_rtne" (F. Giesen): the clamp is an integer Min (a float's order is its
// bits' order), a normal half is the magnitude rebiased plus 0xfff plus its lowest kept bit,
// shifted right by 13 (which rounds half to even and carries into the exponent when the mantissa
// overflows), and a subnormal half is the low bits of magnitude + 0.5f: that float add rounds to
// multiples of 2^-24, the half subnormal quantum, to nearest even as IEEE requires.
HWY_INLINE VH FloatToHalfSaturated(VF f) {
  const DF df;
  const DI di;
  const VI bits = hn::BitCast(di, f);
  const VI magnitude = hn::And(bits, hn::Set(di, 0x7fffffff));
  const VI clamped = hn::Min(magnitude, hn::Set(di, 0x477fe000));  // 65504
  const VI odd = hn::And(hn::ShiftRight<13>(clamped), hn::Set(di, 1));
  // Lanes below 2^-14 go negative here; they take the subnormal result below.
  const VI normal =
      hn::ShiftRight<13>(hn::Add(hn::Add(clamped, hn::Set(di, 0xfff - (112 << 23))), odd));
  const VI subnormal =
      hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, clamped), hn::Set(df, 0.5f))),
              hn::Set(di, 0x3f000000));                                                   // 0.5f
  VI half = hn::IfThenElse(hn::Lt(clamped, hn::Set(di, 0x38800000)), subnormal, normal);  // 2^-14
  const VI quiet_nan =
      hn::Or(hn::And(hn::ShiftRight<13>(magnitude), hn::Set(di, 0x3ff)), hn::Set(di, 0x7e00));
  half = hn::IfThenElse(hn::Gt(magnitude, hn::Set(di, 0x7f800000)), quiet_nan, half);
  half = hn::Or(half, hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000)));
  return hn::DemoteTo(DH(), half);  // every lane is in [0, 0xffff]: no saturation happens
}

// out[i] = func(in[i]) for i in [0, n), a vector at a time; func maps a vector of din to one of
// dout with the same number of lanes. The tail goes through padded buffers.
template <class DIn, class DOut, class Func>
HWY_INLINE void ConvertArray(DIn din, DOut dout, const hn::TFromD<DIn>* HWY_RESTRICT in,
                             hn::TFromD<DOut>* HWY_RESTRICT out, int64_t n, const Func& func) {
  using TIn = hn::TFromD<DIn>;
  using TOut = hn::TFromD<DOut>;
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kLanes) <= n; i += kLanes) {
    hn::StoreU(func(hn::LoadU(din, in + i)), dout, out + i);
  }
  if (i < n) {
    HWY_ALIGN TIn in_buffer[kLanes] = {};
    HWY_ALIGN TOut out_buffer[kLanes];
    const size_t rest = static_cast<size_t>(n - i);
    std::memcpy(in_buffer, in + i, rest * sizeof(TIn));
    hn::Store(func(hn::Load(din, in_buffer)), dout, out_buffer);
    std::memcpy(out + i, out_buffer, rest * sizeof(TOut));
  }
}

}  // namespace convert

HWY_NOINLINE void F32ToF16SaturatedKernel(const float* HWY_RESTRICT x, uint16_t* HWY_RESTRICT h,
                                          int64_t n) {
  convert::ConvertArray(convert::DF(), convert::DH(), x, h, n,
                        [](convert::VF v) { return convert::FloatToHalfSaturated(v); });
}

HWY_NOINLINE void F16ToF32Kernel(const uint16_t* HWY_RESTRICT h, float* HWY_RESTRICT x, int64_t n) {
  convert::ConvertArray(convert::DH(), convert::DF(), h, x, n,
                        [](convert::VH v) { return convert::HalfToFloat(v); });
}

}  // namespace HWY_NAMESPACE
}  // namespace gpt2
HWY_AFTER_NAMESPACE();

#endif  // GPT2_KERNELS_CONVERT_INL_H_
