#include "lab/head_scores.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "lab/conversation.h"
#include "model/config.h"
#include "model/sampler.h"

namespace gpt2 {

std::vector<int> DefaultHeadIds(int n_vocab, int n) {
  if (n < 1 || n_vocab - 1 < n) {
    throw Error("Cannot draw " + std::to_string(n) + " distinct token ids from a vocabulary of " +
                std::to_string(n_vocab) + ".");
  }
  Rng rng(kHeadIdsSeed);
  std::vector<int> ids;
  std::vector<char> used(static_cast<size_t>(n_vocab), 0);
  while (static_cast<int>(ids.size()) < n) {
    const int id = static_cast<int>(rng.Next() % static_cast<uint64_t>(n_vocab - 1));
    if (used[id]) continue;
    used[id] = 1;
    ids.push_back(id);
  }
  return ids;
}

std::vector<int> RepeatedSequence(const std::vector<int>& ids) {
  std::vector<int> seq{kEndOfText};
  seq.insert(seq.end(), ids.begin(), ids.end());
  seq.insert(seq.end(), ids.begin(), ids.end());
  return seq;
}

HeadScores ScoreHeads(const CaptureStore& capture, int n_head, int repeat) {
  const int R = repeat, T = 2 * repeat + 1;
  if (R < 1 || capture.n_positions() != T) {
    throw Error("head scores: the capture holds " + std::to_string(capture.n_positions()) +
                " positions, not the repeated sequence of " + std::to_string(T));
  }
  const int L = capture.n_layer(), H = n_head;
  HeadScores s;
  s.n_layer = L;
  s.n_head = H;
  s.repeat = R;
  s.prev.assign(size_t(L) * H, 0.0);
  s.dup.assign(size_t(L) * H, 0.0);
  s.induction.assign(size_t(L) * H, 0.0);
  for (int l = 0; l < L; ++l) {
    for (int p = 1; p < T; ++p) {
      const float* a = capture.Attention(l, p);  // [H, p + 1]: query p's row of every head
      for (int h = 0; h < H; ++h) {
        const float* row = a + size_t(h) * (p + 1);
        const size_t i = size_t(l) * H + h;
        s.prev[i] += row[p - 1];
        if (p > R) {
          s.dup[i] += row[p - R];
          s.induction[i] += row[p - R + 1];
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const size_t i = size_t(l) * H + h;
      s.prev[i] /= 2 * R;
      s.dup[i] /= R;
      s.induction[i] /= R;
    }
  }
  return s;
}

UniformScores UniformHeadScores(int repeat) {
  const int R = repeat;
  UniformScores u;
  for (int p = 1; p <= 2 * R; ++p) u.prev += 1.0 / (p + 1) / (2 * R);
  for (int p = R + 1; p <= 2 * R; ++p) u.dup += 1.0 / (p + 1) / R;
  u.induction = u.dup;
  return u;
}

HeadScores DetectHeads(Conversation& conversation, const std::vector<int>& ids) {
  const Config& c = conversation.config();
  const int R = static_cast<int>(ids.size());
  if (R < 1) throw Error("Head detection needs at least one token id to repeat.");
  if (c.n_vocab <= kEndOfText) {
    throw Error("Head detection starts its sequence with <|endoftext|> (" +
                std::to_string(kEndOfText) + "), which this model's vocabulary of " +
                std::to_string(c.n_vocab) + " tokens lacks.");
  }
  for (int id : ids) {
    if (id < 0 || id >= c.n_vocab) {
      throw Error("The token id " + std::to_string(id) + " is not in the vocabulary (0.." +
                  std::to_string(c.n_vocab - 1) + ").");
    }
  }
  if (2 * R + 1 > c.n_ctx) {
    throw Error(std::to_string(R) + " ids repeated make " + std::to_string(2 * R + 1) +
                " positions with <|endoftext|>, more than the model's context of " +
                std::to_string(c.n_ctx) + ": give at most " + std::to_string((c.n_ctx - 1) / 2) +
                " ids.");
  }
  conversation.Restart(RepeatedSequence(ids));
  return ScoreHeads(conversation.capture(), c.n_head, R);
}

}  // namespace gpt2
