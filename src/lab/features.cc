// The lab's sparse autoencoders (lab/features.h).
#include "lab/features.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "base/error.h"
#include "kernels/kernels.h"  // kMatMulRowGrain
#include "model/thread_pool.h"
#include "model/top_k.h"

namespace gpt2 {

SaeInfo InfoOf(const LoadedSae& s) {
  const SaeConfig& c = s.sae->config();
  return {s.id,
          c.layer,
          c.d_sae,
          c.k,
          c.hook_name,
          SaeStreamPointName(c.point),
          SaeArchitectureName(c.architecture),
          SaeNormalizeName(c.normalize),
          static_cast<double>(s.bytes.size())};
}

void TopFeatures(const float* f, int n, int k, std::vector<int>* ids, std::vector<float>* values) {
  ids->clear();
  for (int i = 0; i < n; ++i) {
    if (f[i] != 0) ids->push_back(i);
  }
  KeepLargest(f, k, ids);
  values->clear();
  for (int i : *ids) values->push_back(f[i]);
}

namespace {

// The observer's name of the tensor at an SAE's hook point that the capture does not keep.
const char* KeptStreamName(StreamPoint p) {
  switch (p) {
    case StreamPoint::kResidMid:
    case StreamPoint::kAttnOut:
    case StreamPoint::kMlpOut:
      return HookName(StreamPointHook(p));
    default:  // the streams entering and leaving a block, which the capture keeps
      return nullptr;
  }
}

}  // namespace

int SaeSet::Load(std::vector<uint8_t> bytes, Conversation& conversation) {
  const Config& model = conversation.config();
  auto loaded = std::make_unique<LoadedSae>();
  loaded->bytes = std::move(bytes);
  std::shared_ptr<const GgufFile> file =
      GgufFile::Parse(loaded->bytes.data(), loaded->bytes.size());
  auto sae = std::make_shared<const Sae>(file, model.n_embd);
  const SaeConfig& c = sae->config();
  if (c.layer >= model.n_layer) {
    throw Error("the SAE reads " + c.hook_name + " but the model has blocks 0.." +
                std::to_string(model.n_layer - 1));
  }
  if (const char* name = KeptStreamName(c.point)) conversation.capture().KeepStream(name, c.layer);
  loaded->sae = std::move(sae);
  loaded->id = next_id_++;
  saes_.push_back(std::move(loaded));
  return saes_.back()->id;
}

LoadedSae& SaeSet::Find(int id) {
  for (auto& s : saes_) {
    if (s->id == id) return *s;
  }
  throw Error("no SAE is loaded with id " + std::to_string(id));
}

void SaeSet::Drop(int id) {
  Find(id);
  saes_.erase(
      std::remove_if(saes_.begin(), saes_.end(), [id](const auto& s) { return s->id == id; }),
      saes_.end());
}

std::vector<int> SaeSet::ids() const {
  std::vector<int> ids;
  for (const auto& s : saes_) ids.push_back(s->id);
  return ids;
}

StreamEdit SaeSet::Edit(const SaeIntervention& s) const {
  return Sae::Edit(Find(s.id).sae, s.steer, s.clamp);
}

LabInterventions SaeSet::WithEdits(LabInterventions iv) const {
  for (const SaeIntervention& s : iv.sae) iv.iv.stream_edits.push_back(Edit(s));
  iv.sae.clear();
  return iv;
}

namespace {

// The features [captured positions, d_sae] of s at the conversation's capture.
const LoadedSae& EncodeCapture(Conversation& conversation, LoadedSae& s) {
  const SaeConfig& c = s.sae->config();
  const CaptureStore& capture = conversation.capture();
  conversation.RequireCaptured(
      "Reading SAE features needs the activations of the whole conversation: turn on capture and "
      "run it again.");
  const int P = capture.n_positions(), C = c.d_in, S = c.d_sae;
  const std::vector<float>* rows = nullptr;
  if (c.point == StreamPoint::kResidPre) rows = &capture.Residual(c.layer);
  if (c.point == StreamPoint::kResidPost) rows = &capture.Residual(c.layer + 1);
  if (rows == nullptr) {
    const char* name = KeptStreamName(c.point);
    rows = capture.Stream(name, c.layer);
    if (rows == nullptr) {
      // Loaded after the conversation ran: its stream is captured by running again from its block.
      conversation.Rerun(c.layer);
      rows = capture.Stream(name, c.layer);
      if (rows == nullptr)
        throw Error("the SAE's stream " + c.hook_name + " could not be captured");
    }
  }
  // Encode from the first row that differs from the rows encoded last (a generation step adds
  // one; an intervention re-run changes them all).
  const int had = static_cast<int>(s.scales.size());
  int same = 0;
  while (same < std::min(had, P) &&
         std::memcmp(s.encoded_input.data() + size_t(same) * C, rows->data() + size_t(same) * C,
                     sizeof(float) * C) == 0) {
    ++same;
  }
  s.encoded_input.assign(rows->begin(), rows->begin() + size_t(P) * C);
  s.active.resize(P);
  s.scales.resize(P);
  // Rows through a dense buffer (the matmul's output), 64 at a time: fewer passes over the
  // encoder (GPT-2 small's is 20 MB as Q8_0) for 6 MB of scratch.
  constexpr int kRows = 64;
  std::vector<float>& dense = s.dense;
  for (int p0 = same; p0 < P; p0 += kRows) {
    const int n = std::min(kRows, P - p0);
    dense.resize(size_t(n) * S);
    s.sae->Encode(rows->data() + size_t(p0) * C, n, dense.data(), s.scales.data() + p0, s.scratch);
    for (int t = 0; t < n; ++t) {
      std::vector<std::pair<int, float>>& a = s.active[p0 + t];
      a.clear();
      for (int f = 0; f < S; ++f) {
        if (dense[size_t(t) * S + f] != 0) a.push_back({f, dense[size_t(t) * S + f]});
      }
    }
  }
  return s;
}

}  // namespace

SaeFeatureList SaeFeatures(Conversation& conversation, LoadedSae& loaded, int position, int k) {
  const LoadedSae& s = EncodeCapture(conversation, loaded);
  const int P = static_cast<int>(s.scales.size()), C = s.sae->config().d_in, S = s.sae->d_sae();
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) +
                " is out of range; valid positions are 0.." + std::to_string(P - 1));
  }
  std::vector<float> f(S, 0.0f);
  for (const auto& a : s.active[position]) f[a.first] = a.second;
  SaeFeatureList out;
  TopFeatures(f.data(), S, k, &out.features, &out.activations);
  out.explained =
      s.sae->Explained(s.encoded_input.data() + size_t(position) * C, f.data(), s.scales[position]);
  return out;
}

