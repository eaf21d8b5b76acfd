#include "lab/conversation.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"

namespace gpt2 {

Conversation::Conversation(const Model& model, int n_threads)
    : model_(model), session_(std::make_unique<Session>(model, std::max(1, n_threads))) {
  capture_.Init(model);
  cache_first_changed_ = config().n_layer;
}

void Conversation::CheckPrompt(int n_tokens) const {
  const int n_ctx = config().n_ctx;
  if (n_tokens == 0) throw Error("The prompt is empty: type at least one character.");
  if (n_tokens > n_ctx) {
    throw Error("The prompt is " + std::to_string(n_tokens) +
                " tokens long, longer than the model's context of " + std::to_string(n_ctx) +
                " tokens. Shorten it.");
  }
}

void Conversation::RequireToken(int id) const {
  const int V = config().n_vocab;
  if (id < 0 || id >= V) {
    throw Error("The token id " + std::to_string(id) + " is not in the vocabulary (0.." +
                std::to_string(V - 1) + ").");
  }
}

void Conversation::RequireCaptured(const char* what) const {
  if (tokens_.empty() || capture_.n_positions() != static_cast<int>(tokens_.size()))
    throw Error(what);
}

void Conversation::RequirePlainCapture(int position) const {
  const int P = session_->position();
  if (P == 0 || capture_.n_positions() != P || !capture_plain_) {
    throw Error(
        "This experiment needs a captured run of the plain model: run the text with capture "
        "on and no interventions first.");
  }
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) +
                " is out of range; valid positions are 0.." + std::to_string(P - 1));
  }
}

// --- Running -------------------------------------------------------------------------------

void Conversation::Reset() {
  session_->Reset();
  capture_.Clear();
  tokens_.clear();
  prompt_length_ = 0;
  unrun_ = -1;
  cache_first_changed_ = config().n_layer;
  probed_ = false;
  logits_ = nullptr;
  unrecorded_ = false;
  ++restarts_;
}

void Conversation::Run(const std::vector<int>& ids, const Prefill& prefill) {
  const int n = static_cast<int>(ids.size());
  if (position() == 0 || n == 0) CheckPrompt(n);
  if (position() + n > config().n_ctx) {
    throw Error("The context is full (" + std::to_string(config().n_ctx) + " tokens).");
  }
  if (prefill && position() != 0)
    throw Error("A run of its own starts the conversation over: Reset first.");
  Forward(ids.data(), n, &block_ms_, prefill);
}

void Conversation::Step(int id) {
  if (position() + 1 > config().n_ctx) {
    throw Error("The context is full (" + std::to_string(config().n_ctx) + " tokens).");
  }
  Forward(&id, 1, nullptr, nullptr);
}

void Conversation::Restart(const std::vector<int>& ids) {
  const bool capture_on = capture_on_;
  Reset();
  capture_on_ = true;
  try {
    Run(ids);
  } catch (...) {
    capture_on_ = capture_on;
    throw;
  }
  capture_on_ = capture_on;
}

int Conversation::Recapture(const std::vector<int>& ids) {
  if (tokens_ == ids && capture_.n_positions() == position()) return Rerun();
  Restart(ids);
  return 0;
}

// block_ms: where this call's per-block times go (null: not timed).
void Conversation::Forward(const int* ids, int n, std::vector<double>* block_ms,
                           const Prefill& prefill) {
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
    logits_ = prefill ? prefill(*session_, run) : session_->Prefill(ids, n, run);
  } catch (...) {
    if (observe) capture_.Abort();
    if (prefill) Reset();  // it ran the session its own way: nothing of it is known
    throw;
  }
  if (observe) capture_.Commit();
  tokens_.insert(tokens_.end(), ids, ids + n);
  unrun_ = -1;
  if (pos0 == 0) {
    prompt_length_ = n;
    cache_first_changed_ = config().n_layer;
    probed_ = false;
  }
  cache_first_changed_ =
      std::min(cache_first_changed_, interventions_.FirstChangedBlock(config().n_layer));
  capture_plain_ = cache_first_changed_ >= config().n_layer;
}

