#include "sae/transcoders.h"

#include "base/error.h"

namespace gpt2 {

std::string TranscoderPrefix(int layer) { return "tc." + std::to_string(layer); }

TranscoderSet::TranscoderSet(std::shared_ptr<const GgufFile> file, const Config& model) : file_(std::move(file)) {
  const GgufValue* arch = file_->Find("general.architecture");
  if (arch == nullptr || arch->type != GgufValueType::kString || arch->str != "transcoders") {
    throw Error("not a transcoder GGUF (general.architecture is not \"transcoders\"; convert one with "
                "gpt2-convert --transcoders)");
  }
  blocks_.resize(model.n_layer);
  size_t bound = 0;
  for (int l = 0; l < model.n_layer; ++l) {
    if (file_->Find(TranscoderPrefix(l) + ".hook_name") == nullptr) continue;
    auto sae = std::make_unique<Sae>(file_, model.n_embd, TranscoderPrefix(l));
    const SaeConfig& c = sae->config();
    if (!c.transcoder || c.layer != l || c.point != StreamPoint::kResidMid || c.out_point != StreamPoint::kMlpOut ||
        c.architecture != SaeArchitecture::kStandard) {
      throw Error("transcoder GGUF block " + std::to_string(l) +
                  " is not a ReLU transcoder from its blocks.L.hook_resid_mid to its hook_mlp_out");
    }
    bound += 4;
    blocks_[l] = std::move(sae);
  }
  if (bound == 0) throw Error("transcoder GGUF holds no transcoder of the model's blocks 0.." +
                              std::to_string(model.n_layer - 1));
  if (file_->tensors().size() != bound) {
    throw Error("transcoder GGUF has tensors no block of this model uses (a block past its " +
                std::to_string(model.n_layer) + "?)");
  }
}

bool TranscoderSet::complete() const {
  for (const auto& b : blocks_) {
    if (b == nullptr) return false;
  }
  return true;
}

std::shared_ptr<const TranscoderSet> LoadTranscoderFile(const std::string& path, const Config& model) {
  std::shared_ptr<MappedFile> mapping = MappedFile::Open(path);
  std::unique_ptr<GgufFile> parsed = GgufFile::Parse(mapping->data(), mapping->size());
  std::shared_ptr<const GgufFile> file(parsed.release(), [mapping](const GgufFile* f) { delete f; });
  return std::make_shared<const TranscoderSet>(std::move(file), model);
}

}  // namespace gpt2
