// The client side of the audit chain that both backends share: input checks, conversions, the
// export format and the offline verifier (all through core/audit.hpp, as the extension does).
#include <istream>

#include "audit_event.hpp"
#include "error_map.hpp"

namespace forgeyard {
namespace detail {

fy::core::AuditEvent audit_input(std::string_view tenant, const AuditEvent& event) {
  return core_guarded([&] {
    fy::core::AuditEvent e;
    e.tenant = std::string(tenant);
    e.actor = event.actor;
    e.action = event.action;
    e.resource = event.resource;
    if (event.details) e.details = fy::core::canonical_details(*event.details);
    e.payload_digest = event.payload_digest;
    e.payload_ref = event.payload_ref;
    fy::core::check_audit_input(e);
    if (event.occurred_at) fy::core::check_audit_time("occurred_at", unix_usecs(*event.occurred_at));
    if (event.event_id) {
      std::optional<std::string> id = fy::core::parse_uuid(*event.event_id);
      if (!id) throw fy::core::Error(fy::core::sqlstate::invalid_parameter, "event_id is not a UUID");
      e.event_id = *id;
    }
    return e;
  });
}

AuditRecord to_record(const fy::core::AuditEvent& e) {
  return AuditRecord{e.tenant,
                     e.seq,
                     fy::core::format_uuid(e.event_id),
                     from_unix_usecs(e.occurred_at),
                     from_unix_usecs(e.recorded_at),
                     e.actor,
                     e.action,
                     e.resource,
                     e.details,
                     e.payload_digest,
                     e.payload_ref,
                     e.prev_hash,
                     e.hash};
}

fy::core::AuditEvent from_record(const AuditRecord& r) {
  fy::core::AuditEvent e;
  e.tenant = r.tenant;
  e.seq = r.seq;
  std::optional<std::string> id = fy::core::parse_dashed_uuid(r.event_id);
  if (!id) throw Error(fy::core::sqlstate::invalid_parameter, "event_id \"" + r.event_id + "\" is not a UUID");
  e.event_id = *id;
  e.occurred_at = unix_usecs(r.occurred_at);
  e.recorded_at = unix_usecs(r.recorded_at);
  e.actor = r.actor;
  e.action = r.action;
  e.resource = r.resource;
  e.details = r.details;
  e.payload_digest = r.payload_digest;
  e.payload_ref = r.payload_ref;
  e.prev_hash = r.prev_hash;
  e.hash = r.hash;
  return e;
}

AuditVerification to_verification(const fy::core::Verification& v) {
  return AuditVerification{v.ok, v.checked, v.first_bad_seq, v.reason};
}

std::optional<fy::core::Anchor> to_anchor(const std::optional<AuditHead>& anchor) {
  if (!anchor) return std::nullopt;
  return fy::core::Anchor{anchor->seq, anchor->hash};
}

}  // namespace detail

std::string audit_export_line(const AuditRecord& record) {
  return fy::core::audit_json_line(detail::from_record(record));
}

AuditRecord parse_audit_export_line(std::string_view line) {
  return detail::core_guarded([&] { return detail::to_record(fy::core::parse_audit_json_line(line)); });
}

AuditVerification verify_audit_export(std::istream& in, std::optional<AuditHead> anchor) {
  return detail::core_guarded([&] {
    if (anchor && (anchor->seq < 1 || anchor->hash.size() != fy::core::hash_bytes))
      throw fy::core::Error(fy::core::sqlstate::invalid_parameter,
                            "an anchor is a seq of at least 1 and a 32-byte hash");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
    return detail::to_verification(fy::core::verify_exported_chain(lines, detail::to_anchor(anchor)));
  });
}

std::string format_time(TimePoint t) {
  return fy::core::format_timestamp(unix_usecs(t));
}
std::optional<TimePoint> parse_time(std::string_view text) {
  std::optional<std::int64_t> us = fy::core::parse_timestamp(text);
  if (!us) return std::nullopt;
  return from_unix_usecs(*us);
}

std::string to_hex(std::string_view bytes) {
  return fy::core::to_hex(bytes);
}
std::optional<Bytes> from_hex(std::string_view text) {
  return fy::core::from_hex(text);
}

}  // namespace forgeyard
