#include "convert/sae_convert.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <ostream>

#include "base/error.h"
#include "base/text.h"
#include "convert/gpt2_gguf.h"
#include "format/safetensors.h"
#include "sae/transcoders.h"

namespace gpt2 {

SaeGgufConversion::SaeGgufConversion(const SafetensorsFile& weights, const SaeConfig& c,
                                     const std::string& cfg_json, TensorType type) {
  Plan(SaeGgufPart{&weights, c, cfg_json, "sae"}, type);
  GgufWriter writer;
  writer.AddString("general.architecture", "sae");
  AddSaeMetadata(writer, c, cfg_json);
  for (const Planned& p : tensors_) writer.AddTensorInfo(p.gguf_name, p.type, p.ne);
  layout_ = writer.MakeLayout();
}

SaeGgufConversion::SaeGgufConversion(const std::vector<SaeGgufPart>& parts, TensorType type) {
  if (parts.empty()) throw Error("a transcoder set needs at least one block");
  GgufWriter writer;
  writer.AddString("general.architecture", "transcoders");
  for (const SaeGgufPart& part : parts) {
    if (!part.config.transcoder)
      throw Error("transcoder set part " + part.prefix + " is not a transcoder");
    Plan(part, type);
    AddSaeMetadata(writer, part.config, part.cfg_json, part.prefix);
  }
  for (const Planned& p : tensors_) writer.AddTensorInfo(p.gguf_name, p.type, p.ne);
  layout_ = writer.MakeLayout();
}

void SaeGgufConversion::Plan(const SaeGgufPart& part, TensorType type) {
  const SafetensorsFile& weights = *part.weights;
  const SaeConfig& c = part.config;
  const int64_t d_in = c.d_in, d_sae = c.d_sae;
  const bool jump = c.architecture == SaeArchitecture::kJumpRelu;
  const char* file_name = c.transcoder ? "sae.safetensors" : "sae_weights.safetensors";
  struct Want {
    const char* name;
    std::vector<int64_t> shape;
    bool transpose;
    bool quantized;
  };
  std::vector<Want> want = {{"W_enc", {d_in, d_sae}, true, true},
                            {"b_enc", {d_sae}, false, false},
                            {"W_dec", {d_sae, d_in}, false, c.transcoder},
                            {"b_dec", {d_in}, false, false}};
  if (jump) want.push_back({"threshold", {d_sae}, false, false});
  for (const SafetensorsTensor& t : weights.tensors()) {
    bool known = false;
    for (const Want& w : want) known = known || t.name == w.name;
    if (!known) {
      throw Error(std::string(file_name) + " tensor '" + t.name + "' is not part of a " +
                  (c.transcoder ? std::string("transcoder")
                                : std::string(SaeArchitectureName(c.architecture)) + " SAE") +
                  " (expected W_enc, b_enc, W_dec, b_dec" + (jump ? ", threshold)" : ")"));
    }
  }
  for (const Want& w : want) {
    const SafetensorsTensor* t = weights.Find(w.name);
    if (t == nullptr) throw Error(std::string(file_name) + " has no tensor '" + w.name + "'");
    if (t->shape != w.shape) {
      throw Error("SAE tensor '" + t->name + "' has shape " + ShapeString(t->shape) + " but " +
                  (c.transcoder ? "W_enc" : "cfg.json") + " implies " + ShapeString(w.shape));
    }
    if (SafetensorsDtypeSize(t->dtype) == 0 ||
        (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16")) {
      throw Error("SAE tensor '" + t->name + "' has dtype " + t->dtype +
                  "; expected F32, F16 or BF16");
    }
    Planned p;
    p.gguf_name = part.prefix + "." + w.name;
    p.source = t;
    p.transpose = w.transpose;
    if (w.shape.size() == 1) {
      p.ne = {w.shape[0]};
    } else {
      p.ne = w.transpose ? std::vector<int64_t>{w.shape[0], w.shape[1]}
                         : std::vector<int64_t>{w.shape[1], w.shape[0]};
    }
    p.type = TensorType::kF32;
    if (w.quantized) {
      const bool blocks = type == TensorType::kQ8_0 || type == TensorType::kQ4_0;
      p.type = blocks && p.ne[0] % TypeBlockSize(type) != 0 ? TensorType::kF16 : type;
    }
    tensors_.push_back(std::move(p));
  }
}

void SaeGgufConversion::WriteHeader(uint8_t* file) const {
  std::memcpy(file, layout_.header.data(), layout_.header.size());
}

// A piece at a time, so that converting GPT-2 small's 151 MB SAE in the page holds the input and
// the output and no full f32 copy of a matrix (W_enc alone is 75 MB).
void SaeGgufConversion::EncodeTensor(int i, uint8_t* file, std::ostream* log) const {
  if (i < 0 || i >= num_tensors())
    throw Error("SAE tensor index " + std::to_string(i) + " is out of range");
  const Planned& p = tensors_[i];
  const int64_t cols = p.ne[0], rows = p.ne.size() > 1 ? p.ne[1] : 1;
  const size_t row_bytes = RowBytes(p.type, cols);
  uint8_t* dst = file + layout_.offsets[i];
  // Rows per piece: a multiple of every block size, ~1 MB of f32 for GPT-2 small's SAEs.
  constexpr int64_t kRows = 256;
  // The transpose reads the source in blocks of kTile rows (each the piece's n contiguous
  // features) into `tile`, then writes the tile's columns into `block`: both stay in cache
  // (32 KB and kTile floats per output row), where one source row at a time wrote `block` a
  // column at a time across its whole 768 KB.
  constexpr int64_t kTile = 32;
  std::vector<float> block, tile;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t n = std::min(kRows, rows - r0);
    block.resize(size_t(n) * cols);
    if (p.transpose) {
      // W_enc is [d_in, d_sae]: output row f (a feature) is column f of the source.
      tile.resize(size_t(kTile) * n);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t m = std::min(kTile, cols - c0);
        for (int64_t c = 0; c < m; ++c)
          ReadAsF32(*p.source, (c0 + c) * rows + r0, n, tile.data() + size_t(c) * n);
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t c = 0; c < m; ++c)
            block[size_t(j) * cols + c0 + c] = tile[size_t(c) * n + j];
        }
      }
    } else {
      ReadAsF32(*p.source, r0 * cols, n * cols, block.data());
    }
    EncodeRowsInto(block.data(), n, cols, p.type, dst + size_t(r0) * row_bytes);
  }
  const uint64_t end = i + 1 < num_tensors() ? layout_.offsets[i + 1] : layout_.size;
  const uint64_t used = layout_.offsets[i] + layout_.nbytes[i];
  std::memset(file + used, 0, static_cast<size_t>(end - used));
  if (log) {
    *log << "  " << p.gguf_name << "  " << GgmlTypeName(static_cast<uint32_t>(p.type)) << "  "
         << ShapeString(p.ne) << "\n";
  }
}

