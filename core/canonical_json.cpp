#include "core/canonical_json.hpp"

#include <algorithm>

#include "core/core.hpp"
#include "core/utf8.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {
namespace {

class Parser {
 public:
  Parser(std::string_view text, const char* argument, int max_depth)
      : s_(text), argument_(argument), max_depth_(max_depth) {}

  Json document() {
    skip_space();
    Json v = value(1);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    invalid_parameter(std::string(argument_) + " is not valid JSON: " + what + " at byte " + std::to_string(i_));
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) fail("unknown literal");
    i_ += word.size();
  }

  // `depth` counts the objects and arrays around the value, this one included when it is one.
  Json value(int depth) {
    if (i_ >= s_.size()) fail("unexpected end");
    if ((s_[i_] == '{' || s_[i_] == '[') && depth > max_depth_)
      fail("nested deeper than " + std::to_string(max_depth_) + " levels");
    Json v;
    switch (s_[i_]) {
      case '{': {
        v.kind = Json::Kind::object;
        ++i_;
        skip_space();
        if (eat('}')) return v;
        for (;;) {
          skip_space();
          if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
          std::string key = string();
          skip_space();
          expect(':');
          skip_space();
          Json member = value(depth + 1);
          // A repeated key keeps its last value, as jsonb does.
          auto same = std::find_if(v.members.begin(), v.members.end(), [&](const auto& m) { return m.key == key; });
          if (same != v.members.end())
            same->value = std::move(member);
          else
            v.members.push_back({std::move(key), std::move(member)});
          skip_space();
          if (eat('}')) return v;
          expect(',');
        }
      }
      case '[': {
        v.kind = Json::Kind::array;
        ++i_;
        skip_space();
        if (eat(']')) return v;
        for (;;) {
          skip_space();
          v.items.push_back(value(depth + 1));
          skip_space();
          if (eat(']')) return v;
          expect(',');
        }
      }
      case '"':
        v.kind = Json::Kind::string;
        v.text = string();
        return v;
      case 't':
        literal("true");
        v.kind = Json::Kind::boolean;
        v.text = "true";
        return v;
      case 'f':
        literal("false");
        v.kind = Json::Kind::boolean;
        v.text = "false";
        return v;
      case 'n':
        literal("null");
        return v;
      default:
        v.kind = Json::Kind::number;
        v.text = number();
        return v;
    }
  }

  std::string number() {
    std::size_t start = i_;
    auto digits = [&] {
      std::size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    eat('-');
    if (eat('0')) {
      if (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') fail("a number has a leading zero");
    } else if (digits() == 0) {
      fail("expected a value");
    }
    if (eat('.') && digits() == 0) fail("a number has no digits after '.'");
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (digits() == 0) fail("a number has no exponent digits");
    }
    return std::string(s_.substr(start, i_ - start));
  }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("a \\u escape is cut short");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        fail("a \\u escape has a non-hex digit");
    }
    return v;
  }

  // One raw UTF-8 sequence, validated.
  void raw_utf8(std::string& out) {
    const std::size_t n = utf8_length(s_, i_);
    if (n == 0) fail("invalid UTF-8");
    out.append(s_.substr(i_, n));
    i_ += n;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("a string is not closed");
      unsigned char c = (unsigned char)s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("a string contains a control character");
      if (c >= 0x80) {
        raw_utf8(out);
        continue;
      }
      ++i_;
      if (c != '\\') {
        out.push_back(char(c));
        continue;
      }
      if (i_ >= s_.size()) fail("a string is not closed");
      char e = s_[i_++];
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
          unsigned cp = hex4();
          if (cp == 0) fail("\\u0000 is not allowed");
          if (cp >= 0xdc00 && cp <= 0xdfff) fail("a low surrogate without a high one");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (!(eat('\\') && eat('u'))) fail("a high surrogate without a low one");
            unsigned low = hex4();
            if (low < 0xdc00 || low > 0xdfff) fail("a high surrogate without a low one");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("unknown escape");
      }
    }
  }

  std::string_view s_;
  const char* argument_;
  int max_depth_;
  std::size_t i_ = 0;
};

