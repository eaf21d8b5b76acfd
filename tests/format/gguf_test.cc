// GGUF reader and writer: writer -> parser round trips, hand-assembled files of every metadata
// type (the byte layout written out here from ggml/docs/gguf.md, independently of GgufWriter),
// and malformed files, each of which must raise gpt2::Error with a message that names the fault.
#include "format/gguf.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/f16.h"
#include "format/quant.h"
#include "format/tensor_type.h"

namespace {

using Catch::Matchers::Contains;
using gpt2::GgufFile;
using gpt2::GgufValueType;
using gpt2::GgufWriter;
using gpt2::TensorType;

// --- A byte-level GGUF assembler, independent of GgufWriter. ---

struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& Put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));  // the test hosts (x86, wasm) are little-endian like GGUF
    b.insert(b.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& U8(uint8_t v) { return Put(v); }
  Bytes& U32(uint32_t v) { return Put(v); }
  Bytes& U64(uint64_t v) { return Put(v); }
  Bytes& Str(const std::string& s) {
    U64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& Raw(const std::vector<uint8_t>& more) {
    b.insert(b.end(), more.begin(), more.end());
    return *this;
  }
};

struct TensorSpec {
  std::string name = "w";
  std::vector<uint64_t> ne = {32, 2};
  uint32_t type = 0;  // f32
  uint64_t offset = 0;
};

struct FileSpec {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  std::vector<uint8_t> kv;  // encoded key/value pairs
  uint64_t n_kv = 0;
  std::vector<TensorSpec> tensors = {TensorSpec()};
  bool override_n_tensors = false;
  uint64_t n_tensors = 0;
  uint32_t alignment = 32;
  size_t data_bytes = 256;  // zero bytes after the padded header
};

std::vector<uint8_t> Build(const FileSpec& spec) {
  Bytes f;
  f.U32(spec.magic).U32(spec.version);
  f.U64(spec.override_n_tensors ? spec.n_tensors : spec.tensors.size());
  f.U64(spec.n_kv);
  f.Raw(spec.kv);
  for (const TensorSpec& t : spec.tensors) {
    f.Str(t.name).U32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) f.U64(n);
    f.U32(t.type).U64(t.offset);
  }
  while (f.b.size() % spec.alignment != 0) f.U8(0);
  f.b.resize(f.b.size() + spec.data_bytes, 0);
  return f.b;
}

// A file parsed from a copy held in a buffer of exactly its size, so that AddressSanitizer flags
// any read past the end; the copy lives as long as the file, which reads its arrays and tensor
// data from it.
struct ParsedCopy {
  std::unique_ptr<uint8_t[]> bytes;
  std::unique_ptr<GgufFile> file;
  const GgufFile* operator->() const { return file.get(); }
};

ParsedCopy ParseCopy(const std::vector<uint8_t>& bytes, size_t size) {
  ParsedCopy p;
  p.bytes.reset(size ? new uint8_t[size] : nullptr);
  if (size) std::memcpy(p.bytes.get(), bytes.data(), size);
  p.file = GgufFile::Parse(p.bytes.get(), size);
  return p;
}

ParsedCopy Parse(const std::vector<uint8_t>& bytes) { return ParseCopy(bytes, bytes.size()); }

