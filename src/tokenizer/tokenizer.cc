// GPT-2 byte-level BPE. References: openai/gpt-2 src/encoder.py (byte alphabet, pattern, BPE)
// and openai/tiktoken src/lib.rs (byte_pair_merge: whole-piece lookup, lowest rank first,
// leftmost on ties), whose "gpt2" encoding is the golden for the tests.
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <queue>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "base/text.h"
#include "format/json.h"

namespace gpt2 {
namespace {

struct CodepointRange {
  uint32_t first, last;
};
#include "tokenizer/unicode_tables.inc"

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

template <size_t N>
bool InRanges(const CodepointRange (&ranges)[N], uint32_t cp) {
  // First range whose last >= cp, by binary search.
  size_t lo = 0, hi = N;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (ranges[mid].last < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < N && ranges[lo].first <= cp;
}

CharClass ClassifyCodepoint(uint32_t cp) {
  if (InRanges(kLetterRanges, cp)) return CharClass::kLetter;
  if (InRanges(kNumberRanges, cp)) return CharClass::kNumber;
  if (InRanges(kWhiteSpaceRanges, cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

// ASCII classes, computed once from the same tables (most text is ASCII).
struct AsciiClasses {
  CharClass cls[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c) cls[c] = ClassifyCodepoint(c);
  }
};
const AsciiClasses& Ascii() {
  static const AsciiClasses table;
  return table;
}

// One character of the text: its length in bytes and class. Invalid UTF-8 (a bad lead byte, a
// missing or wrong continuation, an overlong form, a surrogate, > U+10FFFF) is one byte of class
// kOther, so every byte string splits into pieces and round-trips.
struct Char {
  uint32_t cp;
  uint32_t size;
  CharClass cls;
};

constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFFu;

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// One UTF-8 character at s (n > 0 bytes left): its code point (kInvalidCodepoint for an
// ill-formed sequence, which then counts as its first byte alone) and size.
struct Codepoint {
  uint32_t cp;
  uint32_t size;
};
Codepoint DecodeCodepoint(const unsigned char* s, size_t n) {
  const unsigned char c0 = s[0];
  if (c0 < 0x80) return {c0, 1};
  uint32_t cp = kInvalidCodepoint;
  uint32_t size = 1;
  // Well-formed sequences, Unicode Table 3-7.
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    if (n >= 2 && IsContinuation(s[1])) {
      cp = ((c0 & 0x1Fu) << 6) | (s[1] & 0x3Fu);
      size = 2;
    }
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    const unsigned char lo = c0 == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = c0 == 0xED ? 0x9F : 0xBF;
    if (n >= 3 && s[1] >= lo && s[1] <= hi && IsContinuation(s[2])) {
      cp = ((c0 & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
      size = 3;
    }
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    const unsigned char lo = c0 == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c0 == 0xF4 ? 0x8F : 0xBF;
    if (n >= 4 && s[1] >= lo && s[1] <= hi && IsContinuation(s[2]) && IsContinuation(s[3])) {
      cp = ((c0 & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
      size = 4;
    }
  }
  return {cp, cp == kInvalidCodepoint ? 1 : size};
}

Char DecodeChar(const unsigned char* s, size_t n) {
  if (s[0] < 0x80) return {s[0], 1, Ascii().cls[s[0]]};
  const Codepoint c = DecodeCodepoint(s, n);
  return {c.cp, c.size, c.cp == kInvalidCodepoint ? CharClass::kOther : ClassifyCodepoint(c.cp)};
}

// The length in bytes of the pre-tokenizer piece starting at text[pos] (pos < n): the first
// alternative of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// that matches there, as a backtracking regex engine picks it.
size_t PieceLength(const unsigned char* text, size_t n, size_t pos) {
  const unsigned char* s = text + pos;
  const size_t left = n - pos;
  // Contractions: ASCII apostrophe and lowercase letters only, whatever follows.
  if (s[0] == '\'' && left >= 2) {
    const unsigned char c1 = s[1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (left >= 3) {
      const unsigned char c2 = s[2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
        return 3;
      }
    }
  }
  const Char first = DecodeChar(s, left);
  // " ?X+" for X in letters, numbers, others: an optional U+0020, then a run of one class.
  size_t run_start = 0;
  CharClass run_class = first.cls;
  if (s[0] == ' ' && left >= 2) {
    const Char next = DecodeChar(s + 1, left - 1);
    if (next.cls != CharClass::kSpace) {
      run_start = 1;
      run_class = next.cls;
    }
  }
  if (run_class != CharClass::kSpace) {
    size_t end = run_start;
    while (end < left) {
      const Char c = DecodeChar(s + end, left - end);
      if (c.cls != run_class) break;
      end += c.size;
    }
    return end;
  }
  // Whitespace run. "\s+(?!\S)": at the end of the text, the whole run; before a non-space, the
  // run minus its last character (which then leads the next piece, e.g. " word"), if that
  // leaves anything. Otherwise "\s+": the whole run (a single whitespace character).
  size_t end = 0;
  size_t last_start = 0;
  while (end < left) {
    const Char c = DecodeChar(s + end, left - end);
    if (c.cls != CharClass::kSpace) break;
    last_start = end;
    end += c.size;
  }
  if (end < left && last_start > 0) return last_start;
  return end;
}

// encoder.py bytes_to_unicode(): printable bytes map to themselves, the others (control, space,
// 0x7F-0xA0, 0xAD) to U+0100 upwards in byte order, so every token is printable text.
struct ByteAlphabet {
  static constexpr uint32_t kCodepoints = 256 + 68;  // 68 bytes are moved up past U+00FF
  uint32_t codepoint_of_byte[256];
  int byte_of_codepoint[kCodepoints];  // -1: not in the alphabet
  ByteAlphabet() {
    for (int& b : byte_of_codepoint) b = -1;
    bool printable[256] = {};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      codepoint_of_byte[b] = printable[b] ? static_cast<uint32_t>(b) : next++;
      byte_of_codepoint[codepoint_of_byte[b]] = b;
    }
  }
};
const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// Appends the raw bytes of token[0, size), written in the byte alphabet, to *bytes. Characters
// outside the alphabet (added tokens in some vocabularies) are kept as their own UTF-8, and
// invalid UTF-8 byte by byte.
void AppendAlphabetBytes(const char* token, size_t size, std::string* bytes) {
  const ByteAlphabet& alphabet = Alphabet();
  const unsigned char* s = reinterpret_cast<const unsigned char*>(token);
  size_t pos = 0;
  while (pos < size) {
    // Code points only: classifying them (DecodeChar) is what the pre-tokenizer needs, and for
    // the byte alphabet's U+0100.. letters it is most of this loop's time.
    const Codepoint c = DecodeCodepoint(s + pos, size - pos);
    const int byte = c.cp < ByteAlphabet::kCodepoints ? alphabet.byte_of_codepoint[c.cp] : -1;
    if (byte >= 0) {
      bytes->push_back(static_cast<char>(byte));
    } else {
      bytes->append(token + pos, c.size);
    }
    pos += c.size;
  }
}

std::string AlphabetToBytes(const std::string& token) {
  std::string bytes;
  AppendAlphabetBytes(token.data(), token.size(), &bytes);
  return bytes;
}

std::string BytesToAlphabet(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) AppendUtf8(Alphabet().codepoint_of_byte[b], &out);
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::vector<std::string> tokens, std::vector<std::string> merges)
    : tokens_(std::move(tokens)), merges_(std::move(merges)) {
  token_bytes_.reserve(tokens_.size());
  ids_by_bytes_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    token_bytes_.push_back(AlphabetToBytes(tokens_[id]));
    ids_by_bytes_.emplace(token_bytes_.back(), static_cast<int>(id));  // first id wins
  }
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    auto it = ids_by_bytes_.find(byte);
    if (it == ids_by_bytes_.end()) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw Error("tokenizer vocabulary has no token for byte " + std::string(hex) + " ('" +
                  BytesToAlphabet(byte) +
                  "' in the byte alphabet); a byte-level BPE vocabulary needs all 256");
    }
    byte_ids_[b] = it->second;
  }
  merge_rank_.assign(tokens_.size(), -1);
  // One buffer for every merge's result: GPT-2 has 50000 merges, and a string or two per merge
  // made this loop most of a model's load time in wasm.
  std::string merged;
  for (size_t i = 0; i < merges_.size(); ++i) {
    const std::string& line = merges_[i];
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      throw Error("tokenizer merge " + std::to_string(i) + " '" + line +
                  "' is not two tokens separated by one space");
    }
    merged.clear();
    AppendAlphabetBytes(line.data(), space, &merged);
    AppendAlphabetBytes(line.data() + space + 1, line.size() - space - 1, &merged);
    auto it = ids_by_bytes_.find(merged);
    if (it == ids_by_bytes_.end()) {
      throw Error("tokenizer merge " + std::to_string(i) + " '" + line + "' makes '" +
                  BytesToAlphabet(merged) + "', which is not in the vocabulary");
    }
    if (merge_rank_[it->second] < 0) merge_rank_[it->second] = static_cast<int>(i);
  }
}

std::unique_ptr<Tokenizer> Tokenizer::FromFiles(const std::string& encoder_json_path,
                                                const std::string& merges_path) {
  const std::string json = ReadWholeFile(encoder_json_path, "encoder JSON");
  return FromText(json, ReadWholeFile(merges_path, "BPE merges file"), encoder_json_path);
}

std::unique_ptr<Tokenizer> Tokenizer::FromText(const std::string& json, const std::string& text,
                                               const std::string& encoder_json_path) {
  const JsonValue root = ParseJson(json, "encoder JSON '" + encoder_json_path + "'");
  if (root.kind != JsonValue::Kind::kObject) {
    throw Error("encoder JSON '" + encoder_json_path +
                "' is not an object mapping token strings to ids, like GPT-2's encoder.json");
  }
  std::vector<std::pair<std::string, int64_t>> entries;
  for (const auto& kv : root.object) {
    if (!kv.second.is_integer || kv.second.integer < 0) {
      throw Error("encoder JSON '" + encoder_json_path + "': token '" + kv.first +
                  "' does not map to a non-negative integer id");
    }
    entries.emplace_back(kv.first, kv.second.integer);
  }
  if (entries.empty()) throw Error("encoder JSON '" + encoder_json_path + "' has no tokens");
  // Ids must be 0..n-1, each used once.
  std::vector<std::string> tokens(entries.size());
  std::vector<bool> seen(entries.size(), false);
  for (auto& entry : entries) {
    const int64_t id = entry.second;
    if (id >= static_cast<int64_t>(entries.size())) {
      throw Error("encoder JSON '" + encoder_json_path + "': token '" + entry.first + "' has id " +
                  std::to_string(id) + ", but there are only " + std::to_string(entries.size()) +
                  " tokens (ids must be 0..n-1)");
    }
    if (seen[id]) {
      throw Error("encoder JSON '" + encoder_json_path + "': id " + std::to_string(id) +
                  " is used twice");
    }
    seen[id] = true;
    tokens[id] = std::move(entry.first);
  }

  std::vector<std::string> merges;
  size_t pos = 0;
  bool first_line = true;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // OpenAI's vocab.bpe and Hugging Face's merges.txt start with "#version: 0.2".
    if (first_line && line.rfind("#version", 0) == 0) {
      first_line = false;
      continue;
    }
    first_line = false;
    if (line.empty()) continue;
    merges.push_back(std::move(line));
  }
  return std::make_unique<Tokenizer>(std::move(tokens), std::move(merges));
}

int Tokenizer::MergeRank(const char* bytes, size_t size, int* id) const {
  auto it = ids_by_bytes_.find(std::string(bytes, size));
  if (it == ids_by_bytes_.end()) return -1;
  *id = it->second;
  return merge_rank_[it->second];
}

void Tokenizer::EncodePiece(const char* piece, size_t size, std::vector<int>* ids) const {
  if (size == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  // tiktoken: a piece that is a token is taken whole, before any merging.
  int whole_id = -1;
  if (MergeRank(piece, size, &whole_id) >= 0) {
    ids->push_back(whole_id);
    return;
  }
  // BPE over the piece's bytes split into parts, as tiktoken's byte_pair_merge: repeatedly merge
  // the adjacent pair whose concatenation is the lowest-ranked token, leftmost on ties. (Any
  // pair whose concatenation is a merge result qualifies, not only the pair its merge line
  // names; for GPT-2's vocabulary rank order is id order, so this is tiktoken exactly.) A heap
  // ordered by (rank, position) makes it O(n log n) instead of O(n^2) for long pieces; an entry
  // goes stale once either of its parts has changed, and is skipped.
  struct Candidate {
    int rank;
    int left;       // start of the left part
    int right;      // start of the right part
    int right_end;  // end of the right part
    int merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const int n = static_cast<int>(size);
  // Parts are indexed by their first byte; next[i] is where part i ends (the next part starts),
  // or -1 once part i has been merged into its left neighbour.
  std::vector<int> next(n), prev(n), id(n);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i - 1;
    id[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int left) {
    const int right = next[left];
    if (right >= n) return;
    const int right_end = next[right];
    int merged_id = -1;
    const int rank = MergeRank(piece + left, static_cast<size_t>(right_end - left), &merged_id);
    if (rank >= 0) heap.push(Candidate{rank, left, right, right_end, merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (next[c.left] != c.right || next[c.right] != c.right_end) continue;  // stale
    id[c.left] = c.merged_id;
    next[c.left] = c.right_end;
    next[c.right] = -1;
    if (c.right_end < n) prev[c.right_end] = c.left;
    if (prev[c.left] >= 0) push(prev[c.left]);
    push(c.left);
  }
  for (int i = 0; i < n; i = next[i]) ids->push_back(id[i]);
}

std::vector<int> Tokenizer::Encode(const std::string& text) const {
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 1);
  const unsigned char* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = PieceLength(s, text.size(), pos);
    EncodePiece(text.data() + pos, length, &ids);
    pos += length;
  }
  return ids;
}

std::string Tokenizer::TokenBytes(int id) const {
  if (id < 0 || id >= vocab_size()) return std::string();
  return token_bytes_[id];
}

std::string Tokenizer::Decode(const std::vector<int>& ids) const {
  std::string out;
  for (int id : ids) {
    if (id >= 0 && id < vocab_size()) out += token_bytes_[id];
  }
  return out;
}

}  // namespace gpt2