// A JSON number lexeme as a plain decimal: no exponent, no leading or trailing zeros, no "-0".
std::string canonical_number(std::string_view lexeme, const char* argument, std::size_t limit) {
  std::size_t p = 0;
  const bool negative = !lexeme.empty() && lexeme[0] == '-';
  if (negative) ++p;
  std::string digits;
  long long exponent = 0;
  while (p < lexeme.size() && lexeme[p] >= '0' && lexeme[p] <= '9') digits.push_back(lexeme[p++]);
  if (p < lexeme.size() && lexeme[p] == '.') {
    ++p;
    while (p < lexeme.size() && lexeme[p] >= '0' && lexeme[p] <= '9') {
      digits.push_back(lexeme[p++]);
      --exponent;
    }
  }
  if (p < lexeme.size() && (lexeme[p] == 'e' || lexeme[p] == 'E')) {
    ++p;
    bool minus = false;
    if (p < lexeme.size() && (lexeme[p] == '+' || lexeme[p] == '-')) minus = lexeme[p++] == '-';
    long long e = 0;
    while (p < lexeme.size() && lexeme[p] >= '0' && lexeme[p] <= '9') {
      e = std::min(e * 10 + (lexeme[p++] - '0'), 1'000'000'000'000LL);  // saturates; the length check refuses it
    }
    exponent += minus ? -e : e;
  }
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return "0";
  digits.erase(0, first);
  const std::size_t last = digits.find_last_not_of('0');
  exponent += static_cast<long long>(digits.size() - 1 - last);
  digits.resize(last + 1);
  const long long n = static_cast<long long>(digits.size());
  // PostgreSQL's numeric (what jsonb stores) holds at most 131072 digits before the decimal
  // point and 16383 after it; refuse what it cannot, so both stores accept the same numbers.
  const long long int_digits = exponent >= 0 ? n + exponent : std::max(0LL, n + exponent);
  const long long frac_digits = exponent >= 0 ? 0 : -exponent;
  if (int_digits > 131072 || frac_digits > 16383)
    invalid_parameter(std::string(argument) + " holds a number out of the range of PostgreSQL's numeric");
  long long length = exponent >= 0 ? n + exponent : (n > -exponent ? n + 1 : 2 - exponent);
  if (length + (negative ? 1 : 0) > static_cast<long long>(limit)) over_limit(argument, limit);
  std::string out = negative ? "-" : "";
  if (exponent >= 0) {
    out += digits;
    out.append(static_cast<std::size_t>(exponent), '0');
  } else if (n > -exponent) {
    out += digits.substr(0, static_cast<std::size_t>(n + exponent));
    out.push_back('.');
    out += digits.substr(static_cast<std::size_t>(n + exponent));
  } else {
    out += "0.";
    out.append(static_cast<std::size_t>(-exponent - n), '0');
    out += digits;
  }
  return out;
}

void emit(const Json& v, std::string& out, const char* argument, std::size_t limit) {
  switch (v.kind) {
    case Json::Kind::null:
      out += "null";
      break;
    case Json::Kind::boolean:
      out += v.text;
      break;
    case Json::Kind::number:
      out += canonical_number(v.text, argument, limit);
      break;
    case Json::Kind::string:
      out += json_quote(v.text);
      break;
    case Json::Kind::array:
      out.push_back('[');
      for (std::size_t k = 0; k < v.items.size(); ++k) {
        if (k > 0) out.push_back(',');
        emit(v.items[k], out, argument, limit);
      }
      out.push_back(']');
      break;
    case Json::Kind::object: {
      std::vector<const Json::Member*> sorted;
      sorted.reserve(v.members.size());
      for (const auto& m : v.members) sorted.push_back(&m);
      // std::string compares as unsigned bytes: UTF-8 byte order is code point order.
      std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->key < b->key; });
      out.push_back('{');
      for (std::size_t k = 0; k < sorted.size(); ++k) {
        if (k > 0) out.push_back(',');
        out += json_quote(sorted[k]->key);
        out.push_back(':');
        emit(sorted[k]->value, out, argument, limit);
      }
      out.push_back('}');
      break;
    }
  }
  if (out.size() > limit) over_limit(argument, limit);
}

}  // namespace

void over_limit(const char* argument, std::size_t limit) {
  invalid_parameter(std::string(argument) + " is over " + std::to_string(limit) + " bytes in canonical form");
}

const Json* Json::find(std::string_view key) const {
  for (const auto& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

Json parse_json(std::string_view text, const char* argument, int max_depth) {
  return Parser(text, argument, max_depth).document();
}

std::string json_quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xf]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string canonical_json(const Json& value, const char* argument, std::size_t limit) {
  std::string out;
  emit(value, out, argument, limit);
  return out;
}

}  // namespace fy::core
