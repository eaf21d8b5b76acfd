#include "lab/dashboard_file.h"

#include <cstring>

#include "base/error.h"

namespace gpt2 {

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
