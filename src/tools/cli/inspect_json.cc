#include "tools/cli/inspect_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/kernels.h"
#include "tools/cli/json_out.h"

namespace gpt2 {

namespace {

void WriteTop(std::ostream& out, const std::vector<int>& ids, const std::vector<float>& probs) {
  out << "\"top_ids\":";
  JsonArray(out, ids);
  out << ",\"top_probs\":";
  JsonArray(out, probs);
}

}  // namespace

void WriteInspectJson(std::ostream& out, const Model& model, const Tokenizer& tokenizer,
                      const std::vector<int>& ids, const Recorder& recorder, int top_k,
                      const Interventions& interventions) {
  const Config& c = model.config();
  const int T = static_cast<int>(ids.size());
  out << "{\"config\":{\"n_vocab\":" << c.n_vocab << ",\"n_ctx\":" << c.n_ctx
      << ",\"n_embd\":" << c.n_embd << ",\"n_head\":" << c.n_head << ",\"n_layer\":" << c.n_layer
      << ",\"n_ff\":" << c.n_ff << "},\n\"interventions\":{\"ablate_heads\":[";
  for (size_t i = 0; i < interventions.ablate_heads.size(); ++i) {
    out << (i ? ",[" : "[") << interventions.ablate_heads[i].layer << ','
        << interventions.ablate_heads[i].head << ']';
  }
  out << "],\"skip_attn\":";
  JsonArray(out, interventions.skip_attn);
  out << ",\"skip_mlp\":";
  JsonArray(out, interventions.skip_mlp);
  out << ",\"no_residual\":";
  JsonArray(out, interventions.no_residual);
  out << ",\"post_norm\":" << (interventions.post_norm ? "true" : "false") << "},\n\"ids\":";
  JsonArray(out, ids);
  out << ",\n\"tokens\":[";
  for (int i = 0; i < T; ++i) {
    if (i) out << ',';
    JsonString(out, tokenizer.TokenBytes(ids[i]));
  }
  out << "],\n\"tensors\":[";
  for (size_t i = 0; i < recorder.tensors().size(); ++i) {
    const RecordedTensor& t = recorder.tensors()[i];
    out << (i ? ",\n" : "\n") << "{\"name\":";
    JsonString(out, t.name);
    out << ",\"layer\":" << t.layer << ",\"pos0\":" << t.pos0 << ",\"shape\":";
    JsonArray(out, t.shape);
    out << ",\"data\":";
    JsonArray(out, t.data);
    out << '}';
  }
  out << "],\n\"logit_lens\":[";
  std::vector<std::vector<float>> residuals;
  for (int l = 0; l < c.n_layer; ++l) {
    const RecordedTensor* r = recorder.Find(HookName(Hook::kResidPost), l);
    if (r != nullptr) residuals.push_back(r->data);
  }
  const std::vector<LensEntry> lens = LogitLens(model, residuals, T, 0, top_k);
  for (size_t i = 0; i < lens.size(); ++i) {
    out << (i ? ",\n" : "\n") << "{\"layer\":" << lens[i].layer
        << ",\"position\":" << lens[i].position << ',';
    WriteTop(out, lens[i].top_ids, lens[i].top_probs);
    out << '}';
  }
  out << "],\n\"final\":[";
  const RecordedTensor* logits = recorder.Find(HookName(Hook::kLogits), -1);
  if (logits != nullptr) {
    const int k = std::min(top_k, c.n_vocab);
    std::vector<int> ids_k(k);
    std::vector<float> probs_k(k);
    for (int t = 0; t < T; ++t) {
      TopProbabilities(logits->data.data() + size_t(t) * c.n_vocab, c.n_vocab, k, ids_k.data(),
                       probs_k.data());
      out << (t ? ",\n" : "\n") << "{\"position\":" << t << ',';
      WriteTop(out, ids_k, probs_k);
      out << '}';
    }
  }
  out << "]}\n";
}

void WriteAttributionJson(std::ostream& out, const Attribution& a) {
  out << "{\"position\":" << a.position << ",\"target\":" << a.target
      << ",\"contrast\":" << a.contrast << ",\n\"components\":[";
  for (size_t i = 0; i < a.components.size(); ++i) {
    out << (i ? ",\n" : "\n") << "{\"name\":";
    JsonString(out, a.components[i].name);
    out << ",\"value\":";
    JsonNumber(out, static_cast<float>(a.components[i].value));
    out << '}';
  }
  out << "],\n\"logit\":";
  JsonNumber(out, static_cast<float>(a.logit));
  out << "}\n";
}

}  // namespace gpt2
