// Path patching: steps 1-3 of path_patch.h over a conversation's session.
#include "lab/path_patch.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "lab/probes.h"
#include "lab/prompt_pair.h"

namespace gpt2 {

namespace {

const char* PartName(HeadPart part) {
  switch (part) {
    case HeadPart::kQuery:
      return "q";
    case HeadPart::kKey:
      return "k";
    case HeadPart::kValue:
      return "v";
    case HeadPart::kOutput:
      break;
  }
  return "z";
}

// A whole non-negative decimal number, or -1.
int Number(const std::string& s) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::atoi(s.c_str());
}

void CheckHead(const char* what, int layer, int head, const Config& c) {
  if (layer < 0 || layer >= c.n_layer) {
    throw Error(std::string(what) + ": layer " + std::to_string(layer) +
                " is out of range; valid layers are 0.." + std::to_string(c.n_layer - 1));
  }
  if (head < 0 || head >= c.n_head) {
    throw Error(std::string(what) + ": head " + std::to_string(head) +
                " is out of range; valid heads are 0.." + std::to_string(c.n_head - 1));
  }
}

double Metric(const float* logits, int target, int contrast) {
  return double(logits[target]) - (contrast >= 0 ? double(logits[contrast]) : 0.0);
}

}  // namespace

std::vector<PathReceiver> ParsePathReceivers(const std::string& spec, const Config& c) {
  std::vector<PathReceiver> out;
  if (spec == "logits") return out;
  size_t start = 0;
  while (true) {
    const size_t comma = spec.find(',', start);
    const std::string item =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t d1 = item.find('.'), d2 = d1 == std::string::npos ? d1 : item.find('.', d1 + 1);
    const std::string part = d2 == std::string::npos ? "" : item.substr(d2 + 1);
    PathReceiver r;
    r.layer = d1 == std::string::npos ? -1 : Number(item.substr(0, d1));
    r.head = d2 == std::string::npos ? -1 : Number(item.substr(d1 + 1, d2 - d1 - 1));
    if (r.layer < 0 || r.head < 0 || (part != "q" && part != "k" && part != "v")) {
      throw Error("receivers: '" + item +
                  "' is not LAYER.HEAD.q|k|v (e.g. 9.6.q); the receivers are 'logits' "
                  "or a list of those");
    }
    r.part = part == "q" ? HeadPart::kQuery : part == "k" ? HeadPart::kKey : HeadPart::kValue;
    CheckHead("receivers", r.layer, r.head, c);
    out.push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void CheckPathReceivers(const std::vector<PathReceiver>& receivers, const Config& c) {
  for (const PathReceiver& r : receivers) {
    CheckHead("receivers", r.layer, r.head, c);
    if (r.part == HeadPart::kOutput)
      throw Error("receivers: a receiver takes its q, k or v, not its output");
  }
}

void CheckPathSender(HeadRef sender, const std::vector<PathReceiver>& receivers, const Config& c) {
  CheckHead("sender", sender.layer, sender.head, c);
  CheckPathReceivers(receivers, c);
  for (const PathReceiver& r : receivers) {
    if (r.layer <= sender.layer) {
      throw Error("receiver " + std::to_string(r.layer) + "." + std::to_string(r.head) + "." +
                  PartName(r.part) + " is not after the sender " + std::to_string(sender.layer) +
                  "." + std::to_string(sender.head) + ": receivers must be in later blocks");
    }
  }
}

namespace {

// The checks, before the job remembers anything.
const LabInterventions& Checked(const Conversation& c, const std::vector<int>& clean,
                                const std::vector<int>& corrupted,
                                const std::vector<PathReceiver>& receivers, int target,
                                int contrast, const LabInterventions& iv) {
  CheckPromptPair(clean, corrupted, "path patching");
  c.CheckPrompt(static_cast<int>(clean.size()));
  for (int id : clean) c.RequireToken(id);
  for (int id : corrupted) c.RequireToken(id);
  if (target >= 0) c.RequireToken(target);
  if (contrast >= 0) c.RequireToken(contrast);
  CheckPathReceivers(receivers, c.config());
  return iv;
}

// The sender's corrupted output over rows [p0, T) (z: [T, C]).
HeadPatch SenderPatch(const std::vector<float>& z, HeadRef sender, int p0, int T, const Config& c) {
  const size_t C = size_t(c.n_embd), D = size_t(c.head_dim());
  HeadPatch patch{sender.layer, sender.head, HeadPart::kOutput, p0, {}};
  for (int p = p0; p < T; ++p) {
    const float* row = z.data() + size_t(p) * C + size_t(sender.head) * D;
    patch.values.insert(patch.values.end(), row, row + D);
  }
  return patch;
}

}  // namespace

// Step 1: both prompts, their heads' outputs, the clean streams and the two metrics.
PathPatchJobBase::PathPatchJobBase(Conversation& c, const std::vector<int>& clean,
                                   const std::vector<int>& corrupted,
                                   const std::vector<PathReceiver>& receivers, int target,
                                   int contrast, const LabInterventions& iv)
    : CellJob(c, Checked(c, clean, corrupted, receivers, target, contrast, iv)),
      session_(c.UnrecordedSession()),
      receivers_(receivers) {
  const Config& config = c.config();
  const int L = config.n_layer, H = config.n_head;
  T_ = static_cast<int>(clean.size());
  const size_t C = size_t(config.n_embd);
  // The plain model, corrupted, then clean, so the session ends holding the clean run (step 3
  // re-runs it from the receivers' first block).
  const Keep keep{{Hook::kEmbed, Hook::kAttnHeads, Hook::kResidPost}, /*final_stream=*/true};
  RunOptions run;
  RecordActs(config, keep, corrupt_, run);
  session_.Prefill(corrupted.data(), T_, run);
  session_.Reset();
  RecordActs(config, keep, clean_, run);
  session_.Prefill(clean.data(), T_, run);

  // Both runs' metrics from their final streams' last rows, unembedded by FinalLogits as the
  // patched rows are.
  std::vector<float> rows(2 * C), logits(2 * size_t(config.n_vocab));
  std::copy_n(clean_.StreamInto(L).data() + size_t(T_ - 1) * C, C, rows.data());
  std::copy_n(corrupt_.StreamInto(L).data() + size_t(T_ - 1) * C, C, rows.data() + C);
  session_.FinalLogits(rows.data(), 2, logits.data());
  if (target < 0)
    target = int(std::max_element(logits.data(), logits.data() + config.n_vocab) - logits.data());
  start_.positions = T_;
  start_.total = L * H;
  start_.target = target;
  start_.contrast = contrast;
  start_.clean = Metric(logits.data());
  start_.corrupt = Metric(logits.data() + config.n_vocab);
}

double PathPatchJobBase::Metric(const float* logits) const {
  return gpt2::Metric(logits, start_.target, start_.contrast);
}

PathPatchSweep::PathPatchSweep(Conversation& c, const std::vector<int>& clean,
                               const std::vector<int>& corrupted,
                               const std::vector<PathReceiver>& receivers, int target, int contrast,
                               const LabInterventions& iv)
    : PathPatchJobBase(c, clean, corrupted, receivers, target, contrast, iv) {
  const Config& config = c.config();
  const int L = config.n_layer, H = config.n_head, T = T_;
  const size_t C = size_t(config.n_embd);
  // Layer by layer. Work per sender in prefills of the pair: step 2's blocks from the sender's
  // (for logits one row, which costs about as much as kLoneRow rows of a prefill: it reads every
  // weight for one row), step 3's blocks from the first receiver's, and its row's unembedding.
  constexpr double kLoneRow = 3;
  int first_receiver = L, last_receiver = -1;
  for (const PathReceiver& r : receivers) {
    first_receiver = std::min(first_receiver, r.layer);
    last_receiver = std::max(last_receiver, r.layer);
  }
  const double unembed = double(config.n_vocab) / (12.0 * L * double(C)) / T;
  std::vector<double> work;
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      cells_.push_back({l, h, 0});
      if (receivers.empty()) {
        work.push_back(double(L - l) / L * kLoneRow / T + unembed);
      } else if (l < last_receiver) {
        work.push_back(double(last_receiver + 1 - l) / L + double(L - first_receiver) / L +
                       unembed);
      } else {
        work.push_back(0);
      }
    }
  }
  group_ends_ = GroupsByWork(work, kJobBudget);
}

