#include "convert/convert.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/text.h"
#include "convert/gpt2_gguf.h"
#include "format/gguf.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool FileExists(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return f.good();
}

int PositiveInt(const JsonValue& root, const char* key, bool required, int fallback) {
  const JsonValue* v = root.Find(key);
  if (v == nullptr || v->kind == JsonValue::Kind::kNull) {
    if (required) throw Error(std::string("config.json has no \"") + key + "\"");
    return fallback;
  }
  if (v->kind != JsonValue::Kind::kNumber || !v->is_integer || v->integer <= 0 ||
      v->integer > (int64_t{1} << 30)) {
    throw Error(std::string("config.json \"") + key + "\" must be a positive integer");
  }
  return static_cast<int>(v->integer);
}

// One tensor the converter expects: Hugging Face name (without "transformer."), GGUF name,
// PyTorch shape, and whether it is a Conv1D weight stored [in, out].
struct Expected {
  std::string hf_name;
  std::string gguf_name;
  std::vector<int64_t> shape;
  bool conv1d = false;
};

std::vector<Expected> ExpectedTensors(const Config& c) {
  const int64_t C = c.n_embd, F = c.n_ff, V = c.n_vocab, T = c.n_ctx;
  std::vector<Expected> e;
  e.push_back({"wte.weight", "token_embd.weight", {V, C}});
  e.push_back({"wpe.weight", "position_embd.weight", {T, C}});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    auto blk = [&](const char* part) { return Gpt2BlockTensorName(l, part); };
    e.push_back({h + "ln_1.weight", blk("attn_norm.weight"), {C}});
    e.push_back({h + "ln_1.bias", blk("attn_norm.bias"), {C}});
    e.push_back({h + "attn.c_attn.weight", blk("attn_qkv.weight"), {C, 3 * C}, true});
    e.push_back({h + "attn.c_attn.bias", blk("attn_qkv.bias"), {3 * C}});
    e.push_back({h + "attn.c_proj.weight", blk("attn_output.weight"), {C, C}, true});
    e.push_back({h + "attn.c_proj.bias", blk("attn_output.bias"), {C}});
    e.push_back({h + "ln_2.weight", blk("ffn_norm.weight"), {C}});
    e.push_back({h + "ln_2.bias", blk("ffn_norm.bias"), {C}});
    e.push_back({h + "mlp.c_fc.weight", blk("ffn_up.weight"), {C, F}, true});
    e.push_back({h + "mlp.c_fc.bias", blk("ffn_up.bias"), {F}});
    e.push_back({h + "mlp.c_proj.weight", blk("ffn_down.weight"), {F, C}, true});
    e.push_back({h + "mlp.c_proj.bias", blk("ffn_down.bias"), {C}});
  }
  e.push_back({"ln_f.weight", "output_norm.weight", {C}});
  e.push_back({"ln_f.bias", "output_norm.bias", {C}});
  return e;
}

std::string StripPrefix(const std::string& name) {
  static const std::string kPrefix = "transformer.";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) return name.substr(kPrefix.size());
  return name;
}