std::string ParseError(const std::vector<uint8_t>& bytes) {
  try {
    Parse(bytes);
  } catch (const gpt2::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> Ramp(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101 - 50);
  return v;
}

// Metadata of each writer type.
void AddTestMetadata(GgufWriter& w) {
  w.AddString("general.architecture", "gpt2");
  w.AddU32("gpt2.context_length", 1024);
  w.AddI32("test.negative", -7);
  w.AddI32("test.positive_i32", 12);
  w.AddF32("gpt2.attention.layer_norm_epsilon", 1e-5f);
  w.AddBool("test.flag", true);
  w.AddBool("test.off", false);
  w.AddStringArray("tokenizer.ggml.tokens", {"!", "\"", "Ġthe", "", "héllo"});
  w.AddI32Array("test.ints", {-1, 0, 2147483647, -2147483647 - 1});
}

// A small file with one tensor of each supported type and the metadata above.
GgufWriter MakeWriter() {
  GgufWriter w;
  AddTestMetadata(w);

  const std::vector<float> f32 = Ramp(8 * 3, 0.25f);
  w.AddTensor("t.f32", TensorType::kF32, {8, 3}, f32.data(), f32.size() * 4);

  std::vector<uint16_t> f16(16);
  for (int i = 0; i < 16; ++i) f16[i] = gpt2::F32ToF16(0.5f * i - 3.0f);
  w.AddTensor("t.f16", TensorType::kF16, {16}, f16.data(), f16.size() * 2);

  const std::vector<float> src8 = Ramp(64 * 2, 0.01f);
  std::vector<gpt2::BlockQ8_0> q8(4);
  gpt2::QuantizeRowQ8_0(src8.data(), q8.data(), 128);
  w.AddTensor("t.q8_0", TensorType::kQ8_0, {64, 2}, q8.data(), q8.size() * sizeof(q8[0]));

  const std::vector<float> src4 = Ramp(32 * 3 * 2, 0.02f);
  std::vector<gpt2::BlockQ4_0> q4(6);
  gpt2::QuantizeRowQ4_0(src4.data(), q4.data(), 192);
  w.AddTensor("t.q4_0", TensorType::kQ4_0, {32, 3, 2}, q4.data(), q4.size() * sizeof(q4[0]));

  const std::vector<float> four = Ramp(2 * 1 * 1 * 3, 1.0f);
  w.AddTensor("t.4d", TensorType::kF32, {2, 1, 1, 3}, four.data(), four.size() * 4);
  return w;
}

}  // namespace

TEST_CASE("GGUF writer output parses back with every value and tensor intact", "[format]") {
  for (uint32_t alignment : {32u, 64u}) {
    CAPTURE(alignment);
    const GgufWriter w = MakeWriter();
    const std::vector<uint8_t> bytes = w.Serialize(alignment);
    const auto f = GgufFile::Parse(bytes.data(), bytes.size());
    CHECK(f->version() == 3);
    CHECK(f->alignment() == alignment);
    // general.alignment is written only when it is not the default.
    CHECK((f->Find("general.alignment") != nullptr) == (alignment != 32));
    CHECK(bytes.size() % alignment == 0);  // ggml pads after the last tensor too

    CHECK(f->GetString("general.architecture") == "gpt2");
    CHECK(f->GetU32("gpt2.context_length") == 1024);
    CHECK(f->GetU32("test.positive_i32") == 12);
    CHECK_THROWS_WITH(f->GetU32("test.negative"), Contains("test.negative"));
    CHECK(f->Find("test.negative")->type == GgufValueType::kI32);
    CHECK(f->Find("test.negative")->i == -7);
    CHECK(f->GetF32("gpt2.attention.layer_norm_epsilon") == 1e-5f);
    CHECK(f->Find("test.flag")->type == GgufValueType::kBool);
    CHECK(f->Find("test.flag")->u == 1);
    CHECK(f->Find("test.off")->u == 0);
    CHECK(f->GetStringArray("tokenizer.ggml.tokens") ==
          std::vector<std::string>{"!", "\"", "Ġthe", "", "héllo"});
    const gpt2::GgufValue* ints = f->Find("test.ints");
    REQUIRE(ints != nullptr);
    REQUIRE(ints->type == GgufValueType::kArray);
    CHECK(ints->array_type == GgufValueType::kI32);
    CHECK(ints->array_count == 4);
    const std::vector<gpt2::GgufValue> int_values = f->GetArray("test.ints");
    REQUIRE(int_values.size() == 4);
    CHECK(int_values[0].i == -1);
    CHECK(int_values[2].i == 2147483647);
    CHECK(int_values[3].i == -2147483647 - 1);
    CHECK_THROWS_WITH(f->GetArray("gpt2.context_length"), Contains("u32") && Contains("an array"));

    // Getter errors name the key and the problem.
    CHECK_THROWS_WITH(f->GetU32("missing.key"), Contains("'missing.key'") && Contains("missing"));
    CHECK_THROWS_WITH(f->GetString("gpt2.context_length"), Contains("u32"));
    CHECK_THROWS_WITH(f->GetF32("general.architecture"), Contains("string"));
    CHECK_THROWS_WITH(f->GetStringArray("test.ints"), Contains("array of i32"));
    CHECK_THROWS_AS(f->GetU32("general.architecture"), gpt2::Error);
    CHECK(f->Find("nope") == nullptr);
    CHECK(f->FindTensor("nope") == nullptr);

    REQUIRE(f->tensors().size() == 5);
    const char* names[5] = {"t.f32", "t.f16", "t.q8_0", "t.q4_0", "t.4d"};
    const TensorType types[5] = {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0,
                                 TensorType::kQ4_0, TensorType::kF32};
    const int dims[5] = {2, 1, 2, 3, 4};
    const int64_t elements[5] = {24, 16, 128, 192, 6};
    for (int k = 0; k < 5; ++k) {
      const gpt2::GgufTensor* t = f->FindTensor(names[k]);
      REQUIRE(t != nullptr);
      CHECK(t->type == types[k]);
      CHECK(t->n_dims == dims[k]);
      CHECK(t->NumElements() == elements[k]);
      CHECK(t->nbytes == gpt2::RowBytes(t->type, t->ne[0]) * (t->NumElements() / t->ne[0]));
      CHECK(t->offset % alignment == 0);
      CHECK((t->data - bytes.data()) % alignment == 0);
      CHECK(t->data + t->nbytes <= bytes.data() + bytes.size());
    }
    const gpt2::GgufTensor* q4 = f->FindTensor("t.q4_0");
    CHECK(q4->ne[0] == 32);
    CHECK(q4->ne[1] == 3);
    CHECK(q4->ne[2] == 2);
    CHECK(q4->ne[3] == 1);

    // Tensor bytes are the ones given to the writer.
    const std::vector<float> f32 = Ramp(24, 0.25f);
    CHECK(std::memcmp(f->FindTensor("t.f32")->data, f32.data(), 96) == 0);
    std::vector<float> out(192);
    gpt2::DequantizeRow(TensorType::kF16, f->FindTensor("t.f16")->data, out.data(), 16);
    for (int i = 0; i < 16; ++i) CHECK(out[i] == 0.5f * i - 3.0f);
    const std::vector<float> src8 = Ramp(128, 0.01f);
    std::vector<gpt2::BlockQ8_0> q8(4);
    gpt2::QuantizeRowQ8_0(src8.data(), q8.data(), 128);
    CHECK(std::memcmp(f->FindTensor("t.q8_0")->data, q8.data(), 4 * 34) == 0);
    gpt2::DequantizeRow(TensorType::kQ4_0, q4->data, out.data(), 192);
    const std::vector<float> src4 = Ramp(192, 0.02f);
    for (int i = 0; i < 192; ++i) CHECK(std::fabs(out[i] - src4[i]) <= 1.0 / 8 * 50 * 0.02 * 1.01);
  }
}

