#include "lab/lab.h"

#include <map>
#include <string>
#include <utility>

#include "base/error.h"

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

Lab::Lab(LoadedGguf loaded, int n_threads)
    : file_(std::move(loaded.file)),
      model_(std::move(loaded.model)),
      tokenizer_(std::move(loaded.tokenizer)),
      conv_(*model_, n_threads),
      sampler_(std::make_unique<Sampler>(SamplingParams{})) {}

void Lab::SetSampling(const SamplingParams& params) {
  CheckSampling(params);
  sampler_ = std::make_unique<Sampler>(params);
}

int Lab::Sample() {
  if (conv_.logits() == nullptr) throw Error("sample called before prefill");
  return sampler_->Sample(conv_.logits(), config().n_vocab);
}

void Lab::StartGeneration(const std::vector<int>& prompt, const LabInterventions& iv,
                          const SamplingParams& sampling, int max_tokens, bool capture) {
  conv_.CheckPrompt(static_cast<int>(prompt.size()));
  SetSampling(sampling);
  generation_.reset();
  Interventions resolved = conv_.Resolve(saes_.WithEdits(iv), MeansOf::kPrompt, &prompt);
  generation_ = std::make_unique<Generation>(conv_, prompt, std::move(resolved), sampling,
                                             max_tokens, capture);
}

std::vector<int> Lab::conversation() const {
  std::vector<int> ids = conv_.tokens();
  if (conv_.unrun() >= 0) ids.push_back(conv_.unrun());
  return ids;
}

void Lab::SetInterventions(const LabInterventions& iv, MeansOf means) {
  conv_.SetInterventions(conv_.Resolve(saes_.WithEdits(iv), means));
}

int Lab::SetInterventionsOverPrompt(const LabInterventions& iv) {
  Conversation::Scope scope(conv_);  // the means run the prompt in between
  scope.RestoreUnder(conv_.Resolve(saes_.WithEdits(iv), MeansOf::kPrompt));
  return scope.End();
}

JobProgress Lab::Step() {
  if (!job_) throw Error("No job is running.");
  job_->Continue();
  const JobProgress progress = job_->progress();
  if (progress.finished) {
    if (GraphJob* job = graph_job()) {
      graph_ = std::make_unique<AttributionGraph>(job->Finish());
      job_.reset();
    }
  }
  return progress;
}

JobProgress Lab::ContinueGraph() {
  if (graph_job() == nullptr) throw Error("No graph is being computed.");
  return Step();
}

JobProgress Lab::StartDashboard(const DashboardRequest& request, int sae_id) {
  std::map<int, const Sae*> have;
  if (request.dictionary == "transcoders") {
    for (int l : transcoders().blocks()) have[l] = transcoders().block(l);
  } else if (request.dictionary == "sae") {
    const Sae& s = sae(sae_id);
    have[s.config().layer] = &s;
  } else {
    throw Error("A dashboard's dictionary is \"transcoders\" or \"sae\", not \"" +
                request.dictionary + "\".");
  }
  std::vector<DashboardBlock> blocks =
      SelectDashboardBlocks(have, request.blocks, request.features);
  return Start<DashboardFileJob>(*tokenizer_, std::move(blocks), request)->progress();
}

DashboardFileJob& Lab::dashboard_job() const {
  auto* job = dynamic_cast<DashboardFileJob*>(job_.get());
  if (job == nullptr) throw Error("No dashboards are being computed.");
  return *job;
}

void Lab::FeedDashboard(const std::vector<uint8_t>& bytes) {
  dashboard_job().Feed(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

const std::vector<JobCell>& Lab::job_results() const {
  static const std::vector<JobCell> kNone;
  const CellJob* job = dynamic_cast<const CellJob*>(job_.get());
  return job != nullptr ? job->results() : kNone;
}

void Lab::EndJob() {
  if (!job_) return;
  std::unique_ptr<Job> job = std::move(job_);
  job->End();
}

std::vector<int> Lab::LoadTranscoders(std::vector<uint8_t> bytes) {
  std::shared_ptr<const TranscoderSet> set =
      TranscodersFromBytes(std::move(bytes), model_->config());
  if (transcoders_) set = std::make_shared<const TranscoderSet>(*transcoders_, *set);
  if (graph_job() != nullptr) job_.reset();
  graph_.reset();
  transcoders_ = std::move(set);
  return transcoders_->blocks();
}

void Lab::DropTranscoders() {
  if (graph_job() != nullptr) job_.reset();
  graph_.reset();
  transcoders_.reset();
}

const TranscoderSet& Lab::transcoders() const {
  if (!transcoders_)
    throw Error("Load transcoders first (a GGUF from gpt2-convert --transcoders).");
  return *transcoders_;
}

const AttributionGraph& Lab::graph() const {
  if (!graph_) throw Error("Compute a graph first.");
  return *graph_;
}

}  // namespace gpt2
