// The lab: one conversation with a loaded model and the experiments run on it. The page's
// bindings (src/bindings/embind.cc) forward to it; its native tests are tests/lab/.
//
// A Lab owns the token ids run (the prompt and what was generated), the Session and what its
// KV cache holds (plain or intervened, where probes left it changed), the CaptureStore, the
// current interventions, sampling and the generation loop (model/generate.h's TokenLoop, one
// token per call so a caller can stop between tokens), and the probes:
//   LogProbs           log-probabilities of ids at a captured position (the run as it is)
//   AblatedLogProbs    heads knocked out one at a time, positions 0..p re-run from each head's block
//   PatchedLogProbs    the stream entering a block replaced at one position, p.. re-run from there
//   HeadSweep/Patching the two as incremental jobs: Start, then Continue() does about
//                      kJobBudget prefills of work per call (progress, cancel between calls),
//                      EndJob() gives the conversation back as it was
//   Experiment         the plain and the intervened model side by side at a position
//   Attribute          direct logit attribution (model/attribution.h)
//   PathPatch          path patching from a sender head to receivers (path_patch.h), and its
//                      sweep over every sender as a job
// Every probe re-runs only what it changes, starting from the captured plain run's stream and
// reusing the cache before its first block (Session::Rerun with a range).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "lab/features.h"
#include "lab/path_patch.h"
#include "lab/gradients.h"
#include "model/attribution.h"
#include "model/capture.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/run_options.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

// A GGUF file in memory, parsed, with its weights bound and its tokenizer read. The bytes are
// the caller's and must outlive it.
struct LoadedGguf {
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};
// Throws gpt2::Error when the file is not a GPT-2 GGUF this engine runs, or its tokenizer has
// more tokens than the model's vocabulary.
LoadedGguf LoadGguf(const uint8_t* data, size_t size);

// Where mean ablation takes each head's mean output from.
enum class MeansOf {
  kCapture,  // the positions captured now (setInterventions's meanAblation)
  kPrompt,   // the plain model's run of the conversation's prompt (the page's "knock out to the
             // mean": TransformerLens's mean ablation over the one prompt there is)
};

// Interventions as the page states them: mean_ablation asks for the knocked-out heads' means,
// found at run time (iv.head_means given: those are used).
struct LabInterventions {
  Interventions iv;
  bool mean_ablation = false;
  std::vector<SaeIntervention> sae;  // steering and clamping of loaded SAEs, as stream edits
};

// The plain and the intervened model at one position, and what each writes from the prompt
// with the same sampling settings.
struct ExperimentResult {
  int position = 0;
  int from_block = 0;             // the first block the re-run under the interventions ran
  std::vector<float> before;      // [n_vocab] plain next-token distribution
  std::vector<float> after;       // [n_vocab] intervened
  std::vector<int> text_before;   // sampled ids
  std::vector<int> text_after;
};

struct HeadSweepStart {
  int position = 0, target = 0, total = 0;
  double base = 0;  // log P(target) of the plain model
};

struct PatchingStart {
  int positions = 0, total = 0;
  int answer = 0, other = 0;  // the clean and the corrupted run's most probable next token
  double clean_diff = 0, corrupted_diff = 0;  // log p(answer) - log p(other)
};

// One measured cell of a job: a head (sweep, path patching: layer, head) or a patch (patching:
// layer, position); value: the log-probability (sweep), the share of the logit difference the
// patch brings back (patching) or m_patched - m_clean (path patching).
struct JobCell {
  int layer = 0, index = 0;
  double value = 0;
};

class Lab {
 public:
  // Probes unembedded together (their logits: rows x n_vocab floats, 3.2 MB for GPT-2).
  static constexpr int kProbeRows = 16;
  // Prefills of work per Continue() of a job (~0.6 s for GPT-2 small at 32 tokens): bounds how
  // long a cancel or a progress update waits, while the probes of a call share the unembedding.
  static constexpr double kJobBudget = 4;