TEST_CASE("GGUF writer rejects inconsistent tensors and keys", "[format]") {
  GgufWriter w;
  const float data[64] = {};
  CHECK_THROWS_WITH(w.AddTensor("a", TensorType::kQ8_0, {33}, data, 34), Contains("'a'"));
  CHECK_THROWS_WITH(w.AddTensor("b", TensorType::kF32, {8}, data, 4 * 7), Contains("need"));
  CHECK_THROWS_AS(w.AddTensor("c", TensorType::kF32, {}, data, 0), gpt2::Error);
  CHECK_THROWS_AS(w.AddTensor("c", TensorType::kF32, {1, 1, 1, 1, 1}, data, 4), gpt2::Error);
  CHECK_THROWS_AS(w.AddTensor("c", TensorType::kF32, {0}, data, 0), gpt2::Error);
  CHECK_THROWS_AS(w.AddTensor("c", static_cast<TensorType>(12), {256}, data, 144), gpt2::Error);
  w.AddTensor("d", TensorType::kF32, {4}, data, 16);
  CHECK_THROWS_WITH(w.AddTensor("d", TensorType::kF32, {4}, data, 16), Contains("twice"));
  w.AddU32("k", 1);
  CHECK_THROWS_WITH(w.AddString("k", "x"), Contains("'k'"));
  CHECK_THROWS_AS(w.Serialize(48), gpt2::Error);
}