const float* PathPatchSweep::PatchedRow(HeadRef sender) {
  const Config& c = c_.config();
  const int L = c.n_layer, T = T_, ls = sender.layer;
  const size_t C = size_t(c.n_embd), D = size_t(c.head_dim());
  const std::vector<PathReceiver>& receivers = receivers_;
  RunOptions run;
  if (receivers.empty()) {
    // Step 2 for logits: every head from the sender's block on frozen, so the last position
    // needs no other row: it runs alone, and the cache is not touched.
    Interventions iv;
    for (int l = ls; l < L; ++l) {
      const std::vector<float>& z = clean_.blocks[l].z;
      iv.frozen_attn.push_back({l, T - 1, std::vector<float>(z.end() - C, z.end())});
    }
    iv.head_patches.push_back(SenderPatch(corrupt_.blocks[ls].z, sender, T - 1, T, c));
    run.interventions = &iv;
    return session_.Rerun({T - 1, T, ls, true}, clean_.StreamInto(ls).data() + size_t(T - 1) * C,
                          run);
  }
  int first = L, last = -1;
  bool any_after = false;
  for (const PathReceiver& r : receivers) {
    first = std::min(first, r.layer);
    last = std::max(last, r.layer);
    any_after = any_after || r.layer > ls;
  }
  if (!any_after) return nullptr;  // every receiver's inputs are the clean run's
  // Step 2: frozen from the sender's block to the last receiver's, every row; the receivers'
  // inputs as the blocks compute them for the observer.
  Interventions frozen;
  for (int l = ls; l <= last; ++l) {
    bool receiving = false;  // only the receivers' blocks need their q, k and v computed
    for (const PathReceiver& r : receivers) receiving = receiving || (r.layer == l && l > ls);
    frozen.frozen_attn.push_back({l, 0, clean_.blocks[l].z, receiving});
  }
  frozen.head_patches.push_back(SenderPatch(corrupt_.blocks[ls].z, sender, 0, T, c));
  Acts inputs;
  RecordActs(c, Keep{{Hook::kQ, Hook::kK, Hook::kV}}, inputs, run);
  run.interventions = &frozen;
  session_.Rerun({0, T, ls, true, last + 1}, clean_.StreamInto(ls).data(), run);
  Interventions patched;  // step 3's
  for (const PathReceiver& r : receivers) {
    if (r.layer <= ls) continue;
    const BlockActs& in = inputs.blocks[r.layer];
    const std::vector<float>& part = r.part == HeadPart::kQuery ? in.q
                                     : r.part == HeadPart::kKey ? in.k
                                                                : in.v;
    const float* rows = part.data() + size_t(r.head) * T * D;  // [H, T, D]
    patched.head_patches.push_back(
        {r.layer, r.head, r.part, 0, std::vector<float>(rows, rows + size_t(T) * D)});
  }
  // Step 3: every row from the first receiver's block, always the same block, so each sender's
  // run rewrites all the cache the previous one changed.
  RunOptions rerun;
  rerun.interventions = &patched;
  return session_.Rerun({0, T, first, true}, clean_.StreamInto(first).data(), rerun);
}

