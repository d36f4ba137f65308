// The strict JSON parser and the canonical printer of the audit chain
// (docs/architecture.md#canonical-details). The printer is ours on purpose: its exact bytes are
// hashed into every event, and no JSON library promises that byte form.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fy::core {

// A parsed JSON value. Numbers keep their text (exact, any precision); objects keep the last
// value of a repeated key, as jsonb does.
struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  std::string text;  // number: its lexeme; string: the decoded UTF-8; boolean: "true" / "false"
  std::vector<Json> items;
  struct Member;  // a std::pair of an incomplete Json is not allowed; a vector of one is
  std::vector<Member> members;

  const Json* find(std::string_view key) const;
};
struct Json::Member {
  std::string key;
  Json value;
};

// Strict RFC 8259 JSON (UTF-8, no \u0000, no lone surrogates, at most max_depth objects and
// arrays inside each other);
// anything else is 22023 naming `argument`.
Json parse_json(std::string_view text, const char* argument, int max_depth);

// The canonical text: no whitespace; object keys sorted by their UTF-8 bytes; numbers as plain
// decimals without exponent, leading or trailing zeros ("1.50" -> "1.5", "1e2" -> "100",
// "-0" -> "0"); strings escape only '"', '\\' and U+0000..U+001F (\b \f \n \r \t, else \u00xx).
// `limit` bounds the output: longer is 22023 "<argument> is over N bytes".
std::string canonical_json(const Json& value, const char* argument, std::size_t limit);
// JSON string literal in the canonical escaping.
std::string json_quote(std::string_view s);

// 22023 "<argument> is over <limit> bytes in canonical form".
[[noreturn]] void over_limit(const char* argument, std::size_t limit);

}  // namespace fy::core
