#include "lab/lab.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "base/error.h"
#include "lab/prompt_pair.h"

namespace gpt2 {

LoadedGguf LoadGguf(const uint8_t* data, size_t size) {
  LoadedGguf out;
  out.file = GgufFile::Parse(data, size);
  out.model = Model::FromGguf(out.file);
  out.tokenizer = Tokenizer::FromGguf(*out.file);
  if (out.tokenizer->vocab_size() > out.model->config().n_vocab) {
    throw Error("The tokenizer has " + std::to_string(out.tokenizer->vocab_size()) +
                " tokens but the model only " + std::to_string(out.model->config().n_vocab) + ".");
  }
  return out;
}

std::vector<size_t> GroupsByWork(const std::vector<double>& work, double budget) {
  std::vector<size_t> ends;
  double sum = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const bool open = ends.empty() ? i > 0 : i > ends.back();
    if (open && sum + work[i] > budget) {
      ends.push_back(i);
      sum = 0;
    }
    sum += work[i];
  }
  if (!work.empty()) ends.push_back(work.size());
  return ends;
}

Lab::Lab(LoadedGguf loaded, int n_threads)
    : file_(std::move(loaded.file)), model_(std::move(loaded.model)), tokenizer_(std::move(loaded.tokenizer)) {
  session_ = std::make_unique<Session>(*model_, std::max(1, n_threads));
  capture_.Init(*model_);
  cache_first_changed_ = model_->config().n_layer;
  sampler_ = std::make_unique<Sampler>(SamplingParams{});
}

void Lab::CheckPrompt(int n_tokens) const {
  const int n_ctx = config().n_ctx;
  if (n_tokens == 0) throw Error("The prompt is empty: type at least one character.");
  if (n_tokens > n_ctx) {
    throw Error("The prompt is " + std::to_string(n_tokens) + " tokens long, longer than the model's context of " +
                std::to_string(n_ctx) + " tokens. Shorten it.");
  }
}

// --- The conversation ----------------------------------------------------------------------

void Lab::Reset() {
  session_->Reset();
  capture_.Clear();
  tokens_.clear();
  cache_first_changed_ = config().n_layer;
  probed_ = false;
  logits_ = nullptr;
  loop_.reset();
  pending_ = -1;
}

void Lab::SetSampling(const SamplingParams& params) {
  if (!(params.temperature >= 0) || params.top_k < 0 || !(params.top_p > 0 && params.top_p <= 1)) {
    throw Error("Sampling settings out of range: temperature >= 0, top-k >= 0, 0 < top-p <= 1, seed >= 0.");
  }
  sampler_ = std::make_unique<Sampler>(params);
}

void Lab::Run(const std::vector<int>& ids) {
  const int n = static_cast<int>(ids.size());
  if (position() == 0 || n == 0) CheckPrompt(n);
  if (position() + n > config().n_ctx) {
    throw Error("The context is full (" + std::to_string(config().n_ctx) + " tokens).");
  }
  Forward(ids.data(), n, &block_ms_);
}

void Lab::Step(int id) {
  if (position() + 1 > config().n_ctx) {
    throw Error("The context is full (" + std::to_string(config().n_ctx) + " tokens).");
  }
  Forward(&id, 1, nullptr);
}

int Lab::Sample() {
  if (logits_ == nullptr) throw Error("sample called before prefill");
  return sampler_->Sample(logits_, config().n_vocab);
}

