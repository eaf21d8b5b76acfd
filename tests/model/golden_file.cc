#include "golden_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "base/error.h"
#include "test_paths.h"

namespace gpt2_test {
namespace {

class Reader {
 public:
  Reader(const std::vector<uint8_t>& bytes, const std::string& path) : b_(bytes), path_(path) {}
  void Read(void* out, size_t n, const char* what) {
    if (n > b_.size() - pos_) {
      throw gpt2::Error(path_ + ": truncated while reading " + what + " at offset " +
                        std::to_string(pos_));
    }
    std::memcpy(out, b_.data() + pos_, n);
    pos_ += n;
  }
  uint32_t U32(const char* what) {
    uint8_t v[4];
    Read(v, 4, what);
    return uint32_t(v[0]) | uint32_t(v[1]) << 8 | uint32_t(v[2]) << 16 | uint32_t(v[3]) << 24;
  }
  int64_t I64(const char* what) {
    uint8_t v[8];
    Read(v, 8, what);
    uint64_t u = 0;
    for (int i = 7; i >= 0; --i) u = u << 8 | v[i];
    return static_cast<int64_t>(u);
  }
  size_t remaining() const { return b_.size() - pos_; }

 private:
  const std::vector<uint8_t>& b_;
  std::string path_;
  size_t pos_ = 0;
};

}  // namespace

int64_t GoldenTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GoldenFile GoldenFile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw gpt2::Error("cannot open golden file " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  Reader r(bytes, path);
  char magic[8];
  r.Read(magic, 8, "magic");
  if (std::memcmp(magic, "GPT2GOLD", 8) != 0) throw gpt2::Error(path + ": not a GPT2GOLD file");
  const uint32_t version = r.U32("version");
  if (version != 1) throw gpt2::Error(path + ": unsupported version " + std::to_string(version));
  const uint32_t n_records = r.U32("record count");
  GoldenFile file;
  for (uint32_t i = 0; i < n_records; ++i) {
    GoldenTensor t;
    const uint32_t name_len = r.U32("name length");
    if (name_len > r.remaining()) throw gpt2::Error(path + ": name length past the end");
    t.name.resize(name_len);
    r.Read(&t.name[0], name_len, "name");
    t.dtype = r.U32("dtype");
    if (t.dtype > 1) throw gpt2::Error(path + ": '" + t.name + "' has unknown dtype");
    const uint32_t n_dims = r.U32("n_dims");
    if (n_dims > 8) throw gpt2::Error(path + ": '" + t.name + "' has too many dims");
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const int64_t dim = r.I64("dims");
      if (dim < 0 || (dim > 0 && n > int64_t(r.remaining()) / 4 / dim)) {
        throw gpt2::Error(path + ": '" + t.name + "' has a bad shape");
      }
      t.dims.push_back(dim);
      n *= dim;
    }
    if (t.dtype == 0) {
      t.f32.resize(static_cast<size_t>(n));
      r.Read(t.f32.data(), static_cast<size_t>(n) * 4, "float data");
    } else {
      t.i32.resize(static_cast<size_t>(n));
      r.Read(t.i32.data(), static_cast<size_t>(n) * 4, "int data");
    }
    const std::string name = t.name;
    if (!file.tensors_.emplace(name, std::move(t)).second) {
      throw gpt2::Error(path + ": duplicate record '" + name + "'");
    }
  }
  return file;
}

const GoldenTensor& GoldenFile::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw gpt2::Error("golden file has no record '" + name + "'");
  return it->second;
}

const std::vector<float>& GoldenFile::F32(const std::string& name) const {
  const GoldenTensor& t = Get(name);
  if (t.dtype != 0) throw gpt2::Error("golden record '" + name + "' is not float32");
  return t.f32;
}

const std::vector<int32_t>& GoldenFile::I32(const std::string& name) const {
  const GoldenTensor& t = Get(name);
  if (t.dtype != 1) throw gpt2::Error("golden record '" + name + "' is not int32");
  return t.i32;
}

const GoldenFile& GoldenData(const std::string& name) {
  static std::map<std::string, std::unique_ptr<const GoldenFile>> loaded;
  std::unique_ptr<const GoldenFile>& slot = loaded[name];
  if (!slot) slot = std::make_unique<const GoldenFile>(GoldenFile::Load(DataPath(name)));
  return *slot;
}

TensorDiff CompareTensors(const float* actual, const float* expected, int64_t n) {
  TensorDiff diff;
  for (int64_t i = 0; i < n; ++i) {
    const float a = actual[i], e = expected[i];
    if (!std::isfinite(a) || !std::isfinite(e)) {
      // Masked scores are -inf on both sides; anything else non-finite is a mismatch.
      if (!(a == e)) ++diff.mismatched_infinities;
      continue;
    }
    const double d = std::fabs(static_cast<double>(a) - static_cast<double>(e));
    if (d > diff.max_abs || diff.worst_index < 0) {
      diff.max_abs = d;
      diff.worst_index = i;
    }
  }
  return diff;
}

bool CheckTensor(const std::string& name, const float* actual, const float* expected, int64_t n,
                 double tolerance) {
  const TensorDiff d = CompareTensors(actual, expected, n);
  const bool ok = d.max_abs <= tolerance && d.mismatched_infinities == 0;
  std::printf("%-28s max abs diff %.3g at %lld%s %s\n", name.c_str(), d.max_abs,
              static_cast<long long>(d.worst_index),
              d.mismatched_infinities ? " (non-finite mismatch)" : "", ok ? "ok" : "NOT OK");
  return ok;
}

}  // namespace gpt2_test
