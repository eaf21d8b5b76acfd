// The text a dashboard reads (issue 50), as the Pile's and OpenWebText's dumps hold it, and its
// windows. Text handling only: the model never sees a document, only the windows' token ids.
//
// Formats, by the file's extension:
//   .txt    documents separated by a line holding only <|endoftext|> (a trailing '\r' allowed).
//           A document is the text of its lines joined by '\n': the newline that ends its last
//           line belongs to the separator (or to the end of the file), not to the document.
//   .jsonl  one JSON object per line with a "text" string (other keys ignored); blank lines are
//           skipped. Strings are unescaped by format/json.h (\uXXXX, surrogate pairs to UTF-8; a
//           lone surrogate is an error); bytes that are not UTF-8 pass through unchanged, and the
//           tokenizer takes them one byte at a time as it takes any such byte.
// Empty documents are dropped. A line longer than kMaxCorpusLine is an error (a binary file given
// by mistake would otherwise be held whole); so is a malformed JSON line, naming its number.
//
// Windows: each document is tokenized (tokenizer.h) and cut into consecutive windows of `context`
// tokens, the last one shorter; they are numbered in order over the corpus from 0. With
// max_tokens, the corpus is its first max_tokens tokens (the window holding the last one cut
// there). A dashboard runs each window as its own sequence [50256] + window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt2 {

class Tokenizer;

enum class CorpusFormat { kText, kJsonLines };

// 64 MiB: far above any document of the dumps, small enough that a wrong file fails fast.
constexpr size_t kMaxCorpusLine = size_t{64} << 20;

// ".txt" or ".jsonl" (any case); gpt2::Error naming both otherwise.
CorpusFormat CorpusFormatOf(const std::string& file_name);

// Documents from a corpus file fed in pieces of any size (the page reads a file or a URL in
// chunks): Feed the bytes as they arrive, Finish at the end. Memory: the current line and, for
// .txt, the current document.
class CorpusReader {
 public:
  // name: how errors call the file ("corpus.jsonl"); max_line: the longest line accepted (the
  // fuzzer lowers it to reach the limit within its inputs).
  CorpusReader(CorpusFormat format, std::string name, size_t max_line = kMaxCorpusLine);
  // Appends to *documents those these bytes complete, in order. gpt2::Error (naming the line)
  // for a malformed line; the reader must not be fed after an error.
  void Feed(const char* data, size_t size, std::vector<std::string>* documents);
  // The end of the file: its last document, if any. Nothing may be fed afterwards.
  void Finish(std::vector<std::string>* documents);
  int64_t lines() const { return line_; }  // lines completed so far

 private:
  // One whole line (without its '\n').
  void Line(const char* text, size_t size, std::vector<std::string>* documents);
  void EndDocument(std::vector<std::string>* documents);

  CorpusFormat format_;
  std::string name_;
  size_t max_line_;
  std::string partial_;         // the current line's bytes so far
  std::string document_;        // .txt: the current document's lines, joined
  bool document_open_ = false;  // .txt: a line of the current document has been read
  int64_t line_ = 0;
  bool finished_ = false;
};

// A whole file's documents.
std::vector<std::string> CorpusDocuments(const std::string& bytes, CorpusFormat format,
                                         const std::string& name);

// The windows of a corpus, its documents added in order.
class CorpusWindows {
 public:
  // context >= 1; max_tokens < 0: no limit.
  CorpusWindows(const Tokenizer& tokenizer, int context, int64_t max_tokens);
  // Tokenizes the document and adds its windows; nothing once full().
  void AddDocument(const std::string& text);
  bool full() const { return max_tokens_ >= 0 && n_tokens() >= max_tokens_; }

  int context() const { return context_; }
  int64_t n_tokens() const { return static_cast<int64_t>(ids_.size()); }
  int64_t size() const { return static_cast<int64_t>(starts_.size()); }  // windows
  // Window w's ids [length(w)].
  const int* ids(int64_t w) const { return ids_.data() + starts_[w]; }
  int length(int64_t w) const {
    const int64_t end = w + 1 < size() ? starts_[w + 1] : n_tokens();
    return static_cast<int>(end - starts_[w]);
  }

 private:
  const Tokenizer& tokenizer_;
  int context_;
  int64_t max_tokens_;
  std::vector<int> ids_;         // every window's ids, in order
  std::vector<int64_t> starts_;  // [windows]: where each begins in ids_
};

}  // namespace gpt2
