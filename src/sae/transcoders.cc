#include "sae/transcoders.h"

#include <algorithm>

#include "base/error.h"

namespace gpt2 {

std::string TranscoderPrefix(int layer) { return "tc." + std::to_string(layer); }

TranscoderSet::TranscoderSet(std::shared_ptr<const GgufFile> file, const Config& model) {
  const GgufValue* arch = file->Find("general.architecture");
  if (arch == nullptr || arch->type != GgufValueType::kString || arch->str != "transcoders") {
    throw Error(
        "not a transcoder GGUF (general.architecture is not \"transcoders\"; convert one with "
        "gpt2-convert --transcoders)");
  }
  blocks_.resize(model.n_layer);
  size_t bound = 0;
  for (int l = 0; l < model.n_layer; ++l) {
    if (file->Find(TranscoderPrefix(l) + ".hook_name") == nullptr) continue;
    auto sae = std::make_shared<const Sae>(file, model.n_embd, TranscoderPrefix(l));
    const SaeConfig& c = sae->config();
    if (!c.transcoder || c.layer != l || c.point != StreamPoint::kResidMid ||
        c.out_point != StreamPoint::kMlpOut || c.architecture != SaeArchitecture::kStandard) {
      throw Error("transcoder GGUF block " + std::to_string(l) +
                  " is not a ReLU transcoder from its blocks.L.hook_resid_mid to its hook_mlp_out");
    }
    bound += 4;
    blocks_[l] = std::move(sae);
  }
  if (bound == 0)
    throw Error("transcoder GGUF holds no transcoder of the model's blocks 0.." +
                std::to_string(model.n_layer - 1));
  if (file->tensors().size() != bound) {
    throw Error("transcoder GGUF has tensors no block of this model uses (a block past its " +
                std::to_string(model.n_layer) + "?)");
  }
}

TranscoderSet::TranscoderSet(const TranscoderSet& base, const TranscoderSet& added)
    : blocks_(base.blocks_) {
  if (added.n_layer() != base.n_layer())
    throw Error("transcoder sets of models with different block counts");
  for (int l = 0; l < n_layer(); ++l) {
    if (added.blocks_[l] != nullptr) blocks_[l] = added.blocks_[l];
  }
}

std::vector<int> TranscoderSet::blocks() const {
  std::vector<int> present;
  for (int l = 0; l < n_layer(); ++l) {
    if (blocks_[l] != nullptr) present.push_back(l);
  }
  return present;
}

bool TranscoderSet::complete() const {
  for (const auto& b : blocks_) {
    if (b == nullptr) return false;
  }
  return true;
}

std::shared_ptr<const TranscoderSet> LoadTranscoderFile(const std::string& path,
                                                        const Config& model) {
  std::shared_ptr<MappedFile> mapping = MappedFile::Open(path);
  std::unique_ptr<GgufFile> parsed = GgufFile::Parse(mapping->data(), mapping->size());
  std::shared_ptr<const GgufFile> file(parsed.release(),
                                       [mapping](const GgufFile* f) { delete f; });
  return std::make_shared<const TranscoderSet>(std::move(file), model);
}

std::shared_ptr<const TranscoderSet> TranscodersFromBytes(std::vector<uint8_t> bytes,
                                                          const Config& model) {
  auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  std::unique_ptr<GgufFile> parsed = GgufFile::Parse(held->data(), held->size());
  // The parsed file points into the bytes: they live as long as it does.
  std::shared_ptr<const GgufFile> file(parsed.release(), [held](const GgufFile* f) { delete f; });
  return std::make_shared<const TranscoderSet>(std::move(file), model);
}

std::vector<StreamEdit> TranscoderClampEdits(const TranscoderSet& set,
                                             const std::vector<TranscoderClamp>& clamps,
                                             int n_ctx) {
  std::vector<StreamEdit> edits;
  for (int l = 0; l < set.n_layer(); ++l) {
    std::vector<TranscoderClamp> here;
    for (const TranscoderClamp& c : clamps) {
      if (c.layer < 0 || c.layer >= set.n_layer()) {
        throw Error("clamp: block " + std::to_string(c.layer) + " is out of range 0.." +
                    std::to_string(set.n_layer() - 1));
      }
      if (c.layer == l) here.push_back(c);
    }
    if (here.empty()) continue;
    const Sae* tc = set.block(l);
    if (tc == nullptr)
      throw Error("clamp: the set has no transcoder of block " + std::to_string(l));
    std::vector<int> features;
    for (const TranscoderClamp& c : here) {
      tc->CheckFeature(c.feature);
      if (c.position < 0 || c.position >= n_ctx) {
        throw Error("clamp: position " + std::to_string(c.position) + " is out of range 0.." +
                    std::to_string(n_ctx - 1));
      }
      features.push_back(c.feature);
    }
    // What the resid_mid edit read for the mlp_out edit: acts [rows, features] of positions
    // pos0.. . The two may see different rows: the last block's MLP runs on the last row alone
    // when nothing observes the others.
    struct Shared {
      int pos0 = 0, rows = 0;
      std::vector<float> acts;
      SaeScratch scratch;
      std::vector<float> row;
    };
    auto shared = std::make_shared<Shared>();
    const std::string name = "transcoder clamp at blocks." + std::to_string(l) + ".hook_mlp_out";
    StreamEdit read{l, StreamPoint::kResidMid, nullptr, nullptr, name + " (reading resid_mid)"};
    read.edit = [tc, features, shared](int pos0, int rows, float* x) {
      shared->pos0 = pos0;
      shared->rows = rows;
      shared->acts.resize(size_t(rows) * features.size());
      tc->EncodeFeatures(x, rows, features.data(), static_cast<int>(features.size()),
                         shared->acts.data(), nullptr, shared->scratch);
    };
    StreamEdit write{l, StreamPoint::kMlpOut, nullptr, nullptr, name};
    write.edit = [tc, here, shared](int pos0, int rows, float* x) {
      const int C = tc->config().d_in;
      shared->row.resize(C);
      const int K = static_cast<int>(here.size());
      for (int j = 0; j < K; ++j) {
        const int r = here[j].position - pos0, read_r = here[j].position - shared->pos0;
        if (r < 0 || r >= rows || read_r < 0 || read_r >= shared->rows) continue;
        const float delta = here[j].value - shared->acts[size_t(read_r) * K + j];
        tc->DecoderRowInto(here[j].feature, shared->row.data());
        float* xr = x + int64_t(r) * C;
        for (int i = 0; i < C; ++i) xr[i] += delta * shared->row[i];
      }
    };
    edits.push_back(std::move(read));
    edits.push_back(std::move(write));
  }
  return edits;
}

std::vector<StreamEdit> TranscoderSpliceEdits(const TranscoderSet& set, int first_position) {
  std::vector<StreamEdit> edits;
  for (int l : set.blocks()) {
    const Sae* tc = set.block(l);
    // The outputs the resid_mid edit computed, [rows, C] of positions pos0.. (the mlp_out edit
    // may see fewer rows: the last block's MLP runs on the last row alone when nothing observes
    // the others).
    struct Shared {
      int pos0 = 0, rows = 0;
      std::vector<float> features, out;
      SaeScratch scratch;
    };
    auto shared = std::make_shared<Shared>();
    const std::string name =
        "transcoder spliced in at blocks." + std::to_string(l) + ".hook_mlp_out";
    StreamEdit read{l, StreamPoint::kResidMid, nullptr, nullptr, name + " (reading resid_mid)"};
    read.edit = [tc, shared](int pos0, int rows, float* x) {
      shared->pos0 = pos0;
      shared->rows = rows;
      shared->features.resize(size_t(rows) * tc->d_sae());
      shared->out.resize(size_t(rows) * tc->config().d_in);
      tc->Encode(x, rows, shared->features.data(), nullptr, shared->scratch);
      tc->Decode(shared->features.data(), nullptr, rows, shared->out.data());
    };
    StreamEdit write{l, StreamPoint::kMlpOut, nullptr, nullptr, name};
    write.edit = [tc, shared, first_position](int pos0, int rows, float* x) {
      const int C = tc->config().d_in;
      for (int r = 0; r < rows; ++r) {
        const int read_r = pos0 + r - shared->pos0;
        if (pos0 + r < first_position || read_r < 0 || read_r >= shared->rows) continue;
        std::copy_n(shared->out.data() + int64_t(read_r) * C, C, x + int64_t(r) * C);
      }
    };
    edits.push_back(std::move(read));
    edits.push_back(std::move(write));
  }
  return edits;
}

}  // namespace gpt2