std::vector<float> SaeStrip(Conversation& conversation, LoadedSae& loaded, int feature) {
  loaded.sae->CheckFeature(feature);
  const LoadedSae& s = EncodeCapture(conversation, loaded);
  const int P = static_cast<int>(s.scales.size());
  std::vector<float> strip(P, 0.0f);
  for (int p = 0; p < P; ++p) {
    const auto& a = s.active[p];
    const auto it = std::lower_bound(a.begin(), a.end(), std::make_pair(feature, -HUGE_VALF));
    if (it != a.end() && it->first == feature) strip[p] = it->second;
  }
  return strip;
}

std::vector<SaeLogitWeights> SaeLogitWeightsOf(const Model& model, const Sae& sae,
                                               const std::vector<int>& features, int k) {
  ThreadPool one(1);
  std::vector<float> scratch;
  return SaeLogitWeightsOf(model, sae, features, k, one, &scratch);
}

namespace {

// One side of a feature's logit table taken in pieces: the k best tokens of the pieces so far.
struct Best {
  std::vector<int> ids;       // in token order until Ranked()
  std::vector<float> values;  // theirs
  float bound;                // the k-th best value once there are k (ExtremeIndices' bound)

  // Adds piece [v0, v0 + n)'s candidates (indices into w), keeps the k best, in token order.
  void Take(const float* w, int v0, std::vector<int>& candidates, int k, bool largest) {
    std::sort(candidates.begin(), candidates.end());
    for (int i : candidates) {
      ids.push_back(v0 + i);
      values.push_back(w[i]);
    }
    const std::vector<int> order = Rank(k, largest);
    if (static_cast<int>(order.size()) == k) {
      const float last = values[order.back()];
      if (!std::isnan(last)) bound = last;
    }
    std::vector<int> kept(order);
    std::sort(kept.begin(), kept.end());  // token order again: the next ranking's ties
    Keep(kept);
  }

