// Streaming decoded tokens as text: a GPT-2 token can end in the middle of a UTF-8 character
// (emoji and CJK are often split across tokens), so text is released only up to the last
// complete character and the tail waits for the next token.
#pragma once

#include <string>

namespace gpt2 {

class Utf8Stream {
 public:
  // Appends bytes and returns what can be shown now.
  std::string Push(const std::string& bytes) {
    pending_ += bytes;
    const size_t n = CompletePrefix(pending_);
    std::string out = pending_.substr(0, n);
    pending_.erase(0, n);
    return out;
  }
  // Whatever is left at the end (possibly invalid UTF-8, shown as is).
  std::string Flush() {
    std::string out;
    out.swap(pending_);
    return out;
  }

  // Length of the longest prefix that does not end inside an unfinished multi-byte sequence.
  // Invalid bytes count as complete (they will never be finished), so nothing is held forever.
  static size_t CompletePrefix(const std::string& s) {
    const size_t n = s.size();
    // Look back at most 3 bytes for the lead byte of a trailing, unfinished sequence.
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
      const unsigned char c = static_cast<unsigned char>(s[n - back]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
      size_t need = 0;
      if ((c & 0xE0) == 0xC0)
        need = 2;
      else if ((c & 0xF0) == 0xE0)
        need = 3;
      else if ((c & 0xF8) == 0xF0)
        need = 4;
      return (need > back) ? n - back : n;
    }
    return n;
  }

 private:
  std::string pending_;
};

}  // namespace gpt2