// block_ms: where this call's per-block times go (null: not timed).
void Lab::Forward(const int* ids, int n, std::vector<double>* block_ms) {
  const int pos0 = session_->position();
  if (pos0 > 0 && probed_) {
    throw Error("The cache holds a probe's partial re-run: call rerun() before running on.");
  }
  const bool observe = capture_on_ && capture_.n_positions() == pos0;
  RunOptions run;
  run.interventions = &interventions_;
  run.block_ms = block_ms;
  if (observe) {
    capture_.Begin(pos0, n);
    capture_.Watch(run);
  }
  try {
    logits_ = session_->Prefill(ids, n, run);
  } catch (...) {
    if (observe) capture_.Abort();
    throw;
  }
  if (observe) capture_.Commit();
  tokens_.insert(tokens_.end(), ids, ids + n);
  if (pos0 == 0) {
    cache_first_changed_ = config().n_layer;
    probed_ = false;
  }
  cache_first_changed_ = std::min(cache_first_changed_, interventions_.FirstChangedBlock(config().n_layer));
  capture_plain_ = cache_first_changed_ >= config().n_layer;
}

// --- Generation ----------------------------------------------------------------------------

void Lab::StartGeneration(const std::vector<int>& prompt, const LabInterventions& iv,
                          const SamplingParams& sampling, int max_tokens, bool capture) {
  CheckPrompt(static_cast<int>(prompt.size()));
  SetSampling(sampling);
  prompt_ = prompt;
  SetInterventions(iv, MeansOf::kPrompt);
  Reset();
  capture_on_ = capture;
  GenerateOptions options;
  options.sampling = sampling;
  options.max_tokens = std::max(0, max_tokens);
  options.run_last_token = true;
  conversation_ = prompt;
  Run(prompt);
  loop_ = std::make_unique<TokenLoop>(options, config().n_vocab, config().n_ctx);
  stop_reason_ = StopReason::kMaxTokens;
  pending_ = -1;
}

int Lab::NextToken(bool stop) {
  if (!loop_) return -1;
  if (pending_ >= 0) {
    const TokenLoop::Next next = loop_->After(pending_, !stop, position());
    const int id = pending_;
    pending_ = -1;
    if (next.run) Step(id);
    if (next.stop) {
      stop_reason_ = next.reason;
      loop_.reset();
      return -1;
    }
  } else if (loop_->Finished()) {
    stop_reason_ = StopReason::kMaxTokens;
    loop_.reset();
    return -1;
  }
  pending_ = loop_->Sample(logits_);
  conversation_.push_back(pending_);
  return pending_;
}

// --- Interventions -------------------------------------------------------------------------

// A plain captured run of the conversation's prompt; leaves the session reset.
std::vector<float> Lab::PromptHeadMeans() {
  const std::vector<int> prompt = prompt_;
  const bool capture_on = capture_on_;
  interventions_ = Interventions();
  Reset();
  capture_on_ = true;
  Run(prompt);
  std::vector<float> means = capture_.HeadMeans();
  Reset();
  capture_on_ = capture_on;
  return means;
}

void Lab::Resolve(const LabInterventions& in, MeansOf means, Interventions* out) {
  Interventions iv = in.iv;
  for (const SaeIntervention& s : in.sae) iv.stream_edits.push_back(SaeEdit(s));
  if (iv.head_means.empty() && in.mean_ablation && !iv.ablate_heads.empty()) {
    if (means == MeansOf::kCapture) {
      iv.head_means = capture_.HeadMeans();
    } else if (!prompt_.empty()) {
      iv.head_means = PromptHeadMeans();
    }
  }
  iv.Validate(config());
  *out = std::move(iv);
}

void Lab::SetInterventions(const LabInterventions& iv, MeansOf means) {
  Interventions resolved;
  Resolve(iv, means, &resolved);
  interventions_ = std::move(resolved);
}

int Lab::Rerun() { return RerunFrom(config().n_layer); }

