// The lab: a loaded model, one conversation with it (conversation.h), the SAEs loaded beside it
// (features.h), and the generation or job running on it. The page's bindings
// (src/bindings/embind.cc) and the CLI's lab commands call it; it only forwards: the experiments
// are functions over the Conversation, each in its own file:
//   probes.h       log-probabilities with heads knocked out or the stream patched, from the
//                  captured plain run, re-running only what changes
//   head_sweep.h, patching.h, path_patch.h   the same as cell jobs (job.h): Start, then
//                  ContinueJob() does about kJobBudget prefills of work per call (progress,
//                  cancel between calls), EndJob() gives the conversation back
//   experiment.h   the plain and the intervened model side by side at a position
//   attribute.h    direct logit attribution (model/attribution.h)
//   gradients.h    saliency, attribution patching, an attention score's saliency
//   features.h     SAE features read at the capture
//   head_scores.h, compare.h   head detection, the quantization lens
//   graph.h        attribution graphs over loaded transcoders (src/graph/): a job in the same
//                  slot, then the graph held for re-pruning (graph/graph_json.h), its check
//                  (graph_check.h), its features' cards (graph_card.h) and its heads' QK
//                  attribution (qk.h)
// Its native tests are tests/lab/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "graph/graph_json.h"
#include "lab/attribute.h"
#include "lab/conversation.h"
#include "lab/dashboard_file.h"
#include "lab/experiment.h"
#include "lab/features.h"
#include "lab/generation.h"
#include "lab/gradients.h"
#include "lab/graph.h"
#include "lab/graph_card.h"
#include "lab/graph_check.h"
#include "lab/head_sweep.h"
#include "lab/job.h"
#include "lab/patching.h"
#include "lab/path_patch.h"
#include "lab/probes.h"
#include "lab/qk.h"
#include "model/sampler.h"
#include "model/session.h"
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

