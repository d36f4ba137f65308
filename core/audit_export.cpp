#include "core/audit_export.hpp"

#include "core/timestamp.hpp"
#include "core/uuid.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {
namespace {

const Json& field(const Json& line, const char* name, Json::Kind kind) {
  const Json* v = line.find(name);
  if (v == nullptr || v->kind != kind)
    invalid_parameter(std::string("line: field ") + name + " is missing or of the wrong type");
  return *v;
}

std::optional<std::string> optional_string(const Json& line, const char* name) {
  const Json* v = line.find(name);
  if (v == nullptr || v->kind == Json::Kind::null) return std::nullopt;
  if (v->kind != Json::Kind::string)
    invalid_parameter(std::string("line: field ") + name + " must be a string or null");
  return v->text;
}

std::string hex_field(const Json& line, const char* name, std::size_t bytes) {
  std::optional<std::string> raw = from_hex(field(line, name, Json::Kind::string).text);
  if (!raw || raw->size() != bytes)
    invalid_parameter(std::string("line: field ") + name + " must be " + std::to_string(bytes * 2) + " hex digits");
  return *raw;
}

std::int64_t time_field(const Json& line, const char* name) {
  std::optional<std::int64_t> t = parse_timestamp(field(line, name, Json::Kind::string).text);
  if (!t) invalid_parameter(std::string("line: field ") + name + " is not an RFC 3339 timestamp");
  return *t;
}

}  // namespace

std::string audit_json_line(const AuditEvent& e) {
  std::string out = "{\"tenant\":" + json_quote(e.tenant) + ",\"seq\":" + std::to_string(e.seq) + ",\"event_id\":\"" +
                    format_uuid(e.event_id) + "\",\"occurred_at\":\"" + format_timestamp(e.occurred_at) +
                    "\",\"recorded_at\":\"" + format_timestamp(e.recorded_at) + "\",\"actor\":" + json_quote(e.actor) +
                    ",\"action\":" + json_quote(e.action) + ",\"resource\":" + json_quote(e.resource) +
                    ",\"details\":" + (e.details ? *e.details : "null") +
                    ",\"payload_digest\":" + (e.payload_digest ? "\"" + to_hex(*e.payload_digest) + "\"" : "null") +
                    ",\"payload_ref\":" + (e.payload_ref ? json_quote(*e.payload_ref) : "null") + ",\"prev_hash\":\"" +
                    to_hex(e.prev_hash) + "\",\"hash\":\"" + to_hex(e.hash) + "\"}";
  return out;
}

AuditEvent parse_audit_json_line(std::string_view text) {
  const Json line = parse_json(text, "line", max_details_depth + 1);
  if (line.kind != Json::Kind::object) invalid_parameter("line: not a JSON object");
  AuditEvent e;
  e.tenant = field(line, "tenant", Json::Kind::string).text;
  const std::string& seq = field(line, "seq", Json::Kind::number).text;
  if (seq.empty() || seq.size() > 18 || seq.find_first_not_of("0123456789") != std::string::npos)
    invalid_parameter("line: field seq must be a positive integer");
  e.seq = std::stoll(seq);
  std::optional<std::string> id = parse_uuid(field(line, "event_id", Json::Kind::string).text);
  if (!id) invalid_parameter("line: field event_id is not a UUID");
  e.event_id = *id;
  e.occurred_at = time_field(line, "occurred_at");
  e.recorded_at = time_field(line, "recorded_at");
  e.actor = field(line, "actor", Json::Kind::string).text;
  e.action = field(line, "action", Json::Kind::string).text;
  e.resource = field(line, "resource", Json::Kind::string).text;
  if (const Json* d = line.find("details"); d != nullptr && d->kind != Json::Kind::null)
    e.details = canonical_details(*d);
  if (std::optional<std::string> digest = optional_string(line, "payload_digest")) {
    e.payload_digest = from_hex(*digest);
    if (!e.payload_digest) invalid_parameter("line: field payload_digest is not hex");
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
        invalid_parameter("the anchor (seq " + std::to_string(anchor->seq) +
                          ") is before the first exported event (seq " + std::to_string(e.seq) + ")");
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

}  // namespace fy::core