std::vector<double> PathPatchSweep::Metrics(const std::vector<HeadRef>& senders) {
  const Config& c = c_.config();
  for (const HeadRef& s : senders) CheckHead("sender", s.layer, s.head, c);
  const size_t C = size_t(c.n_embd), V = size_t(c.n_vocab);
  std::vector<double> out(senders.size(), start_.clean);
  std::vector<float> rows(size_t(kProbeRows) * C), logits(size_t(kProbeRows) * V);
  std::vector<size_t> which;  // the senders whose rows are in `rows`
  auto flush = [&]() {
    if (which.empty()) return;
    session_.FinalLogits(rows.data(), static_cast<int>(which.size()), logits.data());
    for (size_t i = 0; i < which.size(); ++i) out[which[i]] = Metric(logits.data() + i * V);
    which.clear();
  };
  for (size_t i = 0; i < senders.size(); ++i) {
    const float* row = PatchedRow(senders[i]);
    if (row == nullptr) continue;
    std::copy_n(row, C, rows.data() + which.size() * C);
    which.push_back(i);
    if (which.size() == size_t(kProbeRows)) flush();
  }
  flush();
  return out;
}

void PathPatchSweep::Measure(size_t begin, size_t end) {
  std::vector<HeadRef> senders;
  for (size_t i = begin; i < end; ++i) senders.push_back({cells_[i].layer, cells_[i].index});
  const std::vector<double> m = Metrics(senders);
  for (size_t i = begin; i < end; ++i) {
    results_.push_back({cells_[i].layer, cells_[i].index, m[i - begin] - start_.clean});
  }
}

