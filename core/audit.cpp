#include "core/audit.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw Error(sqlstate::invalid_parameter, message); }

// The length of the UTF-8 sequence at s[i] (1 to 4), or 0 when it is not valid UTF-8: no
// overlong forms, no surrogates, nothing past U+10FFFF, not cut short.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) -> unsigned { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned b0 = byte(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (i < s.size() && b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

// ---- JSON parser ---------------------------------------------------------------------------

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
    invalid(std::string(argument_) + " is not valid JSON: " + what + " at byte " + std::to_string(i_));
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
          auto same = std::find_if(v.members.begin(), v.members.end(), [&](const auto& m) { return m.first == key; });
          if (same != v.members.end())
            same->second = std::move(member);
          else
            v.members.emplace_back(std::move(key), std::move(member));
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
      if (c >= '0' && c <= '9') v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= unsigned(c - 'A' + 10);
      else fail("a \\u escape has a non-hex digit");
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(char(cp));
    } else if (cp < 0x800) {
      out.push_back(char(0xc0 | (cp >> 6)));
      out.push_back(char(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(char(0xe0 | (cp >> 12)));
      out.push_back(char(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(char(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(char(0xf0 | (cp >> 18)));
      out.push_back(char(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(char(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(char(0x80 | (cp & 0x3f)));
    }
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
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
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
          put_utf8(out, cp);
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

[[noreturn]] void over_limit(const char* argument, std::size_t limit) {
  invalid(std::string(argument) + " is over " + std::to_string(limit) + " bytes in canonical form");
}

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
    invalid(std::string(argument) + " holds a number out of the range of PostgreSQL's numeric");
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
    case Json::Kind::null: out += "null"; break;
    case Json::Kind::boolean: out += v.text; break;
    case Json::Kind::number: out += canonical_number(v.text, argument, limit); break;
    case Json::Kind::string: out += json_quote(v.text); break;
    case Json::Kind::array:
      out.push_back('[');
      for (std::size_t k = 0; k < v.items.size(); ++k) {
        if (k > 0) out.push_back(',');
        emit(v.items[k], out, argument, limit);
      }
      out.push_back(']');
      break;
    case Json::Kind::object: {
      std::vector<const std::pair<std::string, Json>*> sorted;
      sorted.reserve(v.members.size());
      for (const auto& m : v.members) sorted.push_back(&m);
      // std::string compares as unsigned bytes: UTF-8 byte order is code point order.
      std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (std::size_t k = 0; k < sorted.size(); ++k) {
        if (k > 0) out.push_back(',');
        out += json_quote(sorted[k]->first);
        out.push_back(':');
        emit(sorted[k]->second, out, argument, limit);
      }
      out.push_back('}');
      break;
    }
  }
  if (out.size() > limit) over_limit(argument, limit);
}

// ---- Encoding ------------------------------------------------------------------------------

void put_u32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}
void put_i64(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int s = 56; s >= 0; s -= 8) out.push_back(static_cast<char>((u >> s) & 0xff));
}
void put_bytes(std::string& out, std::string_view v) {
  put_u32(out, static_cast<std::uint32_t>(v.size()));
  out.append(v);
}
void put_optional(std::string& out, const std::optional<std::string>& v) {
  if (!v) {
    out.push_back('\0');
    return;
  }
  out.push_back('\1');
  put_bytes(out, *v);
}

// ---- Time ----------------------------------------------------------------------------------

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  d = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
  m = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
  y = yoe + era * 400 + (m <= 2);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// ---- Export fields -------------------------------------------------------------------------

const Json& field(const Json& line, const char* name, Json::Kind kind) {
  const Json* v = line.find(name);
  if (v == nullptr || v->kind != kind) invalid(std::string("line: field ") + name + " is missing or of the wrong type");
  return *v;
}

std::optional<std::string> optional_string(const Json& line, const char* name) {
  const Json* v = line.find(name);
  if (v == nullptr || v->kind == Json::Kind::null) return std::nullopt;
  if (v->kind != Json::Kind::string) invalid(std::string("line: field ") + name + " must be a string or null");
  return v->text;
}

std::string hex_field(const Json& line, const char* name, std::size_t bytes) {
  std::optional<std::string> raw = from_hex(field(line, name, Json::Kind::string).text);
  if (!raw || raw->size() != bytes) invalid(std::string("line: field ") + name + " must be " + std::to_string(bytes * 2) + " hex digits");
  return *raw;
}

std::int64_t time_field(const Json& line, const char* name) {
  std::optional<std::int64_t> t = parse_timestamp(field(line, name, Json::Kind::string).text);
  if (!t) invalid(std::string("line: field ") + name + " is not an RFC 3339 timestamp");
  return *t;
}

}  // namespace

const Json* Json::find(std::string_view key) const {
  for (const auto& m : members)
    if (m.first == key) return &m.second;
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
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
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

std::string canonical_details(const Json& value) {
  if (value.kind != Json::Kind::object) invalid("details must be a JSON object");
  return canonical_json(value, "details", max_details_bytes);
}

std::string canonical_details(std::string_view json_text) {
  return canonical_details(parse_json(json_text, "details", max_details_depth));
}

const std::string& genesis_hash() {
  static const std::string zero(hash_bytes, '\0');
  return zero;
}

void check_audit_time(const char* argument, std::int64_t unix_usecs) {
  if (unix_usecs < min_audit_time_usecs || unix_usecs > max_audit_time_usecs)
    invalid(std::string(argument) + " must lie in the years 1 to 9999");
}

namespace {
// 22021 unless `value` is UTF-8 without NUL: text the chain hashes must read back, export and
// parse alike in every store (PostgreSQL text cannot hold NUL; libpq would cut it off).
void check_text(const char* argument, std::string_view value) {
  for (std::size_t i = 0; i < value.size();) {
    if (value[i] == '\0') throw Error("22021", std::string(argument) + " must not contain a NUL character");
    const std::size_t n = utf8_length(value, i);
    if (n == 0) throw Error("22021", std::string(argument) + " is not valid UTF-8");
    i += n;
  }
}
}  // namespace

void check_audit_input(const AuditEvent& e) {
  check_name("tenant", true, e.tenant, max_tenant_bytes);
  check_name("actor", true, e.actor, max_actor_bytes);
  check_name("action", true, e.action, max_action_bytes);
  check_name("resource", true, e.resource, max_resource_bytes);
  check_text("tenant", e.tenant);
  check_text("actor", e.actor);
  check_text("action", e.action);
  check_text("resource", e.resource);
  if (e.payload_ref) check_text("payload_ref", *e.payload_ref);
  if (e.payload_digest) {
    if (e.payload_digest->empty()) invalid("payload_digest must not be empty");
    if (e.payload_digest->size() > max_payload_digest_bytes)
      throw Error(sqlstate::string_too_long,
                  "payload_digest is longer than " + std::to_string(max_payload_digest_bytes) + " bytes");
  }
  if (e.payload_ref) check_name("payload_ref", true, *e.payload_ref, max_payload_ref_bytes);
  if (e.details && e.details->size() > max_details_bytes) over_limit("details", max_details_bytes);
}

std::string audit_encoding(const AuditEvent& e) {
  std::string out = "forgeyard.audit.v1";
  out.push_back('\0');
  put_bytes(out, e.tenant);
  put_i64(out, e.seq);
  put_bytes(out, e.event_id);
  put_i64(out, e.occurred_at);
  put_i64(out, e.recorded_at);
  put_bytes(out, e.actor);
  put_bytes(out, e.action);
  put_bytes(out, e.resource);
  put_optional(out, e.details);
  put_optional(out, e.payload_digest);
  put_optional(out, e.payload_ref);
  return out;
}

std::string audit_hash(const AuditEvent& e) { return sha256(audit_encoding(e) + e.prev_hash); }

bool same_contents(const AuditEvent& stored, const AuditEvent& retry, bool retry_has_occurred_at) {
  return (!retry_has_occurred_at || stored.occurred_at == retry.occurred_at) && stored.actor == retry.actor &&
         stored.action == retry.action && stored.resource == retry.resource && stored.details == retry.details &&
         stored.payload_digest == retry.payload_digest && stored.payload_ref == retry.payload_ref;
}

void throw_event_id_reused(const AuditEvent& stored) {
  throw Error(sqlstate::idempotency_mismatch,
              "event_id " + format_uuid(stored.event_id) + " is already in the chain with other contents",
              "it is event " + std::to_string(stored.seq));
}

// ---- Verification --------------------------------------------------------------------------

ChainVerifier::ChainVerifier(std::int64_t from_seq, std::string prev_hash, std::optional<Anchor> anchor)
    : next_(from_seq), prev_(std::move(prev_hash)), anchor_(std::move(anchor)) {}

ChainVerifier ChainVerifier::for_range(std::int64_t from_seq, const std::optional<std::string>& hash_before,
                                       const Anchor& head, std::optional<Anchor> anchor) {
  ChainVerifier v(from_seq, from_seq == 1 ? genesis_hash() : hash_before.value_or(std::string()), std::move(anchor));
  if (head.seq > 0) v.head_ = head;
  if (from_seq > 1 && !hash_before && from_seq - 1 <= head.seq)
    v.fail(from_seq - 1, "event " + std::to_string(from_seq - 1) + " is missing");
  return v;
}

void ChainVerifier::fail(std::int64_t seq, std::string reason) {
  if (!result_.ok) return;
  result_.ok = false;
  result_.first_bad_seq = seq;
  result_.reason = std::move(reason);
}

bool ChainVerifier::add(const AuditEvent& e) {
  if (!result_.ok) return false;
  const std::string n = std::to_string(next_);
  if (e.seq != next_) {
    fail(next_, e.seq > next_ ? "event " + n + " is missing (the next stored event is " + std::to_string(e.seq) + ")"
                              : "event " + std::to_string(e.seq) + " is out of order (expected " + n + ")");
  } else if (e.prev_hash != prev_) {
    fail(next_, next_ == 1 ? "prev_hash of event 1 is not the genesis hash"
                           : "prev_hash of event " + n + " does not match the hash of event " + std::to_string(next_ - 1));
  } else if (audit_hash(e) != e.hash) {
    fail(next_, "hash of event " + n + " does not match its contents");
  } else if (anchor_ && anchor_->seq == next_ && anchor_->hash != e.hash) {
    fail(next_, "hash of event " + n + " does not match the anchor");
  } else if (head_ && head_->seq == next_ && head_->hash != e.hash) {
    fail(next_, "hash of event " + n + " does not match the chain's head row");
  }
  if (!result_.ok) return false;
  ++result_.checked;
  prev_ = e.hash;
  ++next_;
  return true;
}

Verification ChainVerifier::finish(std::optional<std::int64_t> expected_last) {
  if (result_.ok && anchor_ && anchor_->seq >= next_) {
    fail(next_, "the chain ends at seq " + std::to_string(next_ - 1) + ", before the anchor at seq " +
                    std::to_string(anchor_->seq) + ": its tail was cut");
  } else if (result_.ok && expected_last && *expected_last >= next_) {
    fail(next_, "event " + std::to_string(next_) + " is missing (the chain head is at seq " +
                    std::to_string(*expected_last) + ")");
  }
  return result_;
}

void check_verify_range(std::int64_t from_seq, std::optional<std::int64_t> to_seq, const std::optional<Anchor>& anchor) {
  if (from_seq < 1) invalid("from_seq must be at least 1");
  if (to_seq && *to_seq < from_seq) invalid("to_seq must not be below from_seq");
  if (anchor) {
    if (anchor->hash.size() != hash_bytes) invalid("anchor_hash must be 32 bytes");
    if (anchor->seq < from_seq || (to_seq && anchor->seq > *to_seq))
      invalid("anchor_seq must be within from_seq .. to_seq");
  }
}

// ---- Export --------------------------------------------------------------------------------

std::string audit_json_line(const AuditEvent& e) {
  std::string out = "{\"tenant\":" + json_quote(e.tenant) + ",\"seq\":" + std::to_string(e.seq) +
                    ",\"event_id\":\"" + format_uuid(e.event_id) + "\",\"occurred_at\":\"" +
                    format_timestamp(e.occurred_at) + "\",\"recorded_at\":\"" + format_timestamp(e.recorded_at) +
                    "\",\"actor\":" + json_quote(e.actor) + ",\"action\":" + json_quote(e.action) +
                    ",\"resource\":" + json_quote(e.resource) + ",\"details\":" + (e.details ? *e.details : "null") +
                    ",\"payload_digest\":" + (e.payload_digest ? "\"" + to_hex(*e.payload_digest) + "\"" : "null") +
                    ",\"payload_ref\":" + (e.payload_ref ? json_quote(*e.payload_ref) : "null") +
                    ",\"prev_hash\":\"" + to_hex(e.prev_hash) + "\",\"hash\":\"" + to_hex(e.hash) + "\"}";
  return out;
}

AuditEvent parse_audit_json_line(std::string_view text) {
  const Json line = parse_json(text, "line", max_details_depth + 1);
  if (line.kind != Json::Kind::object) invalid("line: not a JSON object");
  AuditEvent e;
  e.tenant = field(line, "tenant", Json::Kind::string).text;
  const std::string& seq = field(line, "seq", Json::Kind::number).text;
  if (seq.empty() || seq.size() > 18 || seq.find_first_not_of("0123456789") != std::string::npos)
    invalid("line: field seq must be a positive integer");
  e.seq = std::stoll(seq);
  std::optional<std::string> id = parse_uuid(field(line, "event_id", Json::Kind::string).text);
  if (!id) invalid("line: field event_id is not a UUID");
  e.event_id = *id;
  e.occurred_at = time_field(line, "occurred_at");
  e.recorded_at = time_field(line, "recorded_at");
  e.actor = field(line, "actor", Json::Kind::string).text;
  e.action = field(line, "action", Json::Kind::string).text;
  e.resource = field(line, "resource", Json::Kind::string).text;
  if (const Json* d = line.find("details"); d != nullptr && d->kind != Json::Kind::null) e.details = canonical_details(*d);
  if (std::optional<std::string> digest = optional_string(line, "payload_digest")) {
    e.payload_digest = from_hex(*digest);
    if (!e.payload_digest) invalid("line: field payload_digest is not hex");
  }
  e.payload_ref = optional_string(line, "payload_ref");
  e.prev_hash = hex_field(line, "prev_hash", hash_bytes);
  e.hash = hex_field(line, "hash", hash_bytes);
  return e;
}

Verification verify_exported_chain(const std::vector<std::string>& lines, const std::optional<Anchor>& anchor) {
  std::optional<ChainVerifier> verifier;
  std::string tenant;
  std::size_t number = 0;
  for (const std::string& text : lines) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    AuditEvent e;
    try {
      e = parse_audit_json_line(text);
    } catch (const Error& error) {
      Verification bad;
      bad.ok = false;
      bad.checked = verifier ? verifier->finish(std::nullopt).checked : 0;
      bad.first_bad_seq = verifier ? verifier->next_seq() : 1;
      bad.reason = "line " + std::to_string(number) + ": " + error.what();
      return bad;
    }
    if (!verifier) {
      tenant = e.tenant;
      if (anchor && anchor->seq < e.seq)
        invalid("the anchor (seq " + std::to_string(anchor->seq) + ") is before the first exported event (seq " +
                std::to_string(e.seq) + ")");
      verifier.emplace(e.seq, e.seq == 1 ? genesis_hash() : e.prev_hash, anchor);
    } else if (e.tenant != tenant) {
      verifier->fail(verifier->next_seq(), "line " + std::to_string(number) + " belongs to another tenant");
    }
    if (!verifier->add(e)) break;
  }
  if (!verifier) {
    ChainVerifier empty(1, genesis_hash(), anchor);
    return empty.finish(std::nullopt);
  }
  return verifier->finish(std::nullopt);
}

// ---- Text forms ----------------------------------------------------------------------------

std::string format_uuid(std::string_view b) {
  std::string h = to_hex(b);
  if (h.size() != 32) return h;
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

std::optional<std::string> parse_uuid(std::string_view text) {
  if (text.size() != 36) return std::nullopt;
  std::string hex;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (text[i] == '-')) return std::nullopt;
    if (!dash) hex.push_back(text[i]);
  }
  return from_hex(hex);  // 32 characters: nullopt unless all are hex digits
}

std::string format_timestamp(std::int64_t unix_usecs) {
  const std::int64_t secs = floor_div(unix_usecs, usecs_per_second);
  const std::int64_t micros = unix_usecs - secs * usecs_per_second;
  const std::int64_t days = floor_div(secs, 86400);
  const std::int64_t rest = secs - days * 86400;
  std::int64_t y;
  unsigned m, d;
  civil_from_days(days, y, m, d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%06lldZ", static_cast<long long>(y), m, d,
                static_cast<int>(rest / 3600), static_cast<int>(rest / 60 % 60), static_cast<int>(rest % 60),
                static_cast<long long>(micros));
  return buf;
}

std::optional<std::int64_t> parse_timestamp(std::string_view t) {
  std::size_t p = 0;
  auto num = [&](std::size_t width, std::int64_t& out) {
    if (p + width > t.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < width; ++k) {
      char c = t[p + k];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    p += width;
    return true;
  };
  auto sep = [&](char c) { return p < t.size() && (t[p] == c || (c == 'T' && (t[p] == 't' || t[p] == ' '))) && ++p; };
  std::int64_t y, mo, d, h, mi, s, micros = 0;
  if (!(num(4, y) && sep('-') && num(2, mo) && sep('-') && num(2, d) && sep('T') && num(2, h) && sep(':') &&
        num(2, mi) && sep(':') && num(2, s)))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return std::nullopt;
  static constexpr int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > month_days[mo - 1] + (mo == 2 && leap ? 1 : 0)) return std::nullopt;
  if (p < t.size() && t[p] == '.') {
    ++p;
    std::size_t digits = 0;
    while (p < t.size() && t[p] >= '0' && t[p] <= '9' && digits < 6) {
      micros = micros * 10 + (t[p++] - '0');
      ++digits;
    }
    if (digits == 0 || (p < t.size() && t[p] >= '0' && t[p] <= '9')) return std::nullopt;
    for (; digits < 6; ++digits) micros *= 10;
  }
  std::int64_t offset = 0;
  if (p < t.size() && (t[p] == 'Z' || t[p] == 'z')) {
    ++p;
  } else if (p < t.size() && (t[p] == '+' || t[p] == '-')) {
    const bool minus = t[p++] == '-';
    std::int64_t oh, om;
    if (!(num(2, oh) && sep(':') && num(2, om)) || oh > 23 || om > 59) return std::nullopt;
    offset = (oh * 3600 + om * 60) * (minus ? -1 : 1);
  } else {
    return std::nullopt;
  }
  if (p != t.size()) return std::nullopt;
  const std::int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return ((days * 86400 + h * 3600 + mi * 60 + s) - offset) * usecs_per_second + micros;
}

}  // namespace fy::core