// Whether two tensors of one element count hold the same float32 bit patterns; for one dtype
// that is equal bytes (F16 and BF16 widen exactly).
bool SameValues(const SafetensorsTensor& a, const SafetensorsTensor& b) {
  if (a.dtype == b.dtype) return a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
  const std::vector<float> x = ReadAsF32(a), y = ReadAsF32(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Every check the conversion makes, and what it writes: the tensors in GGUF order, each with its
// source, storage type and ggml shape. lm_head.weight, when present, is planned as output.weight
// unless it equals wte bit for bit.
std::vector<Gpt2GgufConversion::Planned> PlanTensors(const SafetensorsFile& checkpoint,
                                                     const Config& config, TensorType matrix_type,
                                                     const bool* lm_head_tied,
                                                     ConvertStats* stats) {
  const std::vector<Expected> expected = ExpectedTensors(config);
  std::map<std::string, size_t> expected_index;
  for (size_t i = 0; i < expected.size(); ++i) expected_index[expected[i].hf_name] = i;

  // Index the checkpoint by name without the "transformer." prefix, and reject strays.
  std::map<std::string, const SafetensorsTensor*> by_name;
  const SafetensorsTensor* lm_head = nullptr;
  for (const SafetensorsTensor& t : checkpoint.tensors()) {
    const std::string name = StripPrefix(t.name);
    if (EndsWith(name, ".attn.bias") || EndsWith(name, ".attn.masked_bias")) {
      ++stats->tensors_skipped;  // causal-mask buffers, not weights
      continue;
    }
    if (name == "lm_head.weight") {
      lm_head = &t;
      continue;
    }
    if (expected_index.count(name) == 0) {
      throw Error("checkpoint tensor '" + t.name + "' is not part of a GPT-2 with " +
                  std::to_string(config.n_layer) + " layers (cannot map it to a GGUF name)");
    }
    if (!by_name.emplace(name, &t).second) {
      throw Error("checkpoint has tensor '" + name + "' twice (with and without 'transformer.')");
    }
  }

  auto plan = [&](const std::string& gguf_name, const SafetensorsTensor* source, bool conv1d) {
    Gpt2GgufConversion::Planned p;
    p.gguf_name = gguf_name;
    p.source = source;
    p.conv1d = conv1d;
    // ggml's ne is the PyTorch shape reversed: the last (contiguous) dimension is ne[0].
    // Conv1D computes x @ W with W [in, out]; ggml's mul_mat wants rows of `in` elements.
    p.ne.assign(source->shape.rbegin(), source->shape.rend());
    if (conv1d) std::swap(p.ne[0], p.ne[1]);
    p.type = Gpt2TensorStorageType(gguf_name, static_cast<int>(p.ne.size()), p.ne[0], matrix_type);
    return p;
  };
  std::vector<Gpt2GgufConversion::Planned> planned;
  const SafetensorsTensor* wte = nullptr;
  for (const Expected& e : expected) {
    auto it = by_name.find(e.hf_name);
    if (it == by_name.end()) {
      throw Error("checkpoint is missing tensor '" + e.hf_name + "' (or 'transformer." + e.hf_name +
                  "')");
    }
    const SafetensorsTensor& t = *it->second;
    if (t.shape != e.shape) {
      throw Error("tensor '" + t.name + "' has shape " + ShapeString(t.shape) +
                  " but config.json implies " + ShapeString(e.shape));
    }
    planned.push_back(plan(e.gguf_name, &t, e.conv1d));
    if (e.hf_name == "wte.weight") wte = &t;
  }

  if (lm_head != nullptr) {
    const std::vector<int64_t> shape = {config.n_vocab, config.n_embd};
    if (lm_head->shape != shape) {
      throw Error("tensor '" + lm_head->name + "' has shape " + ShapeString(lm_head->shape) +
                  " but config.json implies " + ShapeString(shape));
    }
    const bool tied = lm_head_tied != nullptr ? *lm_head_tied : SameValues(*lm_head, *wte);
    if (!tied) {
      planned.push_back(plan("output.weight", lm_head, false));
      stats->lm_head_tied = false;
    }
  }
  return planned;
}

int64_t Rows(const std::vector<int64_t>& ne) {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  return rows;
}

// Encodes rows [first_row, first_row + n_rows) of tensor p, whose checkpoint bytes for those rows
// are `source`, into dst (their RowBytes * n_rows bytes). A transposed (Conv1D) tensor is encoded
// whole. An F32 tensor that needs no transpose is encoded straight from the checkpoint's bytes (a
// little-endian host, as the file): GPT-2's token embedding alone would otherwise take another
// 154 MB of the page's wasm heap.
void EncodePlanned(const Gpt2GgufConversion::Planned& p, const uint8_t* source, int64_t first_row,
                   int64_t n_rows, uint8_t* dst) {
  const SafetensorsTensor& t = *p.source;
  if (!p.conv1d && t.dtype == "F32" && reinterpret_cast<uintptr_t>(source) % alignof(float) == 0) {
    EncodeRowsInto(reinterpret_cast<const float*>(source), n_rows, p.ne[0], p.type, dst);
    return;
  }
  SafetensorsTensor rows = t;
  rows.data = source;
  if (!p.conv1d) rows.shape = {n_rows, p.ne[0]};
  rows.nbytes = static_cast<size_t>(rows.NumElements()) * SafetensorsDtypeSize(t.dtype);
  std::vector<float> values = ReadAsF32(rows);
  if (p.conv1d) {
    // Conv1D weights are [in, out]; ggml's rows hold `in` elements.
    const int64_t in = t.shape[0], out = t.shape[1];
    std::vector<float> transposed(values.size());
    for (int64_t i = 0; i < in; ++i) {
      for (int64_t o = 0; o < out; ++o) transposed[o * in + i] = values[i * out + o];
    }
    values.swap(transposed);
  }
  EncodeRowsInto(values.data(), n_rows, p.ne[0], p.type, dst);
}

void LogTensor(const Gpt2GgufConversion::Planned& p, std::ostream* log) {
  if (log) {
    *log << "  " << p.gguf_name << "  " << GgmlTypeName(static_cast<uint32_t>(p.type)) << "  "
         << ShapeString(p.ne) << "\n";
  }
}

}  // namespace

TensorType ParseConvertType(const std::string& name) {
  if (name == "f32") return TensorType::kF32;
  if (name == "f16") return TensorType::kF16;
  if (name == "q8_0") return TensorType::kQ8_0;
  if (name == "q4_0") return TensorType::kQ4_0;
  throw Error("unknown output type '" + name + "'; expected f32, f16, q8_0 or q4_0");
}

Config ConfigFromHfJson(const std::string& json_text) {
  JsonValue root = ParseJson(json_text, "config.json");
  if (root.kind != JsonValue::Kind::kObject) throw Error("config.json is not a JSON object");
  if (const JsonValue* mt = root.Find("model_type")) {
    if (mt->kind != JsonValue::Kind::kString || mt->str != "gpt2") {
      throw Error("config.json model_type is not \"gpt2\"; only GPT-2 checkpoints are supported");
    }
  }
  if (const JsonValue* act = root.Find("activation_function")) {
    // GPT-2's MLP uses the tanh approximation of GELU; so do llama.cpp's graph and ours.
    if (act->kind != JsonValue::Kind::kString ||
        (act->str != "gelu_new" && act->str != "gelu_pytorch_tanh")) {
      throw Error("config.json activation_function \"" + act->str +
                  "\" is not supported (GPT-2 uses gelu_new)");
    }
  }
  for (const char* flag : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    const JsonValue* v = root.Find(flag);
    if (v && v->kind == JsonValue::Kind::kBool && v->boolean) {
      throw Error(std::string("config.json sets ") + flag +
                  ", which llama.cpp's GPT-2 does not implement");
    }
  }
  Config c;
  c.n_layer = PositiveInt(root, "n_layer", true, 0);
  c.n_head = PositiveInt(root, "n_head", true, 0);
  c.n_embd = PositiveInt(root, "n_embd", true, 0);
  c.n_vocab = PositiveInt(root, "vocab_size", true, 0);
  // n_positions is the size of wpe; older configs also carry n_ctx (the same number).
  c.n_ctx = PositiveInt(root, "n_positions", false, 0);
  if (c.n_ctx == 0) c.n_ctx = PositiveInt(root, "n_ctx", true, 0);
  c.n_ff = PositiveInt(root, "n_inner", false, 4 * c.n_embd);
  if (const JsonValue* eps = root.Find("layer_norm_epsilon")) {
    if (eps->kind != JsonValue::Kind::kNumber || !(eps->number > 0)) {
      throw Error("config.json layer_norm_epsilon must be a positive number");
    }
    c.ln_eps = static_cast<float>(eps->number);
  }
  if (c.n_embd % c.n_head != 0) {
    throw Error("config.json n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                std::to_string(c.n_head));
  }
  return c;
}

std::string Gpt2DefaultModelName(const Config& c) {
  const ReleasedGpt2* released = FindReleasedGpt2(c);
  return released ? released->name : "";
}

ConvertStats BuildGpt2Gguf(const SafetensorsFile& checkpoint, const Config& config,
                           const Tokenizer* tokenizer, TensorType matrix_type, GgufWriter* writer,
                           std::ostream* log, const std::string& model_name) {
  ConvertStats stats;
  const std::vector<Gpt2GgufConversion::Planned> planned =
      PlanTensors(checkpoint, config, matrix_type, nullptr, &stats);
  AddGpt2Metadata(*writer, config, tokenizer, LlamaFileType(matrix_type), model_name);
  for (const Gpt2GgufConversion::Planned& p : planned) {
    std::vector<uint8_t> bytes(RowBytes(p.type, p.ne[0]) * static_cast<size_t>(Rows(p.ne)));
    EncodePlanned(p, p.source->data, 0, Rows(p.ne), bytes.data());
    writer->AddTensor(p.gguf_name, p.type, p.ne, bytes.data(), bytes.size());
    LogTensor(p, log);
  }
  stats.tensors_written = static_cast<int>(planned.size());
  return stats;
}

Gpt2GgufConversion::Gpt2GgufConversion(const SafetensorsFile& checkpoint, const Config& config,
                                       const Tokenizer* tokenizer, TensorType matrix_type,
                                       const std::string& model_name, const bool* lm_head_tied) {
  tensors_ = PlanTensors(checkpoint, config, matrix_type, lm_head_tied, &stats_);
  GgufWriter writer;
  AddGpt2Metadata(writer, config, tokenizer, LlamaFileType(matrix_type), model_name);
  for (const Planned& p : tensors_) writer.AddTensorInfo(p.gguf_name, p.type, p.ne);
  layout_ = writer.MakeLayout();
  stats_.tensors_written = num_tensors();
}

void Gpt2GgufConversion::WriteHeader(uint8_t* file) const {
  std::memcpy(file, layout_.header.data(), layout_.header.size());
}

void Gpt2GgufConversion::EncodeTensor(int i, uint8_t* file, std::ostream* log) const {
  CheckIndex(i);
  EncodeRows(i, 0, Rows(tensors_[i].ne), tensors_[i].source->data, file);
  LogTensor(tensors_[i], log);
}

void Gpt2GgufConversion::EncodeRows(int i, int64_t first_row, int64_t n_rows, const uint8_t* source,
                                    uint8_t* file) const {
  CheckIndex(i);
  const Planned& p = tensors_[i];
  const int64_t rows = Rows(p.ne);
  if (first_row < 0 || n_rows < 1 || first_row + n_rows > rows || (p.conv1d && n_rows != rows)) {
    throw Error("rows " + std::to_string(first_row) + "+" + std::to_string(n_rows) +
                " are not a piece of '" + p.gguf_name + "' (" + std::to_string(rows) + " rows" +
                (p.conv1d ? ", encoded whole)" : ")"));
  }
  const uint64_t row_bytes = RowBytes(p.type, p.ne[0]);
  uint8_t* dst = file + layout_.offsets[i] + first_row * row_bytes;
  EncodePlanned(p, source, first_row, n_rows, dst);
  if (first_row + n_rows == rows) {  // the padding up to the next tensor
    const uint64_t end = i + 1 < num_tensors() ? layout_.offsets[i + 1] : layout_.size;
    const uint64_t used = layout_.offsets[i] + layout_.nbytes[i];
    std::memset(file + used, 0, static_cast<size_t>(end - used));
  }
}

int64_t Gpt2GgufConversion::rows(int i) const {
  CheckIndex(i);
  return Rows(tensors_[i].ne);
}

void Gpt2GgufConversion::CheckIndex(int i) const {
  if (i < 0 || i >= num_tensors()) {
    throw Error("tensor index " + std::to_string(i) + " is outside 0.." +
                std::to_string(num_tensors() - 1));
  }
}

ConvertStats ConvertHfGpt2(const std::string& input_dir, const std::string& output_path,
                           TensorType matrix_type, std::ostream* log,
                           const std::string& model_name) {
  const std::string dir = input_dir.empty() ? "." : input_dir;
  const Config hf = ConfigFromHfJson(ReadWholeFile(dir + "/config.json", "Hugging Face config"));

  std::unique_ptr<Tokenizer> tokenizer;
  if (FileExists(dir + "/vocab.json") && FileExists(dir + "/merges.txt")) {
    tokenizer = Tokenizer::FromFiles(dir + "/vocab.json", dir + "/merges.txt");
  } else if (FileExists(dir + "/encoder.json") && FileExists(dir + "/vocab.bpe")) {
    tokenizer = Tokenizer::FromFiles(dir + "/encoder.json", dir + "/vocab.bpe");
  } else {
    throw Error(dir +
                " has no vocabulary: expected vocab.json + merges.txt (Hugging Face) or "
                "encoder.json + vocab.bpe (OpenAI)");
  }

  const std::string weights_path = dir + "/model.safetensors";
  if (!FileExists(weights_path)) {
    throw Error(weights_path +
                " not found (sharded or PyTorch .bin checkpoints are not supported)");
  }
  std::unique_ptr<MappedFile> mapped = MappedFile::Open(weights_path);
  std::unique_ptr<SafetensorsFile> checkpoint =
      SafetensorsFile::Parse(mapped->data(), mapped->size(), weights_path);

  if (log) *log << "converting " << weights_path << " to " << output_path << "\n";
  const Gpt2GgufConversion conversion(*checkpoint, hf, tokenizer.get(), matrix_type,
                                      model_name.empty() ? Gpt2DefaultModelName(hf) : model_name);
  // One copy of the output, each tensor encoded into place (BuildGpt2Gguf + GgufWriter would
  // hold every tensor and then the serialized file).
  std::vector<uint8_t> file(static_cast<size_t>(conversion.layout().size));
  conversion.WriteHeader(file.data());
  for (int i = 0; i < conversion.num_tensors(); ++i) conversion.EncodeTensor(i, file.data(), log);
  WriteFileAtomically(output_path, file.data(), file.size());
  const ConvertStats& stats = conversion.stats();
  if (log) {
    *log << "wrote " << stats.tensors_written << " tensors (" << stats.tensors_skipped
         << " mask buffers skipped, lm_head "
         << (stats.lm_head_tied ? "tied to token_embd" : "kept as output.weight") << ") to "
         << output_path << "\n";
  }
  return stats;
}

Gpt2GgufInMemory::Gpt2GgufInMemory(const SafetensorsFile& checkpoint, const Config& config,
                                   const Tokenizer* tokenizer, TensorType matrix_type,
                                   const std::string& model_name, uint64_t max_bytes)
    : conversion_(checkpoint, config, tokenizer, matrix_type, model_name) {
  const uint64_t bytes = size();
  if (bytes > max_bytes) throw Error("The converted model would not fit in WebAssembly memory.");
  output_ = static_cast<uint8_t*>(std::malloc(static_cast<size_t>(bytes)));
  if (output_ == nullptr) {
    throw Error("Not enough memory for the converted model (" + std::to_string(bytes >> 20) +
                " MB).");
  }
  conversion_.WriteHeader(output_);
}

Gpt2GgufInMemory::~Gpt2GgufInMemory() { std::free(output_); }

int Gpt2GgufInMemory::ConvertNext() {
  if (done_ < num_tensors()) conversion_.EncodeTensor(done_++, output_, nullptr);
  return done_;
}

const uint8_t* Gpt2GgufInMemory::output() const {
  if (done_ != num_tensors()) throw Error("takeOutput called before every tensor was converted");
  return output_;
}

namespace {

// Elements of lm_head (and of wte) per piece of the tie check.
uint64_t TieElements(const SafetensorsTensor& a, const SafetensorsTensor& b, uint64_t piece_bytes) {
  const uint64_t widest = std::max(SafetensorsDtypeSize(a.dtype), SafetensorsDtypeSize(b.dtype));
  return std::max<uint64_t>(1, piece_bytes / widest);
}

// Rows of planned tensor p that one piece holds: a ggml-layout matrix in rows up to piece_bytes,
// anything else whole.
int64_t PieceRows(const Gpt2GgufConversion::Planned& p, int64_t rows, uint64_t piece_bytes) {
  if (p.conv1d) return rows;
  const uint64_t row_bytes = static_cast<uint64_t>(p.ne[0]) * SafetensorsDtypeSize(p.source->dtype);
  return std::max<int64_t>(1,
                           std::min<int64_t>(rows, static_cast<int64_t>(piece_bytes / row_bytes)));
}

}  // namespace

Gpt2GgufStream::Gpt2GgufStream(const uint8_t* prefix, size_t prefix_size, uint64_t file_size,
                               const Config& config, const Tokenizer* tokenizer,
                               TensorType matrix_type, const std::string& model_name,
                               uint64_t max_bytes, uint64_t piece_bytes)
    : header_(SafetensorsFile::ParseHeader(prefix, prefix_size, file_size, "model.safetensors")),
      config_(config),
      tokenizer_(tokenizer),
      type_(matrix_type),
      name_(model_name),
      max_bytes_(max_bytes),
      piece_bytes_(piece_bytes) {
  // Planned as tied first: every check is made now, before any piece is fetched.
  const bool tied = true;
  plan_ = std::make_unique<Gpt2GgufConversion>(*header_, config_, tokenizer_, type_, name_, &tied);
  for (const SafetensorsTensor& t : header_->tensors()) {
    const std::string name = StripPrefix(t.name);
    if (name == "lm_head.weight") lm_head_ = &t;
    if (name == "wte.weight") wte_ = &t;
  }
  for (int i = 0; i < plan_->num_tensors(); ++i) total_ += plan_->planned(i).source->nbytes;
  if (lm_head_ != nullptr) {
    tie_known_ = false;
    total_ += lm_head_->nbytes + wte_->nbytes;
  } else {
    Begin();
  }
}

Gpt2GgufStream::~Gpt2GgufStream() { std::free(output_); }

void Gpt2GgufStream::Begin() {
  tie_known_ = true;
  lm_head_piece_ = {};
  if (!tied_) {
    plan_ =
        std::make_unique<Gpt2GgufConversion>(*header_, config_, tokenizer_, type_, name_, &tied_);
    total_ += lm_head_->nbytes;
  }
  for (int i = 0; i < plan_->num_tensors(); ++i) {
    const Gpt2GgufConversion::Planned& p = plan_->planned(i);
    const int64_t rows = plan_->rows(i);
    const uint64_t row_bytes = p.source->nbytes / static_cast<uint64_t>(rows);
    const int64_t step = PieceRows(p, rows, piece_bytes_);
    for (int64_t r = 0; r < rows; r += step) {
      const int64_t n = std::min(step, rows - r);
      pieces_.push_back({i,
                         r,
                         n,
                         {p.source->offset + static_cast<uint64_t>(r) * row_bytes,
                          static_cast<uint64_t>(n) * row_bytes}});
    }
    rows_left_.push_back(rows);
  }
  std::sort(pieces_.begin(), pieces_.end(),
            [](const Piece& a, const Piece& b) { return a.range.offset < b.range.offset; });
  const uint64_t bytes = plan_->layout().size;
  if (bytes > max_bytes_) throw Error("The converted model would not fit in WebAssembly memory.");
  output_ = static_cast<uint8_t*>(std::malloc(static_cast<size_t>(bytes)));
  if (output_ == nullptr) {
    throw Error("Not enough memory for the converted model (" + std::to_string(bytes >> 20) +
                " MB).");
  }
  plan_->WriteHeader(output_);
}

bool Gpt2GgufStream::done() const { return tie_known_ && piece_ == pieces_.size(); }

uint64_t Gpt2GgufStream::output_size() const { return tie_known_ ? plan_->layout().size : 0; }

Gpt2GgufStream::Range Gpt2GgufStream::next() const {
  if (!tie_known_) {
    const bool wte_turn = !lm_head_piece_.empty();
    const SafetensorsTensor& t = wte_turn ? *wte_ : *lm_head_;
    const uint64_t n = std::min<uint64_t>(TieElements(*lm_head_, *wte_, piece_bytes_),
                                          static_cast<uint64_t>(t.NumElements()) - tie_elements_);
    const uint64_t size = SafetensorsDtypeSize(t.dtype);
    return {t.offset + tie_elements_ * size, n * size};
  }
  if (done()) return {};
  return pieces_[piece_].range;
}

void Gpt2GgufStream::Feed(const uint8_t* bytes, uint64_t n) {
  const Range want = next();
  if (want.bytes == 0)
    throw Error("the conversion is complete; no more of model.safetensors is needed");
  if (n != want.bytes) {
    throw Error("model.safetensors piece at " + std::to_string(want.offset) + " should be " +
                std::to_string(want.bytes) + " bytes, got " + std::to_string(n));
  }
  if (!tie_known_) {
    if (lm_head_piece_.empty()) {
      lm_head_piece_.assign(bytes, bytes + n);
    } else {
      const uint64_t count = lm_head_piece_.size() / SafetensorsDtypeSize(lm_head_->dtype);
      SafetensorsTensor a = *lm_head_, b = *wte_;
      a.shape = b.shape = {static_cast<int64_t>(count)};
      a.data = lm_head_piece_.data();
      a.nbytes = lm_head_piece_.size();
      b.data = bytes;
      b.nbytes = static_cast<size_t>(n);
      tied_ = SameValues(a, b);
      tie_elements_ += count;
      lm_head_piece_.clear();
      if (!tied_ || tie_elements_ == static_cast<uint64_t>(lm_head_->NumElements())) {
        // The rest of the check is not fetched once a difference is found.
        const uint64_t left = static_cast<uint64_t>(lm_head_->NumElements()) - tie_elements_;
        total_ -=
            left * (SafetensorsDtypeSize(lm_head_->dtype) + SafetensorsDtypeSize(wte_->dtype));
        fed_ += n;
        Begin();
        return;
      }
    }
    fed_ += n;
    return;
  }
  const Piece& piece = pieces_[piece_++];
  plan_->EncodeRows(piece.tensor, piece.first_row, piece.n_rows, bytes, output_);
  fed_ += n;
  if ((rows_left_[piece.tensor] -= piece.n_rows) == 0) ++tensors_done_;
}

const uint8_t* Gpt2GgufStream::output() const {
  if (!done()) throw Error("takeOutput called before every tensor was converted");
  return output_;
}

}  // namespace gpt2