  // loaded.file's bytes must outlive the Lab.
  Lab(LoadedGguf loaded, int n_threads);
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  const Model& model() const { return *model_; }
  const Config& config() const { return model_->config(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  const Session& session() const { return *session_; }
  // For the quantization lens (lab/compare.h CompareWithLab), which resets the lab before and
  // after running it on the session.
  Session& session_for_compare() { return *session_; }
  const CaptureStore& capture() const { return capture_; }

  // The page's checks of a prompt, with its messages: not empty, fits the context.
  void CheckPrompt(int n_tokens) const;

  // --- The conversation ------------------------------------------------------------------
  void Reset();  // position 0, capture cleared
  // Capture costs memory per position (GPT-2 small: ~260 kB, most of it MLP activations), so
  // the page lets the user turn it off for long generations.
  void SetCapture(bool on) { capture_on_ = on; }
  bool capture_on() const { return capture_on_; }
  // Throws for settings out of range.
  void SetSampling(const SamplingParams& params);
  // Runs ids at the current position (the prompt, or later tokens), timed per block.
  void Run(const std::vector<int>& ids);
  void Step(int id);
  int Sample();  // from the logits of the last forward pass
  int position() const { return session_->position(); }
  // The ids the session has run, in order (after a job: the conversation again).
  const std::vector<int>& tokens() const { return tokens_; }
  const std::vector<double>& block_ms() const { return block_ms_; }  // [n_layer] of the last Run

  // --- Generation (model/generate.h's TokenLoop, one token per call) ----------------------
  // A new conversation: reset, interventions set (means from this prompt), the prompt run
  // (captured if `capture`), timed per block.
  void StartGeneration(const std::vector<int>& prompt, const LabInterventions& iv,
                       const SamplingParams& sampling, int max_tokens, bool capture);
  // First applies `stop` to the token returned last (run it and go on, or end), then samples
  // the next; -1 when generation has ended (reason: stop_reason()).
  int NextToken(bool stop);
  StopReason stop_reason() const { return stop_reason_; }
  int generated() const { return loop_ ? loop_->produced() : 0; }
  const std::vector<int>& prompt() const { return prompt_; }
  // The prompt and every token sampled since, the last maybe not run (as the page shows them).
  const std::vector<int>& conversation() const { return conversation_; }

  // --- Interventions ---------------------------------------------------------------------
  // Applied to every later run, rerun and attribution. Throws naming the valid range.
  void SetInterventions(const LabInterventions& iv, MeansOf means);
  const Interventions& interventions() const { return interventions_; }
  int FirstChangedBlock() const { return interventions_.FirstChangedBlock(config().n_layer); }
  // Every position again under the current interventions, reusing the KV cache and the captured
  // stream before the first block that differs from the last run; needs the whole conversation
  // captured. Returns the block it started from (n_layer: nothing needed re-running).
  int Rerun();
  // [n_layer, n_embd]: each head's output averaged over the captured positions.
  std::vector<float> HeadMeans() const { return capture_.HeadMeans(); }

  // --- Reading ---------------------------------------------------------------------------
  // [n_vocab]: the whole next-token distribution at captured `position`.
  std::vector<float> FinalProbs(int position) const;
  // log P(id) at captured `position` for each of ids, from the captured final stream.
  std::vector<double> LogProbs(int position, const std::vector<int>& ids);

  // --- Probes (need a captured plain run of the whole conversation) -----------------------
  // log P(target) at `position` with each head knocked out alone (zeroed, or replaced by
  // means [n_layer, n_embd] unless empty). Positions 0..position run again from the head's
  // block; a sweep from the last block down costs sum_l (n_layer - l) / n_layer prefills a head.
  std::vector<double> AblatedLogProbs(const std::vector<HeadRef>& heads, int position, int target,
                                      const std::vector<float>& means);
  // For each of positions: the log-probabilities of ids after the last position when the
  // stream entering block `layer` there is row p of stream ([position(), n_embd], e.g. another
  // run's residual(layer)). [positions.size(), ids.size()]; going down the positions, each
  // probe re-runs only the rows from its own on.
  std::vector<double> PatchedLogProbs(int layer, const std::vector<int>& positions,
                                      const std::vector<float>& stream, const std::vector<int>& ids);

  // --- Jobs: Start, Continue until done() or the caller cancels, EndJob -------------------
  // "Which heads matter": every head knocked out alone, log P(target) at `position` (clamped to
  // the conversation), the plain model otherwise; iv: the page's interventions (their
  // mean_ablation chooses mean over zero ablation) restored by EndJob.
  HeadSweepStart StartHeadSweep(int position, int target, const LabInterventions& iv);
  // Activation patching of two prompts of the same length: the clean stream entering each block
  // at each position patched into the corrupted run; iv restored by EndJob.
  PatchingStart StartPatching(const std::vector<int>& clean, const std::vector<int>& corrupted,
                              const LabInterventions& iv);
  // Path patching (path_patch.h; defined in path_patch.cc) of two prompts of the same length
  // to receivers (empty: logits); target -1: the clean run's most probable next token; contrast
  // -1: none. The sweep's cells are every head as the sender, layer by layer, value
  // m_patched - m_clean; iv restored by EndJob.
  PathPatchStart StartPathPatch(const std::vector<int>& clean, const std::vector<int>& corrupted,
                                const std::vector<PathReceiver>& receivers, int target, int contrast,
                                const LabInterventions& iv);
  // One sender's paths, each alone: to the logits and to every head of a later block (its q, k and
  // v together). Cells: (n_layer, 0) for the logits first, then (layer, head) from the last block
  // down, value m_patched - m_clean; iv restored by EndJob.
  PathPatchStart StartSenderPaths(const std::vector<int>& clean, const std::vector<int>& corrupted, HeadRef sender,
                                  int target, int contrast, const LabInterventions& iv);
  // One sender's run of steps 1-3, the conversation given back afterwards (as EndJob does).
  PathPatchResult PathPatch(const std::vector<int>& clean, const std::vector<int>& corrupted, HeadRef sender,
                            const std::vector<PathReceiver>& receivers, int target, int contrast);
  // Runs the next group of cells (about kJobBudget prefills); returns the cells measured so far.
  int ContinueJob();
  bool job_done() const { return job_next_ >= job_cells_.size(); }
  int job_total() const { return static_cast<int>(job_cells_.size()); }
  // The cells measured so far, in the order run.
  const std::vector<JobCell>& job_results() const { return job_results_; }
  // Ends the job (finished or cancelled): the conversation again, captured, under the page's
  // interventions (without one, the job's last run stays).
  void EndJob();

  // --- Experiments -----------------------------------------------------------------------
  // "Run again": the plain model's and iv's distributions at `position` (clamped) of the
  // conversation, and what each writes from `prompt` (capture off, same sampling); leaves the
  // conversation captured under iv.
  ExperimentResult Experiment(const std::vector<int>& prompt, const LabInterventions& iv, int position,
                              const SamplingParams& sampling, int max_tokens);
  // Direct logit attribution of `ids` under the current interventions; the conversation
  // restarts with ids (as Reset + Run(ids), captured if capture is on).
  Attribution Attribute(const std::vector<int>& ids, int position, int target, int contrast);
  // The same for the conversation run (tokens()) under iv (means over the prompt).
  Attribution AttributeConversation(const LabInterventions& iv, int position, int target);

  // --- Gradients (lab/gradients.h), under the current interventions; afterwards the
  // conversation is run again, captured (the experiments' runs leave other keys in the cache) --
  // Saliency of the conversation's tokens.
  SaliencyResult Saliency(const SaliencyRequest& request);
  // Attribution patching of two prompts of the same length.
  AtpResult AttributionPatching(const std::vector<int>& clean, const std::vector<int>& corrupt,
                                int target, int contrast);
  // Why head layer.head attends from `query` to `key` in the conversation: gradient x input of
  // that attention score (lab/gradients.h ScoreSaliency).
  ScoreSaliencyResult ScoreSaliency(const ScoreSpec& spec);
  // One attribution patching cell run exactly (lab/gradients.h ExactPatch).
  ExactPatchResult ExactPatch(const std::vector<int>& clean, const std::vector<int>& corrupt, AtpCell cell,
                              int layer, int index, int target, int contrast);

  // --- Sparse autoencoders (lab/features.h; defined in features.cc) ----------------------
  // Takes the SAE GGUF's bytes (convert/sae_convert.h); returns its id. Throws unless its d_in
  // is the model's width.
  int LoadSae(std::vector<uint8_t> bytes);
  void DropSae(int id);  // later interventions may no longer name it; those set keep it alive
  const Sae& sae(int id) const;
  const LoadedSae& loaded_sae(int id) const;
  std::vector<int> sae_ids() const;  // in load order
  // Read at the captured conversation as it ran (under the interventions set); an SAE whose hook
  // the capture does not keep has its stream captured by re-running from its block once.
  SaeFeatureList SaeFeatures(int id, int position, int k);
  std::vector<float> SaeStrip(int id, int feature);  // [captured positions]
  std::vector<SaeLogitWeights> SaeLogitWeightsOf(int id, const std::vector<int>& features, int k) const;
  // The stream edit of an SAE's steering and clamping (throws for a feature out of range).
  StreamEdit SaeEdit(const SaeIntervention& s) const;

 private:
  void Forward(const int* ids, int n, std::vector<double>* block_ms);
  // Rerun() from block `block` at the latest.
  int RerunFrom(int block);
  // The features [captured positions, d_sae] of SAE `id` at the capture (features.cc).
  const LoadedSae& EncodeCapture(int id);
  LoadedSae& FindSae(int id);
  std::vector<float> PromptHeadMeans();
  void Resolve(const LabInterventions& iv, MeansOf means, Interventions* out);
  void RequireConversation(const char* what) const;
  void RequireProbePosition(int position) const;
  void RequireToken(int id) const;
  // The conversation (tokens_) captured under the plain model, re-running what differs.
  void PrimePlain();
  void RecaptureJobConversation();
  std::vector<int> SampleIds(const std::vector<int>& prompt, const SamplingParams& sampling, int max_tokens);
  template <typename RunProbe>
  std::vector<double> ProbeLogProbs(int n, const std::vector<int>& ids, RunProbe probe);
  const float* Probe(const Interventions& iv, int first_block, int begin, int end, int changed_begin);

  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Backward> backward_;  // made by the first gradient experiment
  const float* logits_ = nullptr;  // [n_vocab] of the last forward, owned by the session
  bool capture_on_ = false;
  CaptureStore capture_;
  Interventions interventions_;  // applied to every forward pass; empty: the plain model
  std::vector<double> block_ms_;
  std::vector<int> tokens_;  // the ids the session has run
  std::vector<int> prompt_;  // the prompt of the last generation (its mean ablation's positions)
  std::vector<int> conversation_;  // prompt_ and the ids sampled since
  std::vector<std::unique_ptr<LoadedSae>> saes_;
  int next_sae_id_ = 1;

  // Generation
  std::unique_ptr<TokenLoop> loop_;
  int pending_ = -1;  // the token NextToken returned last, not yet run or ended
  StopReason stop_reason_ = StopReason::kMaxTokens;

  // The first block where the KV cache may differ from a plain run's (n_layer: nowhere).
  int cache_first_changed_ = 0;
  // The captured run is the plain model's (so a probe may start from its stream).
  bool capture_plain_ = false;
  // Probes changed the cache of blocks probe_block_.. at positions [probe_begin_, probe_end_)
  // (a bounding box): later probes re-run it, Rerun restores it all.
  bool probed_ = false;
  int probe_block_ = 0, probe_begin_ = 0, probe_end_ = 0;

  // The job running: its cells in the order run, grouped into calls.
  enum class Job { kNone, kHeadSweep, kPatching, kPathPatch, kSenderPaths };
  void BeginJob(Job kind, const LabInterventions& iv);
  Job job_ = Job::kNone;
  std::vector<JobCell> job_cells_, job_results_;
  std::vector<size_t> job_group_ends_;  // cells [end of previous group, this)
  size_t job_next_ = 0, job_group_ = 0;
  LabInterventions job_restore_;
  std::vector<int> job_conversation_;  // the conversation to give back
  int job_position_ = 0, job_target_ = 0;
  std::vector<float> job_means_;
  std::vector<int> job_ids_;                    // patching: {answer, other}
  std::vector<std::vector<float>> job_streams_;  // patching: the clean run's residual(l), each l
  double job_clean_diff_ = 0, job_corrupted_diff_ = 0;
  // Path patching (path_patch.cc): step 1's runs, and step 2-3's final stream row of a sender
  // (nullptr when no receiver comes after it: then m is the clean run's).
  PathPatchState path_;
  PathPatchStart PreparePathPatch(Job kind, const std::vector<int>& clean, const std::vector<int>& corrupted,
                                  const std::vector<PathReceiver>& receivers, int target, int contrast,
                                  const LabInterventions& iv);
  const float* PathPatchedRow(HeadRef sender);
  std::vector<double> PathPatchedMetrics(const std::vector<HeadRef>& senders);
  void ContinueSenderPaths(size_t begin, size_t end);
};

// Splits items (weights: each one's work in full re-runs of the prompt, in the order run) into
// consecutive groups of about `budget` work each, at least one item per group; returns the end
// index of each group.
std::vector<size_t> GroupsByWork(const std::vector<double>& work, double budget);

}  // namespace gpt2
