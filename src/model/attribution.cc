#include "model/attribution.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/quant.h"
#include "model/acts.h"
#include "model/layer_norm.h"

namespace gpt2 {

namespace {

// Row `id` of the unembedding, as f32.
std::vector<float> OutputRow(const Model& model, int id) {
  const WeightView& w = model.output;
  std::vector<float> row(w.cols);
  DequantizeRow(w.type, static_cast<const uint8_t*>(w.data) + RowBytes(w.type, w.cols) * size_t(id),
                row.data(), w.cols);
  return row;
}

}  // namespace

Attribution AttributeLogit(Session& session, const std::vector<int>& ids,
                           const AttributionRequest& request) {
  const Model& model = session.model();
  const Config& c = model.config();
  const int T = static_cast<int>(ids.size()), C = c.n_embd, H = c.n_head, D = c.head_dim();
  const Interventions* iv = request.interventions;
  if (iv != nullptr && !iv->KeepsResidualSum()) {
    throw Error(
        "direct logit attribution needs the residual stream to be a sum of writes; "
        "no residual, post-norm and patches change that (ablations and skips are fine)");
  }
  Attribution out;
  out.position = request.position < 0 ? T - 1 : request.position;
  if (T == 0 || out.position >= T) {
    throw Error("attribution position " + std::to_string(request.position) +
                " is out of range; valid positions are 0.." + std::to_string(T - 1));
  }
  for (int id : {request.target, request.contrast}) {
    if (id < -1 || id >= c.n_vocab) {
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(c.n_vocab - 1) + ")");
    }
  }

  // The writes into the stream: the embedding, each block's heads and MLP output; the final
  // stream and the logits (read at `position`).
  const int p = out.position;
  Acts acts;
  RunOptions run;
  RecordActs(
      c,
      Keep{{Hook::kEmbed, Hook::kAttnHeads, Hook::kMlpOut, Hook::kLogits}, /*final_stream=*/true},
      acts, run, request.observer ? &request.observer : nullptr);
  run.interventions = iv;
  session.Reset();
  out.last_logits = session.Prefill(ids.data(), T, run);
  const float* embed = acts.Row(acts.embed, p);
  const float* final_stream = acts.Row(acts.final_stream, p);
  const float* logits = Acts::Row(acts.logits, p, c.n_vocab);

  out.target = request.target;
  if (out.target < 0) out.target = int(std::max_element(logits, logits + c.n_vocab) - logits);
  out.contrast = request.contrast;
  std::vector<float> u = OutputRow(model, out.target);
  if (out.contrast >= 0) {
    const std::vector<float> minus = OutputRow(model, out.contrast);
    for (int i = 0; i < C; ++i) u[i] -= minus[i];
  }
  out.logit = double(logits[out.target]) - (out.contrast >= 0 ? double(logits[out.contrast]) : 0.0);

  // torch.nn.LayerNorm's denominator for the full stream.
  const double inv_std = InvSigma(final_stream, C, c.ln_eps);
  auto dla = [&](const float* comp) {
    double m = 0, dot = 0;
    for (int i = 0; i < C; ++i) m += comp[i];
    m /= C;
    for (int i = 0; i < C; ++i) dot += (comp[i] - m) * inv_std * model.ln_f_g[i] * u[i];
    return dot;
  };

  out.components.push_back({"embed", dla(embed)});
  std::vector<float> z(C), write(C);
  // What the stream edits wrote: the final stream less every component's write (float64).
  std::vector<double> rest(final_stream, final_stream + C);
  auto take = [&](const float* comp) {
    for (int i = 0; i < C; ++i) rest[i] -= comp[i];
  };
  take(embed);
  for (int l = 0; l < c.n_layer; ++l) {
    const BlockWeights& w = model.blocks[l];
    const bool attn_on = iv == nullptr || !Interventions::Lists(iv->skip_attn, l);
    const bool mlp_on = iv == nullptr || !Interventions::Lists(iv->skip_mlp, l);
    for (int h = 0; h < H; ++h) {
      // The head's write: the output projection of its slice of the concatenated heads alone.
      std::fill(z.begin(), z.end(), 0.0f);
      std::copy_n(acts.Row(acts.blocks[l].z, p) + h * D, D, z.data() + h * D);
      MatMul(z.data(), 1, w.proj, nullptr, write.data(), 0, C, QuantActivations::kFloat);
      out.components.push_back(
          {std::to_string(l) + "." + std::to_string(h), attn_on ? dla(write.data()) : 0.0});
      if (attn_on) take(write.data());
    }
    out.components.push_back({"attn_bias." + std::to_string(l), attn_on ? dla(w.proj_b) : 0.0});
    out.components.push_back(
        {"mlp." + std::to_string(l), mlp_on ? dla(acts.Row(acts.blocks[l].mlp_out, p)) : 0.0});
    if (attn_on) take(w.proj_b);
    if (mlp_on) take(acts.Row(acts.blocks[l].mlp_out, p));
  }
  if (iv != nullptr && !iv->stream_edits.empty()) {
    std::vector<float> edits(rest.begin(), rest.end());
    out.components.push_back({"stream_edits", dla(edits.data())});
  }
  double bias = 0;
  for (int i = 0; i < C; ++i) bias += double(model.ln_f_b[i]) * u[i];
  out.components.push_back({"ln_f_bias", bias});
  return out;
}

}  // namespace gpt2
