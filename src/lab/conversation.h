// A conversation with a loaded model: the token ids run (the prompt first, then what was
// generated or stepped), the Session and what its KV cache holds, the CaptureStore of those
// positions, and the interventions every run goes under. The experiments (probes.h, jobs.h and
// the jobs beside it, experiment.h, attribute.h, gradients.h, path_patch.h, features.h,
// head_scores.h, compare.h) are functions over one; the page's Lab (lab.h) owns it.
//
// An experiment that runs something else on the session (another prompt, a probe, a backward
// pass) gives the conversation back through one Scope: it remembers the ids, and its End()
// runs them again, captured (unless they were not, with capture off), under the interventions
// to give back, re-running only the blocks that differ when the capture still holds them
// (Rerun), else from the start:
//   Conversation::Scope scope(c);      // or c.WithRestore([&] { ...; return result; })
//   ... run anything, c.UnrecordedSession() included ...
//   scope.End();                       // also done, never throwing, if the experiment throws
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "model/backward.h"
#include "model/capture.h"
#include "model/run_options.h"
#include "model/session.h"

namespace gpt2 {

// Where mean ablation takes each head's mean output from.
enum class MeansOf {
  kCapture,  // the positions captured now (setInterventions's meanAblation)
  kPrompt,   // the plain model's run of the conversation's prompt (the page's "knock out to the
             // mean": TransformerLens's mean ablation over the one prompt there is)
};

// An SAE's steering and clamping as the page and the CLI state them: (feature, alpha) added as
// alpha * W_dec[F] at every position of its hook, (feature, value) clamped (sae/sae.h).
struct SaeIntervention {
  int id = 0;
  std::vector<std::pair<int, float>> steer;
  std::vector<std::pair<int, float>> clamp;
};

// Interventions as the page states them: mean_ablation asks for the knocked-out heads' means,
// found at run time (iv.head_means given: those are used); sae: steering and clamping of loaded
// SAEs, which the Lab turns into iv's stream edits (SaeSet::AddEdits) before they reach a
// conversation.
struct LabInterventions {
  Interventions iv;
  bool mean_ablation = false;
  std::vector<SaeIntervention> sae;
};

class Conversation {
 public:
  class Scope;

  Conversation(const Model& model, int n_threads);
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  const Model& model() const { return model_; }
  const Config& config() const { return model_.config(); }
  const Session& session() const { return *session_; }
  const CaptureStore& capture() const { return capture_; }
  CaptureStore& capture() { return capture_; }
  // The ids the session has run, in order; the first prompt_length() of them are the prompt
  // (the ids run from position 0 by one Run: mean ablation's positions).
  const std::vector<int>& tokens() const { return tokens_; }
  std::vector<int> prompt() const { return {tokens_.begin(), tokens_.begin() + prompt_length_}; }
  int position() const { return session_->position(); }
  // The token sampled after the last one run and not run itself (a generation that stopped
  // there), or -1; the page shows it after the tokens.
  int unrun() const { return unrun_; }
  void set_unrun(int id) { unrun_ = id; }
  // After running the same ids again from the start: the prompt and the unrun token they had.
  void KeepMarks(int prompt_length, int unrun) {
    prompt_length_ = std::min(prompt_length, static_cast<int>(tokens_.size()));
    unrun_ = unrun;
  }
  const float* logits() const { return logits_; }  // [n_vocab] of the last run, or null
  const std::vector<double>& block_ms() const { return block_ms_; }  // [n_layer] of the last Run
  // Counts the times the conversation started over (Reset): a generation stepping it stops when
  // it changed under it.
  int restarts() const { return restarts_; }

  // The page's checks of a prompt, with its messages: not empty, fits the context.
  void CheckPrompt(int n_tokens) const;
  void RequireToken(int id) const;
  // Throws `what` unless the whole conversation is captured.
  void RequireCaptured(const char* what) const;
  // Throws unless the capture holds a plain run of the whole conversation and position is in it.
  void RequirePlainCapture(int position) const;

  // Capture costs memory per position (GPT-2 small: ~260 kB, most of it MLP activations), so
  // the page lets the user turn it off for long generations.
  void SetCapture(bool on) { capture_on_ = on; }
  bool capture_on() const { return capture_on_; }
  // Resolved interventions, applied to every later run and rerun.
  void SetInterventions(Interventions iv) { interventions_ = std::move(iv); }
  const Interventions& interventions() const { return interventions_; }
  // in as the conversation runs it: SAE edits already in in.iv; mean ablation's means over the
  // capture or the prompt (means_prompt, else prompt()), the latter by a plain captured run of
  // it, after which the conversation is that prompt. Throws naming the valid range.
  Interventions Resolve(const LabInterventions& in, MeansOf means,
                        const std::vector<int>* means_prompt = nullptr);
  // [n_layer, n_embd]: each head's output averaged over a plain captured run of prompt, which
  // the conversation then is (under the interventions set, which stay).
  std::vector<float> PlainHeadMeans(const std::vector<int>& prompt);