TEST_CASE("GGUF writer layout: tensors written at its offsets make the Serialize file",
          "[format]") {
  for (uint32_t alignment : {32u, 64u}) {
    CAPTURE(alignment);
    const std::vector<uint8_t> whole = MakeWriter().Serialize(alignment);
    const auto parsed = GgufFile::Parse(whole.data(), whole.size());
    // The same metadata with every tensor declared but not given (AddTensorInfo).
    GgufWriter w;
    AddTestMetadata(w);
    for (const gpt2::GgufTensor& t : parsed->tensors()) {
      w.AddTensorInfo(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims));
    }
    CHECK_THROWS_WITH(w.Serialize(alignment), Contains("without data"));
    const GgufWriter::Layout layout = w.MakeLayout(alignment);
    REQUIRE(layout.size == whole.size());
    REQUIRE(layout.offsets.size() == parsed->tensors().size());
    std::vector<uint8_t> assembled(layout.size, 0);
    std::copy(layout.header.begin(), layout.header.end(), assembled.begin());
    for (size_t i = 0; i < layout.offsets.size(); ++i) {
      const gpt2::GgufTensor& t = parsed->tensors()[i];
      CHECK(layout.nbytes[i] == t.nbytes);
      CHECK(layout.offsets[i] == static_cast<uint64_t>(t.data - whole.data()));
      CHECK(layout.offsets[i] % alignment == 0);
      std::copy(t.data, t.data + t.nbytes, assembled.begin() + layout.offsets[i]);
    }
    CHECK(assembled == whole);
  }
}

TEST_CASE("GGUF WriteFile is atomic and MappedFile reads it back", "[format]") {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string path =
      std::string(tmpdir ? tmpdir : "/tmp") + "/gpt2_format_test_" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".gguf";
  const GgufWriter w = MakeWriter();
  w.WriteFile(path);
  // No temporary is left behind.
  std::FILE* tmp = std::fopen((path + ".tmp").c_str(), "rb");
  CHECK(tmp == nullptr);
  if (tmp) std::fclose(tmp);
  {
    const auto mapped = gpt2::MappedFile::Open(path);
    const std::vector<uint8_t> expected = w.Serialize();
    REQUIRE(mapped->size() == expected.size());
    CHECK(std::memcmp(mapped->data(), expected.data(), expected.size()) == 0);
    const auto f = GgufFile::Parse(mapped->data(), mapped->size());
    CHECK(f->tensors().size() == 5);
    CHECK(f->GetString("general.architecture") == "gpt2");
  }
  std::remove(path.c_str());
  CHECK_THROWS_WITH(gpt2::MappedFile::Open(path), Contains(path));
  // A directory that does not exist: the temporary cannot be created.
  CHECK_THROWS_AS(w.WriteFile("/nonexistent_dir_gpt2/x.gguf"), gpt2::Error);
}

TEST_CASE("GGUF parser reads hand-assembled metadata of every value type (v2 and v3)", "[format]") {
  Bytes kv;
  kv.Str("u8").U32(0).U8(200);
  kv.Str("i8").U32(1).Put<int8_t>(-100);
  kv.Str("u16").U32(2).Put<uint16_t>(60000);
  kv.Str("i16").U32(3).Put<int16_t>(-30000);
  kv.Str("u32").U32(4).U32(4000000000u);
  kv.Str("i32").U32(5).Put<int32_t>(-2000000000);
  kv.Str("f32").U32(6).Put<float>(3.25f);
  kv.Str("bool").U32(7).U8(1);
  kv.Str("string").U32(8).Str("hello");
  kv.Str("u64").U32(10).U64(uint64_t{1} << 40);
  kv.Str("i64").U32(11).Put<int64_t>(-(int64_t{1} << 40));
  kv.Str("f64").U32(12).Put<double>(-0.125);
  kv.Str("arr.u8").U32(9).U32(0).U64(3).U8(1).U8(2).U8(255);
  kv.Str("arr.i16").U32(9).U32(3).U64(2).Put<int16_t>(-1).Put<int16_t>(7);
  kv.Str("arr.f32").U32(9).U32(6).U64(2).Put<float>(0.5f).Put<float>(-1.5f);
  kv.Str("arr.bool").U32(9).U32(7).U64(2).U8(0).U8(1);
  kv.Str("arr.str").U32(9).U32(8).U64(2).Str("a").Str("");
  kv.Str("arr.u64").U32(9).U32(10).U64(1).U64(~uint64_t{0});
  kv.Str("arr.f64").U32(9).U32(12).U64(1).Put<double>(2.5);
  kv.Str("arr.empty").U32(9).U32(4).U64(0);
  for (uint32_t version : {2u, 3u}) {
    CAPTURE(version);
    FileSpec spec;
    spec.version = version;
    spec.kv = kv.b;
    spec.n_kv = 20;
    const std::vector<uint8_t> bytes = Build(spec);
    const auto f = Parse(bytes);
    CHECK(f->version() == version);
    REQUIRE(f->metadata().size() == 20);
    CHECK(f->Find("u8")->type == GgufValueType::kU8);
    CHECK(f->Find("u8")->u == 200);
    CHECK(f->Find("i8")->i == -100);
    CHECK(f->Find("u16")->u == 60000);
    CHECK(f->Find("i16")->i == -30000);
    CHECK(f->GetU32("u32") == 4000000000u);
    CHECK(f->Find("i32")->i == -2000000000);
    CHECK(f->GetF32("f32") == 3.25f);
    CHECK(f->Find("bool")->u == 1);
    CHECK(f->GetString("string") == "hello");
    CHECK(f->Find("u64")->u == uint64_t{1} << 40);
    CHECK(f->Find("i64")->i == -(int64_t{1} << 40));
    CHECK(f->GetF32("f64") == -0.125f);
    CHECK(f->Find("f64")->type == GgufValueType::kF64);
    CHECK(f->GetU32("u8") == 200);  // any integer type that fits
    CHECK_THROWS_WITH(f->GetU32("u64"), Contains("u64") || Contains("1099511627776"));
    CHECK_THROWS_AS(f->GetU32("i8"), gpt2::Error);  // negative
    CHECK(f->Find("arr.u8")->array_type == GgufValueType::kU8);
    const std::vector<gpt2::GgufValue> u8s = f->GetArray("arr.u8");
    REQUIRE(u8s.size() == 3);
    CHECK(u8s[2].u == 255);
    CHECK(f->GetArray("arr.i16")[0].i == -1);
    CHECK(f->GetArray("arr.f32")[1].f == -1.5);
    CHECK(f->GetArray("arr.bool")[1].u == 1);
    CHECK(f->GetStringArray("arr.str") == std::vector<std::string>{"a", ""});
    CHECK(f->GetArray("arr.str")[0].str == "a");
    CHECK(f->GetArray("arr.u64")[0].u == ~uint64_t{0});
    CHECK(f->GetArray("arr.f64")[0].f == 2.5);
    CHECK(f->GetArray("arr.empty").empty());
    REQUIRE(f->tensors().size() == 1);
    CHECK(f->tensors()[0].name == "w");
  }
}