SaeGgufInMemory::SaeGgufInMemory(const SafetensorsFile& weights, const SaeConfig& config,
                                 const std::string& cfg_json, TensorType type, uint64_t max_bytes)
    : conversion_(weights, config, cfg_json, type) {
  Begin(max_bytes);
}

SaeGgufInMemory::SaeGgufInMemory(const std::vector<SaeGgufPart>& parts, TensorType type,
                                 uint64_t max_bytes)
    : conversion_(parts, type) {
  Begin(max_bytes);
}

void SaeGgufInMemory::Begin(uint64_t max_bytes) {
  if (size() > max_bytes) throw Error("The converted SAE would not fit in WebAssembly memory.");
  output_.resize(static_cast<size_t>(size()));
  conversion_.WriteHeader(output_.data());
}

int SaeGgufInMemory::ConvertNext() {
  if (done_ < num_tensors()) conversion_.EncodeTensor(done_++, output_.data(), nullptr);
  return done_;
}

const uint8_t* SaeGgufInMemory::output() const {
  if (done_ != num_tensors())
    throw Error("takeOutput called before every SAE tensor was converted");
  return output_.data();
}

void ConvertSaeDir(const std::string& input_dir, const std::string& output_path, TensorType type,
                   std::ostream* log) {
  const std::string dir = input_dir.empty() ? "." : input_dir;
  const std::string cfg_json = ReadWholeFile(dir + "/cfg.json", "SAE cfg.json");
  const SaeConfig config = SaeConfigFromJson(cfg_json);
  const std::string weights_path = dir + "/sae_weights.safetensors";
  std::unique_ptr<MappedFile> mapped = MappedFile::Open(weights_path);
  std::unique_ptr<SafetensorsFile> weights =
      SafetensorsFile::Parse(mapped->data(), mapped->size(), weights_path);
  if (log) {
    *log << "converting " << weights_path << " (" << SaeArchitectureName(config.architecture)
         << " SAE at " << config.hook_name << ", " << config.d_sae << " features) to "
         << output_path << "\n";
  }
  const SaeGgufConversion conversion(*weights, config, cfg_json, type);
  std::vector<uint8_t> file(static_cast<size_t>(conversion.layout().size));
  conversion.WriteHeader(file.data());
  for (int i = 0; i < conversion.num_tensors(); ++i) conversion.EncodeTensor(i, file.data(), log);
  WriteFileAtomically(output_path, file.data(), file.size());
  if (log) *log << "wrote " << conversion.num_tensors() << " tensors to " << output_path << "\n";
}