  void Reset();  // position 0, nothing captured
  // Runs ids at the current position (the prompt, or later tokens), timed per block, captured
  // when capture is on and the capture holds every earlier position. prefill: what runs them
  // instead of Session::Prefill (from position 0 only), e.g. an attribution.
  using Prefill = std::function<const float*(Session&, const RunOptions&)>;
  void Run(const std::vector<int>& ids, const Prefill& prefill = nullptr);
  void Step(int id);
  // The conversation becomes ids, captured whatever the capture setting.
  void Restart(const std::vector<int>& ids);
  // ids captured under the interventions set: only the blocks that differ re-run (Rerun) while
  // the conversation is ids and captured, else Restart. Returns the first block run again.
  int Recapture(const std::vector<int>& ids);
  // Every position again under the interventions, reusing the KV cache and the captured stream
  // before the first block that differs from the last run, and before `block` at the latest;
  // needs the whole conversation captured. Returns the block it started from (n_layer: nothing
  // needed re-running).
  int Rerun(int block);
  int Rerun() { return Rerun(config().n_layer); }

  // [n_vocab]: the whole next-token distribution at captured `position`.
  std::vector<float> FinalProbs(int position) const;
  // log P(id) at captured `position` for each of ids, from the captured final stream.
  std::vector<double> LogProbs(int position, const std::vector<int>& ids);

  // Positions [begin, end) of the captured plain run again from first_block under iv, nothing
  // captured; returns position end - 1's residual stream leaving the last block. iv changes
  // rows changed_begin.. (a patch: from its position; a knocked-out head: every row). The
  // rows probes left changed are remembered: a later probe re-runs those it reads, Rerun all.
  const float* Probe(const Interventions& iv, int first_block, int begin, int end,
                     int changed_begin);
  // The session for runs the conversation does not follow (a backward pass, path patching, a
  // second prompt): the conversation is empty from here on, and the session's cache unknown
  // until Reset (a Scope's End does it).
  Session& UnrecordedSession();
  // The unembedding, for rows an experiment computed.
  void FinalLogits(const float* rows, int n, float* logits) {
    session_->FinalLogits(rows, n, logits);
  }
  // Made by the first gradient experiment.
  Backward& backward();

  // Runs f() in a Scope: the conversation is given back afterwards under the interventions set
  // now, also when f throws.
  template <typename F>
  auto WithRestore(F f) -> decltype(f());

 private:
  void Forward(const int* ids, int n, std::vector<double>* block_ms, const Prefill& prefill);

  const Model& model_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Backward> backward_;
  CaptureStore capture_;
  Interventions interventions_;  // empty: the plain model
  std::vector<int> tokens_;
  int prompt_length_ = 0;
  int unrun_ = -1;
  bool capture_on_ = false;
  const float* logits_ = nullptr;  // owned by the session
  std::vector<double> block_ms_;
  int restarts_ = 0;
  bool unrecorded_ = false;  // the session ran outside the conversation since the last Reset
  // The first block where the KV cache may differ from a plain run's (n_layer: nowhere).
  int cache_first_changed_ = 0;
  // The captured run is the plain model's (so a probe may start from its stream).
  bool capture_plain_ = false;
  // Probes changed the cache of blocks probe_block_.. at positions [probe_begin_, probe_end_)
  // (a bounding box): later probes re-run it, Rerun restores it all.
  bool probed_ = false;
  int probe_block_ = 0, probe_begin_ = 0, probe_end_ = 0;
};

// The one way an experiment gives the conversation back (see the top of this file).
class Conversation::Scope {
 public:
  explicit Scope(Conversation& c);
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();  // End(), if not called; on failure the conversation is left empty

  // The interventions End gives the conversation back under (default: those at the start).
  void RestoreUnder(Interventions iv) { restore_iv_ = std::move(iv); }
  const std::vector<int>& ids() const { return ids_; }
  // Gives the conversation back: its ids run again under the interventions (with none, whatever
  // ran last stays), captured unless it was not and the capture setting is off; the capture
  // setting as it was. Returns the first block run again (0: from the start; n_layer: nothing).
  // Once only.
  int End();
  // Gives nothing back (the conversation is being thrown away).
  void Dismiss() { ended_ = true; }

 private:
  Conversation& c_;
  std::vector<int> ids_;
  int prompt_length_, unrun_;
  bool capture_on_, captured_;
  Interventions restore_iv_;
  bool ended_ = false;
};

template <typename F>
auto Conversation::WithRestore(F f) -> decltype(f()) {
  Scope scope(*this);
  auto result = f();
  scope.End();
  return result;
}

}  // namespace gpt2
