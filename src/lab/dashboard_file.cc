#include "lab/dashboard_file.h"

#include <cstring>

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
  for (const FeatureDashboard& f : job_->TakeFeatures()) {
    const int64_t at = taken_ + static_cast<int64_t>(text_.tellp());
    const int separator = writer_->Feature(f);
    piece_.layers.push_back(f.layer);
    piece_.indices.push_back(f.index);
    piece_.max_acts.push_back(f.max);
    piece_.begins.push_back(static_cast<double>(at + separator));
    piece_.ends.push_back(static_cast<double>(taken_ + static_cast<int64_t>(text_.tellp())));
  }
  if (job_->done()) writer_->End();
}

DashboardPiece DashboardFileJob::TakePiece() {
  DashboardPiece piece = std::move(piece_);
  piece_ = DashboardPiece();
  piece.text = text_.str();
  taken_ += static_cast<int64_t>(piece.text.size());
  text_.str(std::string());
  return piece;
}

}  // namespace gpt2
