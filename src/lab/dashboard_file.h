// Feature dashboards as the page's job (lab.h): DashboardJob (dashboard.h) run on the
// conversation's session and giving the conversation back at its end (its Scope), over the Lab's
// dictionary, its features written as they finish into the file's text (dashboard_json.h), the
// same text `gpt2 dashboard --json` writes, which the worker takes a piece at a time as features
// finish (every block's text passes what one JS string, or the module's memory, holds) and hands
// to the page as one file, with where each feature's object lies in it.
#pragma once

#include <cstddef>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lab/conversation.h"
#include "lab/dashboard.h"
#include "lab/dashboard_json.h"
#include "lab/job.h"

namespace gpt2 {

// What the page asks for: the corpus's name (its extension picks the format, corpus.h), the
// blocks and features (dashboard.h SelectDashboardBlocks), the options, and what the file's
// metadata names the model and the dictionary.
struct DashboardRequest {
  std::string corpus, model, dictionary;
  std::vector<int> blocks;
  std::vector<std::pair<int, int>> features;  // (layer, feature)
  DashboardOptions options;
};

// The file's text written since the last take, and the features whose objects it finishes: for
// each, its block, number, maxActApprox and its object's bytes [begin, end) in the whole file.
struct DashboardPiece {
  std::string text;
  std::vector<int> layers, indices;
  std::vector<float> max_acts;
  std::vector<double> begins, ends;  // past 4 GB of text too
};

class DashboardFileJob : public Job {
 public:
  // gpt2::Error as DashboardJob's constructor, or for a corpus name that is not .txt or .jsonl.
  DashboardFileJob(Conversation& c, const Tokenizer& tokenizer, std::vector<DashboardBlock> blocks,
                   const DashboardRequest& request);
  // The corpus's bytes as they arrive, then EndInput (dashboard.h).
  void Feed(const char* data, size_t size) { job_->Feed(data, size); }
  void EndInput() { job_->EndInput(); }
  // Whether the windows read so far have all run: the worker feeds more then.
  bool wants_input() const;
  // Whether the corpus's first max_tokens tokens are in: the rest need not be read.
  bool input_full() const { return job_->input_full(); }
  void Continue() override;
  JobProgress progress() const override { return job_->progress(); }
  // What was written since the last take (the metadata with the first features' piece, the
  // file's end with the last one); may be taken at any time.
  DashboardPiece TakePiece();
  int64_t n_windows() const { return job_->n_windows(); }
  int64_t n_tokens() const { return job_->n_tokens(); }
  void End() override { scope_.End(); }
  void Dismiss() override { scope_.Dismiss(); }

 private:
  Conversation::Scope scope_;
  const Tokenizer& tokenizer_;
  DashboardRequest request_;
  std::unique_ptr<DashboardJob> job_;
  std::ostringstream text_;                      // the text not yet taken
  int64_t taken_ = 0;                            // the bytes before it
  DashboardPiece piece_;                         // its features
  std::unique_ptr<DashboardJsonWriter> writer_;  // once the windows have run
};

}  // namespace gpt2