int Conversation::Rerun(int block) {
  const int P = position(), L = config().n_layer;
  if (P == 0) throw Error("Nothing to re-run: run a prompt first.");
  if (capture_.n_positions() != P) {
    throw Error(
        "Re-running needs the activations of every position: turn on capture and run the prompt "
        "again.");
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

Session& Conversation::UnrecordedSession() {
  Reset();
  unrecorded_ = true;
  return *session_;
}

Backward& Conversation::backward() {
  if (!backward_) backward_ = std::make_unique<Backward>(model_, session_->pool());
  return *backward_;
}

// --- Interventions -------------------------------------------------------------------------

std::vector<float> Conversation::PlainHeadMeans(const std::vector<int>& prompt) {
  Interventions kept = std::move(interventions_);
  interventions_ = Interventions();
  try {
    Restart(prompt);
  } catch (...) {
    interventions_ = std::move(kept);
    throw;
  }
  interventions_ = std::move(kept);
  return capture_.HeadMeans();
}

Interventions Conversation::Resolve(const LabInterventions& in, MeansOf means,
                                    const std::vector<int>* means_prompt) {
  if (!in.sae.empty())
    throw Error("SAE interventions reach a conversation as stream edits (SaeSet::AddEdits).");
  Interventions iv = in.iv;
  if (iv.head_means.empty() && in.mean_ablation && !iv.ablate_heads.empty()) {
    if (means == MeansOf::kCapture) {
      iv.head_means = capture_.HeadMeans();
    } else {
      const std::vector<int> prompt = means_prompt != nullptr ? *means_prompt : this->prompt();
      if (!prompt.empty()) iv.head_means = PlainHeadMeans(prompt);
    }
  }
  iv.Validate(config());
  return iv;
}

// --- Reading -------------------------------------------------------------------------------

std::vector<float> Conversation::FinalProbs(int position) const {
  const Config& c = config();
  const int P = capture_.n_positions();
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) +
                " is out of range; valid positions are 0.." + std::to_string(P - 1));
  }
  // ln_f and the unembedding of the final stream, as the logit lens computes it.
  const std::vector<float>& r = capture_.Residual(c.n_layer);
  const size_t C = static_cast<size_t>(c.n_embd);
  const std::vector<std::vector<float>> final_stream{
      std::vector<float>(r.begin() + position * C, r.begin() + (position + 1) * C)};
  const std::vector<LensEntry> lens = LogitLens(model_, final_stream, 1, position, c.n_vocab);
  std::vector<float> probs(static_cast<size_t>(c.n_vocab), 0.0f);
  for (size_t k = 0; k < lens[0].top_ids.size(); ++k)
    probs[lens[0].top_ids[k]] = lens[0].top_probs[k];
  return probs;
}

std::vector<double> Conversation::LogProbs(int position, const std::vector<int>& ids) {
  const int P = capture_.n_positions();
  if (P == 0 || P != this->position()) {
    throw Error("This needs a captured run: run the text with capture on first.");
  }
  if (position < 0 || position >= P) {
    throw Error("position " + std::to_string(position) +
                " is out of range; valid positions are 0.." + std::to_string(P - 1));
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

// Rows an earlier probe left changed that this one reads (those before `end`) run again with
// it, which gives them back the plain run's values where iv does not change them.
const float* Conversation::Probe(const Interventions& iv, int first_block, int begin, int end,
                                 int changed_begin) {
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

// --- Scope ---------------------------------------------------------------------------------

Conversation::Scope::Scope(Conversation& c)
    : c_(c),
      ids_(c.tokens_),
      prompt_length_(c.prompt_length_),
      unrun_(c.unrun_),
      capture_on_(c.capture_on_),
      captured_(!c.tokens_.empty() &&
                c.capture_.n_positions() == static_cast<int>(c.tokens_.size())),
      restore_iv_(c.interventions_) {}

Conversation::Scope::~Scope() {
  if (ended_) return;
  try {
    End();
  } catch (...) {
    c_.Reset();  // never throw from here: the conversation is left empty
    c_.capture_on_ = capture_on_;
  }
}

int Conversation::Scope::End() {
  const int L = c_.config().n_layer;
  if (ended_) return L;
  ended_ = true;
  c_.interventions_ = std::move(restore_iv_);
  if (c_.unrecorded_) c_.Reset();
  c_.capture_on_ = capture_on_;
  int from = L;
  if (!ids_.empty()) {
    const bool held = c_.tokens_ == ids_ && c_.capture_.n_positions() == c_.position();
    if (captured_ || capture_on_ || held) {
      from = c_.Recapture(ids_);
    } else {  // as it was: uncaptured (a long conversation's capture may not fit)
      c_.Reset();
      c_.Run(ids_);
      from = 0;
    }
    c_.prompt_length_ = prompt_length_;
    c_.unrun_ = unrun_;
  }
  return from;
}

}  // namespace gpt2