namespace {

bool FileExists(const std::string& path) { return std::ifstream(path, std::ios::binary).good(); }

}  // namespace

std::string TranscoderFolder(int layer) {
  return "gpt2-small-dun-chl-mlp-tc" + std::to_string(layer);
}

SaeConfig TranscoderPartConfig(const SafetensorsFile& weights, const std::string& sae_json,
                               int layer) {
  const SafetensorsTensor* enc = weights.Find("W_enc");
  if (enc == nullptr) throw Error("sae.safetensors has no tensor 'W_enc'");
  if (enc->shape.size() != 2 || enc->shape[0] < 1 || enc->shape[1] < 1 ||
      enc->shape[0] > (int64_t{1} << 24) || enc->shape[1] > (int64_t{1} << 24)) {
    throw Error("transcoder tensor 'W_enc' has shape " + ShapeString(enc->shape) +
                "; expected [d_in, d_sae]");
  }
  return TranscoderConfigFromJson(sae_json, layer, static_cast<int>(enc->shape[0]),
                                  static_cast<int>(enc->shape[1]));
}

void ConvertTranscoderDir(const std::string& input_dir, const std::string& output_path,
                          TensorType type, std::ostream* log) {
  const std::string dir = input_dir.empty() ? "." : input_dir;
  std::vector<std::unique_ptr<MappedFile>> mapped;
  std::vector<std::unique_ptr<SafetensorsFile>> weights;
  std::vector<SaeGgufPart> parts;
  // GPT-2 XL has 48 blocks; 100 folders cover every GPT-2 and stay a bounded probe of DIR.
  for (int l = 0; l < 100; ++l) {
    const std::string folder = dir + "/" + TranscoderFolder(l);
    const std::string weights_path = folder + "/sae.safetensors";
    if (!FileExists(weights_path)) continue;
    const std::string json_path = folder + "/sae.json";
    const std::string json =
        FileExists(json_path) ? ReadWholeFile(json_path, "transcoder sae.json") : std::string();
    mapped.push_back(MappedFile::Open(weights_path));
    weights.push_back(
        SafetensorsFile::Parse(mapped.back()->data(), mapped.back()->size(), weights_path));
    parts.push_back(SaeGgufPart{weights.back().get(),
                                TranscoderPartConfig(*weights.back(), json, l), json,
                                TranscoderPrefix(l)});
  }
  if (parts.empty()) {
    throw Error("no transcoder in " + dir + " (expected " + TranscoderFolder(0) +
                "/sae.safetensors and the like)");
  }
  if (log)
    *log << "converting " << parts.size() << " transcoder blocks from " << dir << " to "
         << output_path << "\n";
  const SaeGgufConversion conversion(parts, type);
  // The layout's size is 64-bit; a 32-bit size_t (wasm32) must not wrap it.
  if (conversion.layout().size > std::numeric_limits<size_t>::max())
    throw Error("the transcoder GGUF is too large");
  std::vector<uint8_t> file(static_cast<size_t>(conversion.layout().size));
  conversion.WriteHeader(file.data());
  for (int i = 0; i < conversion.num_tensors(); ++i) conversion.EncodeTensor(i, file.data(), log);
  WriteFileAtomically(output_path, file.data(), file.size());
  if (log) *log << "wrote " << conversion.num_tensors() << " tensors to " << output_path << "\n";
}

}  // namespace gpt2
