#include "json.hpp"

#include <charconv>
#include <cmath>

#include "core/canonical_json.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard::detail {

std::string to_json(const Fields& fields) {
  std::string out = "{";
  for (const auto& [name, value] : fields) {
    if (out.size() > 1) out += ',';
    out += fy::core::json_quote(name);
    out += ':';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::nullptr_t>)
            out += "null";
          else if constexpr (std::is_same_v<T, bool>)
            out += v ? "true" : "false";
          else if constexpr (std::is_same_v<T, std::int64_t>)
            out += std::to_string(v);
          else if constexpr (std::is_same_v<T, double>) {
            if (!std::isfinite(v))
              throw Error(ErrorKind::InvalidArgument, "22023", "a field value is not a finite number");
            char buf[32];
            auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
            out.append(buf, p);
          } else
            out += fy::core::json_quote(v);
        },
        value);
  }
  return out + "}";
}

Value value_from_json(const std::string& type, const std::string& text) {
  if (type == "null") return nullptr;
  if (type == "boolean") return text == "true";
  if (type == "string" || type == "object" || type == "array") return text;
  if (type == "number") {
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
    if (ec == std::errc() && p == text.data() + text.size()) return i;
    double d = 0;
    auto [q, ec2] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec2 == std::errc() && q == text.data() + text.size()) return d;
  }
  throw Error(ErrorKind::Corruption, "XX000", "invalid value read back from PostgreSQL: " + type + " " + text);
}

}  // namespace forgeyard::detail