SenderPathsJob::SenderPathsJob(Conversation& c, const std::vector<int>& clean,
                               const std::vector<int>& corrupted, HeadRef sender, int target,
                               int contrast, const LabInterventions& iv)
    : PathPatchJobBase(c, clean, corrupted, {}, target, contrast,
                       (CheckPathSender(sender, {}, c.config()), iv)) {
  const Config& config = c.config();
  const int L = config.n_layer, H = config.n_head, T = T_, ls = sender.layer;
  const size_t C = size_t(config.n_embd);
  // Step 2 once for every receiver: every block from the sender's frozen, all rows, each later
  // block's q, k and v kept; its final row is the path to the logits.
  Interventions frozen;
  for (int l = ls; l < L; ++l) frozen.frozen_attn.push_back({l, 0, clean_.blocks[l].z, l > ls});
  frozen.head_patches.push_back(SenderPatch(corrupt_.blocks[ls].z, sender, 0, T, config));
  RunOptions run;
  RecordActs(config, Keep{{Hook::kQ, Hook::kK, Hook::kV}}, inputs_, run);
  run.interventions = &frozen;
  std::vector<float> row(C), logits(size_t(config.n_vocab));
  std::copy_n(session_.Rerun({0, T, ls, true}, clean_.StreamInto(ls).data(), run), C, row.data());
  session_.FinalLogits(row.data(), 1, logits.data());
  results_.push_back({L, 0, Metric(logits.data()) - start_.clean});
  // The later heads from the last block down: each step 3 runs every row from its head's block,
  // so it rewrites all the cache the previous one (in a later or the same block) changed.
  std::vector<double> work;
  for (int l = L - 1; l > ls; --l) {
    for (int h = 0; h < H; ++h) {
      cells_.push_back({l, h, 0});
      work.push_back(double(L - l) / L + double(config.n_vocab) / (12.0 * L * double(C)) / T);
    }
  }
  group_ends_ = GroupsByWork(work, kJobBudget);
  start_.total = static_cast<int>(cells_.size()) + 1;
  // The logits' cell is done: the job's cells count from the results already there.
  cells_.insert(cells_.begin(), {L, 0, results_[0].value});
  for (size_t& e : group_ends_) ++e;
  next_ = 1;
}

void SenderPathsJob::Measure(size_t begin, size_t end) {
  const Config& c = c_.config();
  const int T = T_;
  const size_t C = size_t(c.n_embd), D = size_t(c.head_dim()), V = size_t(c.n_vocab);
  std::vector<float> rows, logits;
  for (size_t i = begin; i < end; ++i) {
    const int l = cells_[i].layer, h = cells_[i].index;
    // Step 3: the head's q, k and v from step 2, everything after them recomputed.
    Interventions patched;
    const HeadPart parts[3] = {HeadPart::kQuery, HeadPart::kKey, HeadPart::kValue};
    const BlockActs& in = inputs_.blocks[l];
    const std::vector<float>* given[3] = {&in.q, &in.k, &in.v};
    for (int part = 0; part < 3; ++part) {
      const float* values = given[part]->data() + size_t(h) * T * D;  // [H, T, D]
      patched.head_patches.push_back(
          {l, h, parts[part], 0, std::vector<float>(values, values + size_t(T) * D)});
    }
    RunOptions run;
    run.interventions = &patched;
    const float* row = session_.Rerun({0, T, l, true}, clean_.StreamInto(l).data(), run);
    rows.insert(rows.end(), row, row + C);
  }
  const int n = static_cast<int>(end - begin);
  logits.resize(size_t(n) * V);
  for (int i0 = 0; i0 < n; i0 += kProbeRows) {
    const int k = std::min(kProbeRows, n - i0);
    session_.FinalLogits(rows.data() + size_t(i0) * C, k, logits.data() + size_t(i0) * V);
  }
  for (size_t i = begin; i < end; ++i) {
    results_.push_back(
        {cells_[i].layer, cells_[i].index, Metric(logits.data() + (i - begin) * V) - start_.clean});
  }
}

PathPatchResult PathPatch(Conversation& c, const std::vector<int>& clean,
                          const std::vector<int>& corrupted, HeadRef sender,
                          const std::vector<PathReceiver>& receivers, int target, int contrast) {
  CheckPathSender(sender, receivers, c.config());
  LabInterventions keep;
  keep.iv = c.interventions();
  PathPatchSweep job(c, clean, corrupted, receivers, target, contrast, keep);
  PathPatchResult out;
  out.patched = job.Metrics({sender})[0];
  out.clean = job.start().clean;
  out.corrupt = job.start().corrupt;
  out.target = job.start().target;
  out.contrast = job.start().contrast;
  job.End();
  return out;
}

}  // namespace gpt2
