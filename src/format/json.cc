#include "format/json.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "base/error.h"
#include "base/text.h"

namespace gpt2 {

const JsonValue* JsonValue::Find(const std::string& key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const auto& kv : object) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const char* text, size_t size, const std::string& what)
      : p_(text), begin_(text), end_(text + size), what_(what) {}

  JsonValue ParseDocument() {
    JsonValue v = ParseValue(0);
    SkipSpace();
    if (p_ != end_) Fail("unexpected data after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw Error(what_ + ": invalid JSON at byte " + std::to_string(p_ - begin_) + ": " + why);
  }

  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  bool Consume(const char* literal) {
    const char* q = p_;
    for (const char* l = literal; *l; ++l, ++q) {
      if (q == end_ || *q != *l) return false;
    }
    p_ = q;
    return true;
  }

  JsonValue ParseValue(int depth) {
    if (depth > kMaxDepth) Fail("nesting deeper than 64 levels");
    SkipSpace();
    if (p_ == end_) Fail("unexpected end of input");
    JsonValue v;
    switch (*p_) {
      case '{':
        ParseObject(&v, depth);
        return v;
      case '[':
        ParseArray(&v, depth);
        return v;
      case '"':
        v.kind = JsonValue::Kind::kString;
        v.str = ParseString();
        return v;
      case 't':
        if (!Consume("true")) Fail("expected 'true'");
        v.kind = JsonValue::Kind::kBool;
        v.boolean = true;
        return v;
      case 'f':
        if (!Consume("false")) Fail("expected 'false'");
        v.kind = JsonValue::Kind::kBool;
        return v;
      case 'n':
        if (!Consume("null")) Fail("expected 'null'");
        return v;
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
          ParseNumber(&v);
          return v;
        }
        Fail(std::string("unexpected character '") + *p_ + "'");
    }
  }

  void ParseObject(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kObject;
    ++p_;  // '{'
    std::unordered_set<std::string> keys;
    SkipSpace();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return;
    }
    for (;;) {
      SkipSpace();
      if (p_ == end_ || *p_ != '"') Fail("expected a string key");
      std::string key = ParseString();
      if (!keys.insert(key).second) Fail("duplicate key \"" + key + "\"");
      SkipSpace();
      if (p_ == end_ || *p_ != ':') Fail("expected ':'");
      ++p_;
      JsonValue item = ParseValue(depth + 1);
      v->object.emplace_back(std::move(key), std::move(item));
      SkipSpace();
      if (p_ == end_) Fail("unterminated object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return;
      }
      Fail("expected ',' or '}'");
    }
  }

  void ParseArray(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kArray;
    ++p_;  // '['
    SkipSpace();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return;
    }
    for (;;) {
      v->array.push_back(ParseValue(depth + 1));
      SkipSpace();
      if (p_ == end_) Fail("unterminated array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return;
      }
      Fail("expected ',' or ']'");
    }
  }

  unsigned ParseHex4() {
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      if (p_ == end_) Fail("truncated \\u escape");
      char c = *p_++;
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= c - '0';
      else if (c >= 'a' && c <= 'f')
        u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        u |= c - 'A' + 10;
      else
        Fail("bad hex digit in \\u escape");
    }
    return u;
  }

  std::string ParseString() {
    ++p_;  // opening quote
    std::string out;
    for (;;) {
      if (p_ == end_) Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(*p_++);
      if (c == '"') return out;
      if (c < 0x20) Fail("control character in string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      if (p_ == end_) Fail("unterminated escape");
      char e = *p_++;
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = ParseHex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            // A high surrogate must be followed by an escaped low surrogate.
            if (!Consume("\\u")) Fail("unpaired surrogate in \\u escape");
            uint32_t lo = ParseHex4();
            if (lo < 0xDC00 || lo >= 0xE000) Fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            Fail("unpaired surrogate in \\u escape");
          }
          AppendUtf8(cp, &out);
          break;
        }
        default:
          Fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  void ParseNumber(JsonValue* v) {
    const char* start = p_;
    bool integer = true;
    if (*p_ == '-') ++p_;
    if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) Fail("bad number");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) Fail("bad number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !(*p_ >= '0' && *p_ <= '9')) Fail("bad number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    // strtod/strtoll need a terminated string; numbers are short.
    std::string text(start, p_);
    v->kind = JsonValue::Kind::kNumber;
    v->number = std::strtod(text.c_str(), nullptr);
    if (integer) {
      errno = 0;
      long long i = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        v->is_integer = true;
        v->integer = i;
      }
    }
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  const std::string& what_;
};

}  // namespace

JsonValue ParseJson(const char* text, size_t size, const std::string& what) {
  return Parser(text, size, what).ParseDocument();
}

void JsonString(std::ostream& out, const std::string& s) {
  out << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out << buf;
    } else {
      out << c;
    }
  }
  out << '"';
}

void JsonNumber(std::ostream& out, double v) {
  if (!std::isfinite(v)) {
    out << "null";
    return;
  }
  // Whole numbers below 1e9 print as %.9g prints them, without snprintf: a dashboard window's
  // values are mostly zeros, and its top windows' bounds are -1.
  if (v == 0) {
    out << (std::signbit(v) ? "-0" : "0");
    return;
  }
  if (std::fabs(v) < 1e9 && v == std::trunc(v)) {
    out << static_cast<int64_t>(v);
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out << buf;
}

}  // namespace gpt2
