// QK attribution: which parts of the stream, on the query side and on the key side, make one
// head's attention score what it is (the attribution graph's stretch, issue 36; the graph freezes
// attention, so its edges cannot say why a head looks where it does). circuit-tracer has no
// counterpart; the LayerNorm is frozen as in its replacement model (graph/replacement.h). The
// lab's wrapper over a conversation is lab/qk.h.
//
// The score of head h in block L from query position q to key position k is
//   s = scale (n(x_q) W_Q + b_Q) . (n(x_k) W_K + b_K),  n(x) = (x - mean(x)) / sigma(x) g + b,
// x_p the stream entering block L (blocks.L.hook_resid_pre). With 1/sigma frozen at the real
// run's, as in the graph's replacement model, n is affine in x, and x_p is a sum of parts:
//   the embedding wte[id_p] + wpe[p],
//   per earlier block l: its attention output, and its MLP output as the transcoder splits it
//   (each active feature's acts W_dec[f], the decoder bias b_dec, and the error: the MLP output
//   minus the two; a block without a transcoder: its whole MLP output is the error).
// Holding the other side at its real value, s is linear in each side's parts: a query-side part
// c adds scale (c n') W_Q . k, n' the frozen LayerNorm without its bias, and the side's bias
// part (ln_1's b through W_Q, and b_Q) the rest, so each side's parts sum to s. A pair (query
// part i, key part j) adds scale (c_i n' W_Q) . (c_j n' W_K); all pairs sum to s as well.
// Features at the BOS (position 0) are parts here, though the graph keeps them out of its nodes.
#pragma once

#include <string>
#include <vector>

#include "model/backward.h"
#include "model/session.h"
#include "sae/transcoders.h"

namespace gpt2 {

enum class QkPartKind { kEmbedding, kAttention, kFeature, kDecoderBias, kError, kBias };

struct QkPart;
// Its kind's name: "embedding", "attention", "feature", "decoder bias", "error" or "bias".
std::string QkPartKindName(const QkPart& part);

struct QkPart {
  QkPartKind kind;
  int layer = -1;    // the block that wrote it (attention, feature, decoder bias, error); else -1
  int feature = -1;  // features
  float activation = 0;  // features: acts
  double score = 0;      // what it adds to the score, the other side held
};

struct QkPair {
  int query_part, key_part;  // indices into query_parts and key_parts
  double score;
};

struct QkAttribution {
  ScoreSpec spec;
  double score = 0;        // the real run's (blocks.L.attn.hook_attn_scores)
  double probability = 0;  // the head's attention from query to key (hook_pattern)
  // The k parts of each side that add the most (by magnitude), largest first, and what the rest
  // of that side adds; the parts of a side and its rest sum to the score (up to the forward's own
  // rounding: its Q8_0/Q4_0 products round their inputs to int8).
  std::vector<QkPart> query_parts, key_parts;
  double query_rest = 0, key_rest = 0;
  std::vector<QkPair> pairs;  // the k pairs of those parts that add the most, largest first
};

// gpt2::Error for a block, head or position out of range among T positions, a key after the
// query, or k < 1.
void CheckQkSpec(const Config& config, int T, const ScoreSpec& spec, int k);

// On `session` (reset and run over ids, the plain model: its cache then holds those ids' run)
// with `transcoders` bound to its model. gpt2::Error as CheckQkSpec.
QkAttribution AttributeQk(Session& session, const TranscoderSet& transcoders,
                          const std::vector<int>& ids, const ScoreSpec& spec, int k);

}  // namespace gpt2
