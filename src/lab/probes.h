// Probes of a conversation's captured plain run (conversation.h): each re-runs only what it
// changes, starting from the captured stream and reusing the cache before its first block
// (Conversation::Probe), and leaves the cache changed until Rerun.
#pragma once

#include <vector>

#include "lab/conversation.h"

namespace gpt2 {

// Probes unembedded together (their logits: rows x n_vocab floats, 3.2 MB for GPT-2).
constexpr int kProbeRows = 16;

// log P(target) at `position` with each head knocked out alone (zeroed, or replaced by means
// [n_layer, n_embd] unless empty). Positions 0..position run again from the head's block; a sweep
// from the last block down costs sum_l (n_layer - l) / n_layer prefills a head.
std::vector<double> AblatedLogProbs(Conversation& c, const std::vector<HeadRef>& heads,
                                    int position, int target, const std::vector<float>& means);

// For each of positions: the log-probabilities of ids after the last position when the stream
// entering block `layer` there is row p of stream ([position(), n_embd], e.g. another run's
// residual(layer)). [positions.size(), ids.size()]; going down the positions, each probe re-runs
// only the rows from its own on.
std::vector<double> PatchedLogProbs(Conversation& c, int layer, const std::vector<int>& positions,
                                    const std::vector<float>& stream, const std::vector<int>& ids);

// The final stream rows of n probes (row(i): a row of n_embd floats, valid until the next call),
// unembedded kProbeRows at a time: [n, ids.size()] log-probabilities of ids.
std::vector<double> ProbeLogProbs(Conversation& c, int n, const std::vector<int>& ids,
                                  const std::function<const float*(int)>& row);

}  // namespace gpt2
