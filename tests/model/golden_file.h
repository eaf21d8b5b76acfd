// Reader for the golden tensor files written by scripts/make_golden.py and
// scripts/make_nano_reference.py (format documented at the top of make_golden.py):
//   "GPT2GOLD" | u32 version (1) | u32 n_records |
//   n_records x { u32 name_len | name | u32 dtype (0 f32, 1 i32) | u32 n_dims | i64 dims[] | data }
// and an llm.c-style check_tensor that prints the largest difference.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpt2_test {

struct GoldenTensor {
  std::string name;
  uint32_t dtype = 0;  // 0 float32, 1 int32
  std::vector<int64_t> dims;
  std::vector<float> f32;    // when dtype == 0
  std::vector<int32_t> i32;  // when dtype == 1
  int64_t NumElements() const;
};

class GoldenFile {
 public:
  // Reads and validates the whole file; throws gpt2::Error naming what is wrong.
  static GoldenFile Load(const std::string& path);

  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws gpt2::Error if absent or of the other dtype.
  const GoldenTensor& Get(const std::string& name) const;
  const std::vector<float>& F32(const std::string& name) const;
  const std::vector<int32_t>& I32(const std::string& name) const;
  const std::map<std::string, GoldenTensor>& tensors() const { return tensors_; }

 private:
  std::map<std::string, GoldenTensor> tensors_;
};

// tests/data/<name> ("golden_tiny.bin"), loaded on first use and kept for the whole test program:
// one GoldenFile per name, whichever test file asks.
const GoldenFile& GoldenData(const std::string& name);

struct TensorDiff {
  double max_abs = 0;  // over entries finite in both
  int64_t worst_index = -1;
  int64_t mismatched_infinities = 0;  // -inf/+inf/NaN in one and not the other, or different
};

// Compares n values; non-finite values must match exactly (masked attention scores are -inf).
TensorDiff CompareTensors(const float* actual, const float* expected, int64_t n);

// Prints "name: max abs diff 1.2e-06 at 17 (ok)" like llm.c's check_tensor and returns whether
// the difference is within tolerance.
bool CheckTensor(const std::string& name, const float* actual, const float* expected, int64_t n,
                 double tolerance);

}  // namespace gpt2_test