TEST_CASE("GGUF parser fails cleanly on a file truncated at every byte", "[format]") {
  const std::vector<uint8_t> bytes = MakeWriter().Serialize();
  const auto whole = GgufFile::Parse(bytes.data(), bytes.size());
  size_t data_end = 0;  // end of the last tensor's bytes; the rest is alignment padding
  for (const gpt2::GgufTensor& t : whole->tensors()) {
    data_end = std::max(data_end, static_cast<size_t>(t.data - bytes.data()) + t.nbytes);
  }
  REQUIRE(data_end > 0);
  int errors = 0;
  for (size_t len = 0; len < data_end; ++len) {
    try {
      ParseCopy(bytes, len);
      FAIL("a file truncated to " << len << " of " << bytes.size() << " bytes parsed");
    } catch (const gpt2::Error& e) {
      ++errors;
      const std::string msg = e.what();
      if (msg.find("truncated") == std::string::npos) FAIL("len " << len << ": " << msg);
    }
  }
  CHECK(errors == static_cast<int>(data_end));
  // Cutting only the trailing alignment padding leaves every tensor whole: still valid.
  for (size_t len = data_end; len <= bytes.size(); ++len) CHECK_NOTHROW(ParseCopy(bytes, len));
}

TEST_CASE("GGUF parser names the field a truncated tensor info lost", "[format]") {
  FileSpec spec;
  spec.tensors = {TensorSpec(), TensorSpec()};
  spec.tensors[1].name = "blk.0.attn_qkv.weight";
  spec.tensors[1].offset = 256;
  std::vector<uint8_t> bytes = Build(spec);
  // Header (24) + tensor 0 info (8+1 name, 4, 16, 4, 8 = 41) + tensor 1 name (8+21) + n_dims
  // (4) + ne[0] (8): cut in the middle of ne[1].
  const size_t cut = 24 + 41 + 29 + 4 + 8 + 3;
  bytes.resize(cut);
  CHECK(ParseError(bytes) ==
        "GGUF file is truncated: tensor info 1 ('blk.0.attn_qkv.weight') "
        "ends at byte " +
            std::to_string(cut + 5) + " but the file has " + std::to_string(cut) + " bytes");
}