int Lab::RerunFrom(int block) {
  const int P = position(), L = config().n_layer;
  if (P == 0) throw Error("Nothing to re-run: run a prompt first.");
  if (capture_.n_positions() != P) {
    throw Error("Re-running needs the activations of every position: turn on capture and run the prompt again.");
  }
  const int first = std::min({cache_first_changed_, interventions_.FirstChangedBlock(L), block});
  // The cache and the capture are already those of this run (e.g. the plain run before a
  // heads sweep): running the unembedding of every position again would only repeat them.
  if (first >= L && !probed_ && logits_ != nullptr) return L;
  RunOptions run;
  run.interventions = &interventions_;
  const int from = first >= L ? L : first;
  std::vector<float> resid_in = capture_.Residual(from);  // a copy: the capture is rewritten
  capture_.BeginRerun(from);
  capture_.Watch(run);
  try {
    logits_ = session_->Rerun({0, session_->position(), from}, resid_in.data(), run);
  } catch (...) {
    capture_.Clear();
    throw;
  }
  capture_.Commit();
  cache_first_changed_ = interventions_.FirstChangedBlock(L);
  capture_plain_ = cache_first_changed_ >= L;
  probed_ = false;
  return from;
}

// --- Reading -------------------------------------------------------------------------------

std::vector<float> Lab::FinalProbs(int position) const {
  const Config& c = config();
  const int P = capture_.n_positions();
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) + " is out of range; valid positions are 0.." +
                std::to_string(P - 1));
  }
  // ln_f and the unembedding of the final stream, as the logit lens computes it.
  const std::vector<float>& r = capture_.Residual(c.n_layer);
  const size_t C = static_cast<size_t>(c.n_embd);
  const std::vector<std::vector<float>> final_stream{
      std::vector<float>(r.begin() + position * C, r.begin() + (position + 1) * C)};
  const std::vector<LensEntry> lens = LogitLens(*model_, final_stream, 1, position, c.n_vocab);
  std::vector<float> probs(static_cast<size_t>(c.n_vocab), 0.0f);
  for (size_t k = 0; k < lens[0].top_ids.size(); ++k) probs[lens[0].top_ids[k]] = lens[0].top_probs[k];
  return probs;
}

std::vector<double> Lab::LogProbs(int position, const std::vector<int>& ids) {
  const int P = capture_.n_positions();
  if (P == 0 || P != this->position()) {
    throw Error("This needs a captured run: run the text with capture on first.");
  }
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) + " is out of range; valid positions are 0.." +
                std::to_string(P - 1));
  }
  for (int id : ids) RequireToken(id);
  const Config& c = config();
  const float* row = capture_.Residual(c.n_layer).data() + size_t(position) * c.n_embd;
  std::vector<float> logits(size_t(c.n_vocab));
  session_->FinalLogits(row, 1, logits.data());
  std::vector<double> out;
  for (int id : ids) out.push_back(LogProbability(logits.data(), c.n_vocab, id));
  return out;
}

// --- Probes --------------------------------------------------------------------------------

void Lab::RequireConversation(const char* what) const {
  if (tokens_.empty() || capture_.n_positions() != static_cast<int>(tokens_.size())) throw Error(what);
}

void Lab::RequireProbePosition(int position) const {
  const int P = session_->position();
  if (P == 0 || capture_.n_positions() != P || !capture_plain_) {
    throw Error("This experiment needs a captured run of the plain model: run the text with capture "
                "on and no interventions first.");
  }
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) + " is out of range; valid positions are 0.." +
                std::to_string(P - 1));
  }
}

void Lab::RequireToken(int id) const {
  const int V = config().n_vocab;
  if (id < 0 || id >= V) {
    throw Error("The token id " + std::to_string(id) + " is not in the vocabulary (0.." + std::to_string(V - 1) +
                ").");
  }
}

