// Corpora and their windows (lab/corpus.h).
#include "lab/corpus.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "format/json.h"
#include "tokenizer/tokenizer.h"

namespace gpt2 {

namespace {

bool EndsWithLower(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char c = s[s.size() - suffix.size() + i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

constexpr char kSeparator[] = "<|endoftext|>";

bool IsSeparator(const char* text, size_t size) {
  const size_t n = sizeof(kSeparator) - 1;
  if (size == n + 1 && text[n] == '\r') size = n;
  return size == n && std::memcmp(text, kSeparator, n) == 0;
}

bool IsBlank(const char* text, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return false;
  }
  return true;
}

}  // namespace

CorpusFormat CorpusFormatOf(const std::string& file_name) {
  if (EndsWithLower(file_name, ".txt")) return CorpusFormat::kText;
  if (EndsWithLower(file_name, ".jsonl")) return CorpusFormat::kJsonLines;
  throw Error("the corpus '" + file_name +
              "' must be a .txt file (documents separated by <|endoftext|> lines) or a .jsonl "
              "file (one {\"text\": ...} object per line)");
}

CorpusReader::CorpusReader(CorpusFormat format, std::string name, size_t max_line)
    : format_(format), name_(std::move(name)), max_line_(max_line) {}

void CorpusReader::Feed(const char* data, size_t size, std::vector<std::string>* documents) {
  if (finished_) throw Error(name_ + ": read past its end");
  const char* end = data + size;
  while (data < end) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', end - data));
    const char* stop = newline != nullptr ? newline : end;
    if (partial_.size() + (stop - data) > max_line_) {
      throw Error(name_ + ": line " + std::to_string(line_ + 1) + " is longer than " +
                  (max_line_ >= (size_t{1} << 20) ? std::to_string(max_line_ >> 20) + " MiB"
                                                  : std::to_string(max_line_) + " bytes"));
    }
    if (newline == nullptr) {
      partial_.append(data, stop);
      return;
    }
    if (partial_.empty()) {
      Line(data, stop - data, documents);
    } else {
      partial_.append(data, stop);
      Line(partial_.data(), partial_.size(), documents);
      partial_.clear();
    }
    data = newline + 1;
  }
}

void CorpusReader::Finish(std::vector<std::string>* documents) {
  if (finished_) return;
  if (!partial_.empty()) {
    Line(partial_.data(), partial_.size(), documents);
    partial_.clear();
  }
  if (format_ == CorpusFormat::kText) EndDocument(documents);
  finished_ = true;
}

void CorpusReader::Line(const char* text, size_t size, std::vector<std::string>* documents) {
  ++line_;
  if (format_ == CorpusFormat::kText) {
    if (IsSeparator(text, size)) {
      EndDocument(documents);
      return;
    }
    if (document_open_) document_.push_back('\n');
    document_.append(text, size);
    document_open_ = true;
    return;
  }
  if (IsBlank(text, size)) return;
  const std::string where = name_ + " line " + std::to_string(line_);
  const JsonValue v = ParseJson(text, size, where);
  if (v.kind != JsonValue::Kind::kObject) throw Error(where + ": not a JSON object");
  const JsonValue* t = v.Find("text");
  if (t == nullptr || t->kind != JsonValue::Kind::kString)
    throw Error(where + ": the object has no \"text\" string");
  if (!t->str.empty()) documents->push_back(t->str);
}

void CorpusReader::EndDocument(std::vector<std::string>* documents) {
  if (!document_.empty()) documents->push_back(std::move(document_));
  document_.clear();
  document_open_ = false;
}

std::vector<std::string> CorpusDocuments(const std::string& bytes, CorpusFormat format,
                                         const std::string& name) {
  CorpusReader reader(format, name);
  std::vector<std::string> documents;
  reader.Feed(bytes.data(), bytes.size(), &documents);
  reader.Finish(&documents);
  return documents;
}

CorpusWindows::CorpusWindows(const Tokenizer& tokenizer, int context, int64_t max_tokens)
    : tokenizer_(tokenizer), context_(context), max_tokens_(max_tokens) {
  if (context < 1) throw Error("a window holds at least one token");
}

void CorpusWindows::AddDocument(const std::string& text) {
  if (full()) return;
  std::vector<int> ids = tokenizer_.Encode(text);
  if (max_tokens_ >= 0) {
    const int64_t room = max_tokens_ - n_tokens();
    if (static_cast<int64_t>(ids.size()) > room) ids.resize(static_cast<size_t>(room));
  }
  for (size_t begin = 0; begin < ids.size(); begin += context_) {
    starts_.push_back(n_tokens() + static_cast<int64_t>(begin));
  }
  // starts_ above are offsets into ids_ as it will be once this document is appended.
  ids_.insert(ids_.end(), ids.begin(), ids.end());
}

}  // namespace gpt2