TEST_CASE("GGUF parser rejects bad magic and unsupported versions", "[format]") {
  FileSpec spec;
  spec.magic = 0x4c4d4747;  // "GGML"
  CHECK_THAT(ParseError(Build(spec)), Contains("not a GGUF file") && Contains("GGML"));
  spec = FileSpec();
  spec.version = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("version 1"));
  spec.version = 4;
  CHECK_THAT(ParseError(Build(spec)), Contains("version 4"));
  spec.version = 0x03000000;  // a big-endian v3 file
  CHECK_THAT(ParseError(Build(spec)), Contains("big-endian"));
  CHECK_THAT(ParseError({'G', 'G'}), Contains("truncated"));
}

TEST_CASE("GGUF parser bounds absurd counts and lengths before allocating", "[format]") {
  const uint64_t kHuge = uint64_t{1} << 60;
  FileSpec spec;
  spec.override_n_tensors = true;
  spec.n_tensors = kHuge;
  CHECK_THAT(ParseError(Build(spec)), Contains("1152921504606846976 tensors"));

  spec = FileSpec();
  spec.n_kv = kHuge;
  CHECK_THAT(ParseError(Build(spec)), Contains("1152921504606846976 metadata"));

  spec = FileSpec();  // key length 2^60
  spec.kv = Bytes().U64(kHuge).U32(4).U32(1).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("truncated") && Contains("key of metadata entry 0"));

  spec = FileSpec();  // string value length 2^60
  spec.kv = Bytes().Str("general.name").U32(8).U64(kHuge).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("'general.name'"));

  spec = FileSpec();  // tensor name length 2^60
  spec.tensors.clear();
  std::vector<uint8_t> bytes = Build(spec);
  bytes[8] = 1;  // n_tensors = 1, then a name length of 2^60 followed by a little data
  Bytes tail;
  tail.U64(kHuge).U32(1).U64(32).U32(0).U64(0);
  bytes.insert(bytes.begin() + 24, tail.b.begin(), tail.b.end());
  CHECK_THAT(ParseError(bytes), Contains("name of tensor info 0"));

  for (uint32_t elem_type : {0u, 8u, 12u}) {  // u8, string, f64 arrays of 2^60 elements
    spec = FileSpec();
    spec.kv = Bytes().Str("tokenizer.ggml.tokens").U32(9).U32(elem_type).U64(kHuge).b;
    spec.n_kv = 1;
    CHECK_THAT(ParseError(Build(spec)),
               Contains("'tokenizer.ggml.tokens'") && Contains("1152921504606846976"));
  }
  // A u8 array of 2^25 elements fits in the remaining bytes but exceeds the element cap.
  spec = FileSpec();
  spec.kv = Bytes().Str("big").U32(9).U32(0).U64(uint64_t{1} << 25).b;
  spec.n_kv = 1;
  spec.data_bytes = (size_t{1} << 25) + 256;
  CHECK_THAT(ParseError(Build(spec)), Contains("'big'") && Contains("more than this reader"));
}

TEST_CASE("GGUF parser rejects duplicates, bad values and nested arrays", "[format]") {
  FileSpec spec;
  spec.tensors = {TensorSpec(), TensorSpec()};
  spec.tensors[0].name = spec.tensors[1].name = "blk.0.ffn_up.weight";
  spec.tensors[1].offset = 256;
  CHECK_THAT(ParseError(Build(spec)),
             Contains("'blk.0.ffn_up.weight'") && Contains("more than once"));

  spec = FileSpec();
  spec.kv = Bytes().Str("a").U32(4).U32(1).Str("a").U32(4).U32(2).b;
  spec.n_kv = 2;
  CHECK_THAT(ParseError(Build(spec)), Contains("'a'") && Contains("more than once"));

  spec = FileSpec();
  spec.kv = Bytes().Str("nested").U32(9).U32(9).U64(1).U32(0).U64(0).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("'nested'") && Contains("array of arrays"));

  spec = FileSpec();
  spec.kv = Bytes().Str("weird").U32(13).U32(0).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("'weird'") && Contains("unknown value type 13"));

  spec = FileSpec();
  spec.kv = Bytes().Str("weird").U32(9).U32(77).U64(0).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("'weird'") && Contains("77"));

  spec = FileSpec();
  spec.kv = Bytes().Str("flag").U32(7).U8(2).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("'flag'") && Contains("bool"));

  spec = FileSpec();
  spec.kv = Bytes().Str("general.alignment").U32(4).U32(48).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("48") && Contains("power of two"));

  spec = FileSpec();
  spec.kv = Bytes().Str("general.alignment").U32(4).U32(0).b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("power of two"));

  spec = FileSpec();
  spec.kv = Bytes().Str("general.alignment").U32(8).Str("32").b;
  spec.n_kv = 1;
  CHECK_THAT(ParseError(Build(spec)), Contains("general.alignment") && Contains("u32"));

  // A valid non-default alignment is honoured: offsets must be multiples of it.
  spec = FileSpec();
  spec.kv = Bytes().Str("general.alignment").U32(4).U32(64).b;
  spec.n_kv = 1;
  spec.alignment = 64;
  spec.tensors[0].offset = 32;
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("alignment 64"));
  spec.tensors[0].offset = 64;
  spec.data_bytes = 64 + 256;
  CHECK(Parse(Build(spec))->alignment() == 64);
}

