// What both backends share for restore safety (forgeyard/restore.hpp).
#include "restore_report.hpp"

#include "core/canonical_json.hpp"
#include "core/errors.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard {

const char* to_string(RestoreState state) {
  switch (state) {
    case RestoreState::Ok:
      return "ok";
    case RestoreState::Restored:
      return "restored";
    case RestoreState::Suspected:
      return "suspected";
  }
  return "unknown";
}

namespace detail {

RestoreState parse_restore_state(const std::string& text) {
  if (text == "ok") return RestoreState::Ok;
  if (text == "restored") return RestoreState::Restored;
  if (text == "suspected") return RestoreState::Suspected;
  throw Error(ErrorKind::Corruption, fy::core::sqlstate::internal_error, "unknown restore state \"" + text + "\"");
}

std::string anchors_json(const std::vector<AuditAnchor>& anchors) {
  std::string out = "{";
  for (const AuditAnchor& a : anchors) {
    if (out.size() > 1) out += ',';
    out += fy::core::json_quote(a.tenant) + ":{\"seq\":" + std::to_string(a.head.seq) + ",\"hash\":\"" +
           to_hex(a.head.hash) + "\"}";
  }
  return out + "}";
}

void check_anchors(const std::vector<AuditAnchor>& anchors) {
  for (const AuditAnchor& a : anchors) {
    if (a.tenant.empty()) throw Error(fy::core::sqlstate::invalid_parameter, "an anchor's tenant must not be empty");
    if (a.head.seq < 1 || a.head.hash.size() != 32)
      throw Error(
          fy::core::sqlstate::invalid_parameter,
          "anchor of tenant \"" + a.tenant + "\" must be {\"seq\": a positive integer, \"hash\": 64 hex digits}");
  }
}

}  // namespace detail

}  // namespace forgeyard
