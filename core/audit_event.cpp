#include "core/audit_event.hpp"

#include "core/utf8.hpp"
#include "core/uuid.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {
namespace {

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

}  // namespace

std::string canonical_details(const Json& value) {
  if (value.kind != Json::Kind::object) invalid_parameter("details must be a JSON object");
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
    invalid_parameter(std::string(argument) + " must lie in the years 1 to 9999");
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
    if (e.payload_digest->empty()) invalid_parameter("payload_digest must not be empty");
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

std::string audit_hash(const AuditEvent& e) {
  return sha256(audit_encoding(e) + e.prev_hash);
}

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

}  // namespace fy::core