TEST_CASE("GGUF parser rejects bad tensor infos with the tensor's name", "[format]") {
  FileSpec spec;
  spec.tensors[0].name = "blk.0.ffn_up.weight";
  spec.tensors[0].type = 12;  // q4_K
  spec.tensors[0].ne = {256, 2};
  CHECK(ParseError(Build(spec)) ==
        "tensor 'blk.0.ffn_up.weight' has type q4_K, which this engine does not support "
        "(supported: f32, f16, q8_0, q4_0)");
  spec.tensors[0].type = 30;
  CHECK_THAT(ParseError(Build(spec)), Contains("has type bf16"));
  spec.tensors[0].type = 99;
  CHECK_THAT(ParseError(Build(spec)),
             Contains("'blk.0.ffn_up.weight'") && Contains("unknown") && Contains("99"));

  spec = FileSpec();
  spec.tensors[0].ne = {};
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("0 dimensions"));
  spec.tensors[0].ne = {32, 1, 1, 1, 1};
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("5 dimensions"));
  spec.tensors[0].ne = {32, 0};
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("size 0"));

  spec = FileSpec();
  spec.tensors[0].type = 8;  // q8_0
  spec.tensors[0].ne = {33, 2};
  CHECK_THAT(ParseError(Build(spec)),
             Contains("'w'") && Contains("33") && Contains("block size 32"));
  spec.tensors[0].type = 2;  // q4_0
  spec.tensors[0].ne = {48};
  CHECK_THAT(ParseError(Build(spec)), Contains("q4_0") && Contains("48"));

  spec = FileSpec();  // 2^32 * 2^32 elements overflows int64
  spec.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32};
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("overflow"));
  spec.tensors[0].ne = {~uint64_t{0}};
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("overflow"));
  spec.tensors[0].ne = {uint64_t{1} << 40, 1, 1, 1};  // representable but larger than the file
  // Natively the size fits in size_t and the extent check reports it; in wasm (32-bit size_t)
  // the size itself is too large.
  CHECK_THAT(ParseError(Build(spec)),
             Contains("'w'") && (Contains("truncated") || Contains("too large")));

  spec = FileSpec();
  spec.tensors[0].offset = 16;
  CHECK_THAT(ParseError(Build(spec)),
             Contains("'w'") && Contains("offset 16") && Contains("alignment 32"));
  spec.tensors[0].offset = 1 << 20;
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("truncated"));
  spec.tensors[0].offset = ~uint64_t{0} - 31;  // offset + size would wrap around
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'"));
  spec.tensors[0].offset = 0;
  spec.data_bytes = 255;  // the f32 [32, 2] tensor needs 256
  CHECK_THAT(ParseError(Build(spec)), Contains("'w'") && Contains("truncated"));
}

TEST_CASE("GGUF parser accepts a file without tensors and an empty buffer fails", "[format]") {
  FileSpec spec;
  spec.tensors.clear();
  spec.data_bytes = 0;
  spec.kv = Bytes().Str("general.architecture").U32(8).Str("gpt2").b;
  spec.n_kv = 1;
  spec.alignment = 1;  // no padding at all after the metadata
  const std::vector<uint8_t> bytes = Build(spec);
  REQUIRE(bytes.size() == 24 + (8 + 20) + 4 + (8 + 4));
  const auto f = Parse(bytes);
  CHECK(f->tensors().empty());
  CHECK(f->GetString("general.architecture") == "gpt2");
  CHECK_THROWS_AS(GgufFile::Parse(nullptr, 0), gpt2::Error);
}