  // Leaves them ranked, best first.
  void Ranked(int k, bool largest) { Keep(Rank(k, largest)); }

 private:
  // Ties go to the lower index, which is the lower token while ids are in token order.
  std::vector<int> Rank(int k, bool largest) const {
    std::vector<int> order;
    ExtremeIndices(values.data(), static_cast<int>(values.size()), k, largest ? &order : nullptr,
                   largest ? nullptr : &order);
    return order;
  }
  void Keep(const std::vector<int>& order) {
    std::vector<int> kept_ids;
    std::vector<float> kept_values;
    for (int i : order) {
      kept_ids.push_back(ids[i]);
      kept_values.push_back(values[i]);
    }
    ids = std::move(kept_ids);
    values = std::move(kept_values);
  }
};

}  // namespace

std::vector<SaeLogitWeights> SaeLogitWeightsOf(const Model& model, const Sae& sae,
                                               const std::vector<int>& features, int k,
                                               ThreadPool& pool, std::vector<float>* scratch) {
  // The vocabulary in pieces, so that *scratch holds about kLogitPieceFloats floats however many
  // features are asked: the more features a product has, the fewer times W_U is read and
  // prepared (a fifth of the dashboards' phase natively at 64 features a product). Each
  // feature's k largest and smallest are among the pieces' own, each piece searched only beyond
  // the k-th found before it; pieces begin at whole row grains, so every entry has the bits of
  // one product over the whole vocabulary.
  constexpr int64_t kLogitPieceFloats = int64_t(1) << 22;  // 16 MB
  const int V = model.config().n_vocab;
  const int64_t F = static_cast<int64_t>(features.size());
  const int64_t pieces = std::max<int64_t>(1, (F * V + kLogitPieceFloats - 1) / kLogitPieceFloats);
  const int64_t grains = ((V + pieces - 1) / pieces + kMatMulRowGrain - 1) / kMatMulRowGrain;
  const int piece = static_cast<int>(std::min<int64_t>(V, grains * kMatMulRowGrain));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<Best> high(F, Best{{}, {}, -kInf}), low(F, Best{{}, {}, kInf});
  std::vector<int> h, l;
  for (int v0 = 0; v0 < V; v0 += piece) {
    const int n = std::min(piece, V - v0);
    sae.LogitWeights(model, features, v0, v0 + n, pool, scratch);
    for (int64_t f = 0; f < F; ++f) {
      const float* w = scratch->data() + f * n;
      ExtremeIndices(w, n, k, &h, &l, high[f].bound, low[f].bound);
      high[f].Take(w, v0, h, k, true);
      low[f].Take(w, v0, l, k, false);
    }
  }
  std::vector<SaeLogitWeights> out(F);
  for (int64_t f = 0; f < F; ++f) {
    high[f].Ranked(k, true);
    low[f].Ranked(k, false);
    out[f].promoted = std::move(high[f].ids);
    out[f].promoted_values = std::move(high[f].values);
    out[f].suppressed = std::move(low[f].ids);
    out[f].suppressed_values = std::move(low[f].values);
  }
  return out;
}

}  // namespace gpt2