class Lab {
 public:
  // loaded.file's bytes must outlive the Lab.
  Lab(LoadedGguf loaded, int n_threads);
  ~Lab() {
    if (job_) job_->Dismiss();  // no conversation to give back to
  }
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  const Model& model() const { return *model_; }
  const Config& config() const { return model_->config(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  const Session& session() const { return conv_.session(); }
  Conversation& conv() { return conv_; }
  const CaptureStore& capture() const { return conv_.capture(); }

  // --- The conversation by hand ------------------------------------------------------------
  void CheckPrompt(int n_tokens) const { conv_.CheckPrompt(n_tokens); }
  void Reset() { conv_.Reset(); }
  void SetCapture(bool on) { conv_.SetCapture(on); }
  bool capture_on() const { return conv_.capture_on(); }
  void SetSampling(const SamplingParams& params);  // throws for settings out of range
  void Run(const std::vector<int>& ids) { conv_.Run(ids); }
  void Step(int id) { conv_.Step(id); }
  int Sample();  // from the logits of the last forward pass
  int position() const { return conv_.position(); }
  const std::vector<int>& tokens() const { return conv_.tokens(); }
  const std::vector<double>& block_ms() const { return conv_.block_ms(); }

  // --- Generation (generation.h) -------------------------------------------------------------
  // Interventions resolved with means over this prompt.
  void StartGeneration(const std::vector<int>& prompt, const LabInterventions& iv,
                       const SamplingParams& sampling, int max_tokens, bool capture);
  int NextToken(bool stop) { return generation_ ? generation_->Next(stop) : -1; }
  StopReason stop_reason() const {
    return generation_ ? generation_->stop_reason() : StopReason::kMaxTokens;
  }
  int generated() const { return generation_ ? generation_->produced() : 0; }
  // The tokens and the one sampled after them and not run (as the page shows them).
  std::vector<int> conversation() const;

  // --- Interventions -------------------------------------------------------------------------
  void SetInterventions(const LabInterventions& iv, MeansOf means);
  // iv as generation and the experiments take it (mean ablation's means over the conversation's
  // prompt, MeansOf::kPrompt, from a plain run of it), then the conversation given back under iv
  // (Conversation::Scope: run again from the first changed block where the cache allows,
  // captured as it was). Returns the first block run again.
  int SetInterventionsOverPrompt(const LabInterventions& iv);
  const Interventions& interventions() const { return conv_.interventions(); }
  int FirstChangedBlock() const { return interventions().FirstChangedBlock(config().n_layer); }
  int Rerun() { return conv_.Rerun(); }
  std::vector<float> HeadMeans() const { return conv_.capture().HeadMeans(); }

  // --- Reading and probes (probes.h) ---------------------------------------------------------
  std::vector<float> FinalProbs(int position) const { return conv_.FinalProbs(position); }
  std::vector<double> LogProbs(int position, const std::vector<int>& ids) {
    return conv_.LogProbs(position, ids);
  }
  std::vector<double> AblatedLogProbs(const std::vector<HeadRef>& heads, int position, int target,
                                      const std::vector<float>& means) {
    return gpt2::AblatedLogProbs(conv_, heads, position, target, means);
  }
  std::vector<double> PatchedLogProbs(int layer, const std::vector<int>& positions,
                                      const std::vector<float>& stream,
                                      const std::vector<int>& ids) {
    return gpt2::PatchedLogProbs(conv_, layer, positions, stream, ids);
  }

  // --- Jobs (job.h): Start, ContinueJob until job_done() or the caller cancels, EndJob ------
  // One at a time: a job started while another runs ends that one first. The graph's too
  // (StartGraph below).
  HeadSweepStart StartHeadSweep(int position, int target, const LabInterventions& iv) {
    return Start<HeadSweepJob>(position, target, saes_.WithEdits(iv))->start();
  }
  PatchingStart StartPatching(const std::vector<int>& clean, const std::vector<int>& corrupted,
                              const LabInterventions& iv) {
    return Start<PatchingJob>(clean, corrupted, saes_.WithEdits(iv))->start();
  }
  PathPatchStart StartPathPatch(const std::vector<int>& clean, const std::vector<int>& corrupted,
                                const std::vector<PathReceiver>& receivers, int target,
                                int contrast, const LabInterventions& iv) {
    return Start<PathPatchSweep>(clean, corrupted, receivers, target, contrast, saes_.WithEdits(iv))
        ->start();
  }
  PathPatchStart StartSenderPaths(const std::vector<int>& clean, const std::vector<int>& corrupted,
                                  HeadRef sender, int target, int contrast,
                                  const LabInterventions& iv) {
    return Start<SenderPathsJob>(clean, corrupted, sender, target, contrast, saes_.WithEdits(iv))
        ->start();
  }
  // The job's next step; returns its progress's done (a cell job: the cells measured so far). A
  // graph job that finishes leaves the Lab its graph and ends.
  int ContinueJob() { return Step().done; }
  bool job_done() const { return !job_ || job_->done(); }
  JobProgress job_progress() const { return job_ ? job_->progress() : JobProgress(); }
  const std::vector<JobCell>& job_results() const;  // a cell job's; none otherwise
  void EndJob();

  // --- Experiments, one call each --------------------------------------------------------------
  PathPatchResult PathPatch(const std::vector<int>& clean, const std::vector<int>& corrupted,
                            HeadRef sender, const std::vector<PathReceiver>& receivers, int target,
                            int contrast) {
    return gpt2::PathPatch(conv_, clean, corrupted, sender, receivers, target, contrast);
  }
  ExperimentResult Experiment(const std::vector<int>& prompt, const LabInterventions& iv,
                              int position, const SamplingParams& sampling, int max_tokens) {
    return gpt2::Experiment(conv_, prompt, saes_.WithEdits(iv), position, sampling, max_tokens);
  }
  Attribution Attribute(const std::vector<int>& ids, int position, int target, int contrast) {
    return gpt2::Attribute(conv_, ids, position, target, contrast);
  }
  Attribution AttributeConversation(const LabInterventions& iv, int position, int target) {
    return gpt2::AttributeConversation(conv_, saes_.WithEdits(iv), position, target);
  }
  SaliencyResult Saliency(const SaliencyRequest& request) { return gpt2::Saliency(conv_, request); }
  AtpResult AttributionPatching(const std::vector<int>& clean, const std::vector<int>& corrupt,
                                int target, int contrast) {
    return gpt2::AttributionPatching(conv_, clean, corrupt, target, contrast);
  }
  ScoreSaliencyResult ScoreSaliency(const ScoreSpec& spec) {
    return gpt2::ScoreSaliency(conv_, spec);
  }
  ExactPatchResult ExactPatch(const std::vector<int>& clean, const std::vector<int>& corrupt,
                              AtpCell cell, int layer, int index, int target, int contrast) {
    return gpt2::ExactPatch(conv_, clean, corrupt, cell, layer, index, target, contrast);
  }

  // --- Sparse autoencoders (features.h) ------------------------------------------------------
  int LoadSae(std::vector<uint8_t> bytes) { return saes_.Load(std::move(bytes), conv_); }
  void DropSae(int id) { saes_.Drop(id); }
  const Sae& sae(int id) const { return *saes_.Find(id).sae; }
  const LoadedSae& loaded_sae(int id) const { return saes_.Find(id); }
  std::vector<SaeInfo> sae_infos() const {  // in load order
    std::vector<SaeInfo> out;
    for (int id : saes_.ids()) out.push_back(InfoOf(saes_.Find(id)));
    return out;
  }
  SaeFeatureList SaeFeatures(int id, int position, int k) {
    return gpt2::SaeFeatures(conv_, saes_.Find(id), position, k);
  }
  std::vector<float> SaeStrip(int id, int feature) {
    return gpt2::SaeStrip(conv_, saes_.Find(id), feature);
  }
  std::vector<SaeLogitWeights> SaeLogitWeightsOf(int id, const std::vector<int>& features,
                                                 int k) const {
    return gpt2::SaeLogitWeightsOf(*model_, sae(id), features, k);
  }
  StreamEdit SaeEdit(const SaeIntervention& s) const { return saes_.Edit(s); }

  // --- Attribution graphs (graph.h): LoadTranscoders, StartGraph, ContinueGraph (or
  // ContinueJob) until its progress is finished (the caller may cancel in between: EndJob), then
  // the graph is held for GraphJsonText (any thresholds), CheckGraph, FeatureCard and GraphQk
  // (qk.h) until the next graph finishes.
  // LoadTranscoders adds the file's blocks to those held (a block held already is replaced), so
  // a set can arrive one block at a time; returns the blocks now held. Loading or dropping drops
  // the graph and a running graph job (they read the old set).
  std::vector<int> LoadTranscoders(std::vector<uint8_t> bytes);
  void DropTranscoders();
  JobProgress StartGraph(const std::vector<int>& prompt, const GraphOptions& options) {
    return Start<GraphJob>(transcoders(), prompt, options)->progress();
  }
  JobProgress ContinueGraph();  // gpt2::Error unless the job running is a graph's
  std::string GraphJsonText(double node_threshold, double edge_threshold, bool prune) const {
    return GraphJson(graph(), SelectGraph(graph(), node_threshold, edge_threshold, prune),
                     *tokenizer_);
  }
  GraphCheck CheckGraph(const std::vector<std::string>& node_ids, float value) {
    return gpt2::CheckGraph(conv_, transcoders(), graph(), GraphFeatureNodes(graph(), node_ids),
                            value);
  }
  // --- Feature dashboards (dashboard_file.h) as the job: StartDashboard; then, while
  // DashboardWantsInput(), FeedDashboard the corpus's next bytes (EndDashboardInput after its
  // last); ContinueJob until finished, with TakeDashboardPiece between calls: the file `gpt2
  // dashboard --json` writes, a piece at a time.
  // The dictionary: request.dictionary "transcoders" (those loaded for graphs) or "sae" (the SAE
  // `sae_id`). gpt2::Error for either missing and as DashboardFileJob's constructor.
  JobProgress StartDashboard(const DashboardRequest& request, int sae_id);
  void FeedDashboard(const std::vector<uint8_t>& bytes);
  void EndDashboardInput() { dashboard_job().EndInput(); }
  bool DashboardWantsInput() { return dashboard_job().wants_input(); }
  bool DashboardInputFull() { return dashboard_job().input_full(); }
  DashboardPiece TakeDashboardPiece() { return dashboard_job().TakePiece(); }

  GraphFeatureCard FeatureCard(int layer, int feature, int k) {
    return FeatureCardOf(conv_, transcoders(), graph().ids, layer, feature, k);
  }
  QkAttribution GraphQk(const ScoreSpec& spec, int k) {
    return QkAttributionOf(conv_, transcoders(), graph().ids, spec, k);
  }

 private:
  const TranscoderSet& transcoders() const;
  const AttributionGraph& graph() const;
  // The one slot's job: the running one ends first (a cell job gives the conversation back).
  template <typename J, typename... Args>
  J* Start(const Args&... args) {
    job_.reset();
    job_ = std::make_unique<J>(conv_, args...);
    return static_cast<J*>(job_.get());
  }
  GraphJob* graph_job() const { return dynamic_cast<GraphJob*>(job_.get()); }
  DashboardFileJob& dashboard_job() const;  // gpt2::Error unless the job running is dashboards
  JobProgress Step();                       // ContinueJob's

  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Conversation conv_;
  SaeSet saes_;
  std::unique_ptr<Sampler> sampler_;  // the by-hand Sample()'s
  std::unique_ptr<Generation> generation_;
  std::shared_ptr<const TranscoderSet> transcoders_;
  std::unique_ptr<Job> job_;  // the running job (a graph job reads transcoders_: freed first)
  std::unique_ptr<AttributionGraph> graph_;  // the last finished graph
};

}  // namespace gpt2