std::vector<double> Lab::AblatedLogProbs(const std::vector<HeadRef>& heads, int position, int target,
                                         const std::vector<float>& means) {
  const Config& c = config();
  RequireProbePosition(position);
  RequireToken(target);
  std::vector<Interventions> probes(heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {  // all checked before any runs
    probes[i].ablate_heads.push_back(heads[i]);
    probes[i].head_means = means;
    probes[i].Validate(c);
  }
  return ProbeLogProbs(static_cast<int>(heads.size()), {target}, [&](int i) {
    return Probe(probes[i], heads[i].layer, 0, position + 1, 0);
  });
}

std::vector<double> Lab::PatchedLogProbs(int layer, const std::vector<int>& positions,
                                         const std::vector<float>& stream, const std::vector<int>& ids) {
  const Config& c = config();
  const size_t C = size_t(c.n_embd);
  if (ids.empty()) throw Error("patching: name at least one token id to measure");
  for (int id : ids) RequireToken(id);
  if (stream.size() != size_t(position()) * C) {
    throw Error("patching: the stream has " + std::to_string(stream.size()) + " values; " +
                std::to_string(position()) + " positions x " + std::to_string(C) + " wanted");
  }
  std::vector<Interventions> probes(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {  // all checked before any runs
    const int p = positions[i];
    RequireProbePosition(p);
    probes[i].patches.push_back(
        {layer, p, std::vector<float>(stream.begin() + size_t(p) * C, stream.begin() + size_t(p + 1) * C)});
    probes[i].Validate(c);
  }
  return ProbeLogProbs(static_cast<int>(positions.size()), ids, [&](int i) {
    return Probe(probes[i], layer, positions[i], position(), positions[i]);
  });
}

// Runs n probes in turn (probe(i) returns its final stream row), unembeds their rows
// kProbeRows at a time and returns the log-probabilities of ids for each: [n, ids.size()].
template <typename RunProbe>
std::vector<double> Lab::ProbeLogProbs(int n, const std::vector<int>& ids, RunProbe probe) {
  const Config& c = config();
  const size_t C = size_t(c.n_embd), V = size_t(c.n_vocab);
  const int rows = std::min(n, kProbeRows);
  std::vector<float> stream(size_t(rows) * C), logits(size_t(rows) * V);
  std::vector<double> out;
  out.reserve(size_t(n) * ids.size());
  for (int i0 = 0; i0 < n; i0 += kProbeRows) {
    const int k = std::min(kProbeRows, n - i0);
    for (int i = 0; i < k; ++i) std::copy_n(probe(i0 + i), C, stream.data() + size_t(i) * C);
    session_->FinalLogits(stream.data(), k, logits.data());
    for (int i = 0; i < k; ++i) {
      const float* row = logits.data() + size_t(i) * V;
      // One softmax normaliser per row: log p(id) = log p(ids[0]) + logit(id) - logit(ids[0]).
      const double first = LogProbability(row, c.n_vocab, ids[0]);
      for (int id : ids) out.push_back(first + (double(row[id]) - double(row[ids[0]])));
    }
  }
  return out;
}

// Positions [begin, end) of the captured plain run again from first_block under iv, nothing
// captured; returns position end - 1's residual stream leaving the last block. iv changes
// rows changed_begin.. (a patch: from its position; a knocked-out head: every row). Rows an
// earlier probe left changed that this one reads (those before `end`) run again with it, which
// gives them back the plain run's values where iv does not change them.
const float* Lab::Probe(const Interventions& iv, int first_block, int begin, int end, int changed_begin) {
  const int L = config().n_layer;
  int from = first_block, b = begin;
  const bool reread = probed_ && probe_begin_ < end;
  if (reread) {
    from = std::min(from, probe_block_);
    b = std::min(b, probe_begin_);
  }
  // What is changed afterwards (a bounding box): this probe's own rows, and an earlier probe's
  // rows from `end` on, which this one does not run.
  bool dirty = false;
  int d_block = L, d_begin = end, d_end = end;
  if (first_block < L && std::max(b, changed_begin) < end) {
    dirty = true;
    d_block = first_block;
    d_begin = std::max(b, changed_begin);
  }
  const int left_begin = reread ? std::max(probe_begin_, end) : probe_begin_;
  if (probed_ && left_begin < probe_end_) {
    d_block = std::min(d_block, probe_block_);
    d_begin = dirty ? std::min(d_begin, left_begin) : left_begin;
    d_end = dirty ? std::max(d_end, probe_end_) : probe_end_;
    dirty = true;
  }
  probed_ = dirty;
  probe_block_ = d_block;
  probe_begin_ = d_begin;
  probe_end_ = d_end;
  cache_first_changed_ = std::min(cache_first_changed_, from);
  logits_ = nullptr;  // the session's logits are no longer the captured run's
  RunOptions run;
  run.interventions = &iv;
  return session_->Rerun({b, end, from, /*final_stream=*/true},
                         capture_.Residual(from).data() + size_t(b) * config().n_embd, run);
}

// --- Jobs ----------------------------------------------------------------------------------

void Lab::PrimePlain() {
  interventions_ = Interventions();
  RecaptureJobConversation();
}

// The job's conversation captured under interventions_: re-running only what differs while the
// capture still holds it, else from the start.
void Lab::RecaptureJobConversation() {
  if (tokens_ == job_conversation_ && capture_.n_positions() == position()) {
    Rerun();
  } else {
    const std::vector<int> ids = job_conversation_;
    Reset();
    capture_on_ = true;
    Run(ids);
  }
}

// A job starts empty and remembers what EndJob gives back: the conversation, and the page's
// interventions resolved (mean ablation: means over the prompt, which may run it).
void Lab::BeginJob(Job kind, const LabInterventions& iv) {
  job_ = kind;
  job_conversation_ = tokens_;
  job_cells_.clear();
  job_results_.clear();
  job_next_ = job_group_ = 0;
  job_group_ends_.clear();
  job_restore_ = LabInterventions();
  Resolve(iv, MeansOf::kPrompt, &job_restore_.iv);
}

HeadSweepStart Lab::StartHeadSweep(int position, int target, const LabInterventions& iv) {
  RequireConversation("Generate some text with \"capture activations\" on first.");
  const int L = config().n_layer, H = config().n_head;
  HeadSweepStart start;
  start.position = std::max(0, std::min(static_cast<int>(tokens_.size()) - 1, position));
  if (target < 0 || target >= config().n_vocab) {
    throw Error("The target token id " + std::to_string(target) + " is not in the vocabulary.");
  }
  start.target = target;
  start.total = L * H;
  BeginJob(Job::kHeadSweep, iv);  // may run the prompt: before priming
  // Mean ablation's means: the page's interventions', else the prompt's (none: zero ablation).
  job_means_.clear();
  if (iv.mean_ablation) {
    job_means_ = job_restore_.iv.head_means;
    if (job_means_.empty() && !prompt_.empty()) job_means_ = PromptHeadMeans();
  }
  // The plain run of the conversation, captured: every probe starts from its stream.
  PrimePlain();
  job_position_ = start.position;
  job_target_ = target;
  start.base = LogProbs(start.position, {target})[0];
  // From the last block down: each probe's block is the first its cache differs in, so no
  // block before it runs again.
  std::vector<double> work;
  for (int l = L - 1; l >= 0; --l) {
    for (int h = 0; h < H; ++h) {
      job_cells_.push_back({l, h, 0});
      work.push_back(double(L - l) / L);
    }
  }
  job_group_ends_ = GroupsByWork(work, kJobBudget);
  return start;
}

PatchingStart Lab::StartPatching(const std::vector<int>& clean, const std::vector<int>& corrupted,
                                 const LabInterventions& iv) {
  CheckPromptPair(clean, corrupted, "patching");
  CheckPrompt(static_cast<int>(clean.size()));
  const int L = config().n_layer, T = static_cast<int>(clean.size());
  BeginJob(Job::kPatching, iv);

  PatchingStart start;
  start.positions = T;
  start.total = L * T;
  interventions_ = Interventions();
  Reset();
  capture_on_ = true;
  // Each prompt's top token, then the two log-probability differences measured as the patched
  // runs' are (in double, from the logits), so a patch that restores all gives 1.
  Run(corrupted);
  start.other = capture_.TopIds(T - 1)[0];
  auto diff = [&](int a) {
    return LogProbs(T - 1, {a})[0] - LogProbs(T - 1, {start.other})[0];
  };
  Reset();
  Run(clean);
  job_streams_.clear();
  for (int l = 0; l < L; ++l) job_streams_.push_back(capture_.Residual(l));
  start.answer = capture_.TopIds(T - 1)[0];
  if (start.answer == start.other) {
    throw Error("Both prompts predict the same next token, so there is no difference to bring back: "
                "choose a corrupted prompt whose most likely next token differs.");
  }
  start.clean_diff = diff(start.answer);
  Reset();
  Run(corrupted);
  start.corrupted_diff = diff(start.answer);
  job_ids_ = {start.answer, start.other};
  job_clean_diff_ = start.clean_diff;
  job_corrupted_diff_ = start.corrupted_diff;

  // Down the positions, then down the blocks: each re-run is kept to what the previous changed.
  std::vector<double> work;
  std::vector<JobCell> cells;
  for (int l = L - 1; l >= 0; --l) {
    for (int p = T - 1; p >= 0; --p) {
      cells.push_back({l, p, 0});
      work.push_back((double(L - l) / L) * (double(T - p) / T));
    }
  }
  // A call never spans two blocks: one call patches one block's stream.
  size_t begin = 0;
  for (size_t end : GroupsByWork(work, kJobBudget)) {
    std::vector<int> blocks;
    for (size_t i = begin; i < end; ++i) {
      if (std::find(blocks.begin(), blocks.end(), cells[i].layer) == blocks.end()) blocks.push_back(cells[i].layer);
    }
    for (int l : blocks) {
      for (size_t i = begin; i < end; ++i) {
        if (cells[i].layer == l) job_cells_.push_back(cells[i]);
      }
      job_group_ends_.push_back(job_cells_.size());
    }
    begin = end;
  }
  return start;
}

int Lab::ContinueJob() {
  if (job_ == Job::kNone) throw Error("No job is running.");
  if (job_done()) return static_cast<int>(job_results_.size());
  const size_t begin = job_next_, end = job_group_ends_[job_group_];
  if (job_ == Job::kSenderPaths) {
    ContinueSenderPaths(begin, end);
  } else if (job_ == Job::kPathPatch) {
    std::vector<HeadRef> senders;
    for (size_t i = begin; i < end; ++i) senders.push_back({job_cells_[i].layer, job_cells_[i].index});
    const std::vector<double> m = PathPatchedMetrics(senders);
    for (size_t i = begin; i < end; ++i) {
      job_results_.push_back({job_cells_[i].layer, job_cells_[i].index, m[i - begin] - path_.clean});
    }
  } else if (job_ == Job::kHeadSweep) {
    std::vector<HeadRef> heads;
    for (size_t i = begin; i < end; ++i) heads.push_back({job_cells_[i].layer, job_cells_[i].index});
    const std::vector<double> lp = AblatedLogProbs(heads, job_position_, job_target_, job_means_);
    for (size_t i = begin; i < end; ++i) job_results_.push_back({job_cells_[i].layer, job_cells_[i].index, lp[i - begin]});
  } else {
    const int l = job_cells_[begin].layer;
    std::vector<int> positions;
    for (size_t i = begin; i < end; ++i) positions.push_back(job_cells_[i].index);
    const std::vector<double> lp = PatchedLogProbs(l, positions, job_streams_[l], job_ids_);
    for (size_t i = begin; i < end; ++i) {
      const size_t k = i - begin;
      const double recovered =
          (lp[2 * k] - lp[2 * k + 1] - job_corrupted_diff_) / (job_clean_diff_ - job_corrupted_diff_);
      job_results_.push_back({l, positions[k], recovered});
    }
  }
  job_next_ = end;
  ++job_group_;
  return static_cast<int>(job_results_.size());
}

void Lab::EndJob() {
  if (job_ == Job::kNone) return;
  const Job ended = job_;
  job_ = Job::kNone;
  job_streams_.clear();
  job_means_.clear();
  interventions_ = job_restore_.iv;
  if (ended == Job::kPathPatch || ended == Job::kSenderPaths) {
    // Its runs went past the lab's bookkeeping (uncaptured, the cache left patched): start over.
    path_ = PathPatchState();
    Reset();
  }
  if (job_conversation_.empty()) return;  // nothing to give back: the job's last run stays
  RecaptureJobConversation();
}

// --- Experiments ---------------------------------------------------------------------------

std::vector<int> Lab::SampleIds(const std::vector<int>& prompt, const SamplingParams& sampling, int max_tokens) {
  Reset();
  capture_on_ = false;
  SetSampling(sampling);
  Run(prompt);
  GenerateOptions options;
  options.sampling = sampling;
  options.max_tokens = max_tokens;
  TokenLoop loop(options, config().n_vocab, config().n_ctx);
  std::vector<int> ids;
  while (!loop.Finished()) {
    const int id = loop.Sample(logits_);
    ids.push_back(id);
    const TokenLoop::Next next = loop.After(id, true, position());
    if (next.run) Step(id);
    if (next.stop) break;
  }
  return ids;
}

ExperimentResult Lab::Experiment(const std::vector<int>& prompt, const LabInterventions& iv, int position,
                                 const SamplingParams& sampling, int max_tokens) {
  if (tokens_.empty()) throw Error("Generate some text first, then run the experiment.");
  CheckPrompt(static_cast<int>(prompt.size()));
  const std::vector<int> conversation = tokens_;
  const std::vector<int> saved_prompt = prompt_;
  prompt_ = prompt;  // mean ablation's positions: this prompt's
  Interventions changed;
  try {
    Resolve(iv, MeansOf::kPrompt, &changed);
  } catch (...) {
    prompt_ = saved_prompt;
    throw;
  }
  prompt_ = saved_prompt;
  ExperimentResult out;
  interventions_ = Interventions();
  out.text_before = SampleIds(prompt, sampling, max_tokens);
  interventions_ = changed;
  out.text_after = SampleIds(prompt, sampling, max_tokens);
  // The conversation, plain, then re-run under the interventions: the re-run reuses the cache
  // and the stream before the first changed block.
  interventions_ = Interventions();
  Reset();
  capture_on_ = true;
  Run(conversation);
  out.position = std::max(0, std::min(static_cast<int>(conversation.size()) - 1, position));
  out.before = FinalProbs(out.position);
  interventions_ = std::move(changed);
  out.from_block = Rerun();
  out.after = FinalProbs(out.position);
  return out;
}

Attribution Lab::Attribute(const std::vector<int>& ids, int position, int target, int contrast) {
  CheckPrompt(static_cast<int>(ids.size()));
  AttributionRequest request;
  request.position = position;
  request.target = target;
  request.contrast = contrast;
  request.interventions = &interventions_;
  capture_.Clear();
  tokens_.clear();
  logits_ = nullptr;
  loop_.reset();
  pending_ = -1;
  if (capture_on_) {
    capture_.Begin(0, static_cast<int>(ids.size()));
    request.observer = capture_.Observer();
  }
  Attribution a;
  try {
    a = AttributeLogit(*session_, ids, request);
  } catch (...) {
    // The conversation is gone either way: leave the session and the capture both empty.
    session_->Reset();
    capture_.Clear();
    throw;
  }
  if (capture_on_) capture_.Commit();
  tokens_ = ids;
  logits_ = a.last_logits;
  cache_first_changed_ = interventions_.FirstChangedBlock(config().n_layer);
  capture_plain_ = cache_first_changed_ >= config().n_layer;
  probed_ = false;
  return a;
}

Attribution Lab::AttributeConversation(const LabInterventions& iv, int position, int target) {
  if (tokens_.empty()) throw Error("Generate some text first.");
  const std::vector<int> ids = tokens_;  // mean ablation may run the prompt in between
  SetInterventions(iv, MeansOf::kPrompt);
  return Attribute(ids, position, target, -1);
}

}  // namespace gpt2
