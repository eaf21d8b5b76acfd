#include "lab/dashboard_file.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace gpt2 {

std::vector<DashboardBlock> SelectDashboardBlocks(
    const std::map<int, const Sae*>& have, std::vector<int> blocks,
    const std::vector<std::pair<int, int>>& features) {
  if (have.empty()) throw Error("the dictionary has no block");
  const bool named_blocks = !blocks.empty();
  for (int l : blocks) {
    if (!have.count(l)) throw Error("the dictionary has no block " + std::to_string(l));
  }
  if (!named_blocks) {
    for (const auto& kv : have) blocks.push_back(kv.first);
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<DashboardBlock> out;
  if (features.empty()) {
    for (int l : blocks) out.push_back(DashboardBlock{have.at(l), {}});
    return out;
  }
  std::map<int, std::vector<int>> chosen;
  for (const auto& [l, f] : features) {
    const std::string name = std::to_string(l) + "_" + std::to_string(f);
    if (std::find(blocks.begin(), blocks.end(), l) == blocks.end()) {
      throw Error("feature " + name + " is in block " + std::to_string(l) + ", which " +
                  (named_blocks ? "the blocks asked for leave out" : "the dictionary lacks"));
    }
    try {
      have.at(l)->CheckFeature(f);
    } catch (const Error& e) {
      throw Error("feature " + name + ": " + e.what());
    }
    chosen[l].push_back(f);
  }
  for (const auto& kv : chosen) out.push_back(DashboardBlock{have.at(kv.first), kv.second});
  return out;
}

DashboardFileJob::DashboardFileJob(Conversation& c, const Tokenizer& tokenizer,
                                   std::vector<DashboardBlock> blocks,
                                   const DashboardRequest& request)
    : scope_(c), tokenizer_(tokenizer), request_(request) {
  job_ = std::make_unique<DashboardJob>(c.UnrecordedSession(), tokenizer, std::move(blocks),
                                        request.options, CorpusFormatOf(request.corpus),
                                        request.corpus);
}

bool DashboardFileJob::wants_input() const {
  const JobProgress p = job_->progress();
  return !p.finished && std::strcmp(p.phase, "windows") == 0 && p.done >= p.total;
}

void DashboardFileJob::Continue() {
  job_->Continue();
  if (std::strcmp(job_->progress().phase, "windows") == 0) return;
  if (!writer_) {
    DashboardMetadata m;
    m.model = request_.model;
    m.dictionary = request_.dictionary;
    m.corpus = request_.corpus;
    m.context = request_.options.context;
    m.n_windows = job_->n_windows();
    m.n_tokens = job_->n_tokens();
    writer_ = std::make_unique<DashboardJsonWriter>(text_, m, tokenizer_);
  }
  for (const FeatureDashboard& f : job_->TakeFeatures()) writer_->Feature(f);
  if (job_->done()) writer_->End();
}

std::string DashboardFileJob::Text() const {
  if (!job_->done()) throw Error("The dashboards are not finished yet.");
  return text_.str();
}

}  // namespace gpt2
