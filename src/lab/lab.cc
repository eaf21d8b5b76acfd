#include "lab/lab.h"

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
  generation_ = std::make_unique<Generation>(conv_, prompt, std::move(resolved), sampling, max_tokens, capture);
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

int Lab::ContinueJob() {
  if (!job_) throw Error("No job is running.");
  return job_->Continue();
}

const std::vector<JobCell>& Lab::job_results() const {
  static const std::vector<JobCell> kNone;
  return job_ ? job_->results() : kNone;
}

void Lab::EndJob() {
  if (!job_) return;
  std::unique_ptr<Job> job = std::move(job_);
  job->End();
}

std::vector<int> Lab::LoadTranscoders(std::vector<uint8_t> bytes) {
  std::shared_ptr<const TranscoderSet> set = TranscodersFromBytes(std::move(bytes), model_->config());
  if (transcoders_) set = std::make_shared<const TranscoderSet>(*transcoders_, *set);
  graph_job_.reset();
  graph_.reset();
  transcoders_ = std::move(set);
  return transcoders_->blocks();
}

void Lab::DropTranscoders() {
  graph_job_.reset();
  graph_.reset();
  transcoders_.reset();
}

const TranscoderSet& Lab::transcoders() const {
  if (!transcoders_) throw Error("Load transcoders first (a GGUF from gpt2-convert --transcoders).");
  return *transcoders_;
}

const AttributionGraph& Lab::graph() const {
  if (!graph_) throw Error("Compute a graph first.");
  return *graph_;
}

GraphProgress Lab::StartGraph(const std::vector<int>& prompt, const GraphOptions& options) {
  graph_job_.reset();
  graph_job_ = std::make_unique<GraphJob>(conv_, transcoders(), prompt, options);
  return graph_job_->progress();
}

GraphProgress Lab::ContinueGraph() {
  if (!graph_job_) throw Error("No graph is being computed.");
  const GraphProgress progress = graph_job_->Continue();
  if (graph_job_->done()) {
    graph_ = std::make_unique<AttributionGraph>(graph_job_->Finish());
    graph_job_.reset();
  }
  return progress;
}

}  // namespace gpt2
