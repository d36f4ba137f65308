// The Audit capability over the forgeyard extension's SQL API. Events are checked and their
// details canonicalized here first, so both backends refuse bad input with the same SQLSTATE.
#include "postgres/audit.hpp"

#include "audit_event.hpp"
#include "error_map.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement append_sql{"fy_audit_append",
                             "SELECT seq, hash FROM forgeyard.audit_append($1, $2, $3, $4, $5::pg_catalog.jsonb,"
                             " $6::pg_catalog.bytea, $7, $8::pg_catalog.timestamptz, $9::pg_catalog.uuid)",
                             9};
const PgStatement append_batch_sql{
    "fy_audit_append_batch",
    "SELECT seq, hash FROM forgeyard.audit_append_batch($1, $2::pg_catalog.text[], $3::pg_catalog.text[],"
    " $4::pg_catalog.text[], $5::pg_catalog.jsonb[], $6::pg_catalog.bytea[], $7::pg_catalog.text[],"
    " $8::pg_catalog.timestamptz[], $9::pg_catalog.uuid[])",
    9};
const PgStatement head_sql{"fy_audit_head", "SELECT seq, hash FROM forgeyard.audit_head($1)", 1};
const PgStatement verify_sql{"fy_audit_verify",
                             "SELECT ok, checked, first_bad_seq, reason"
                             " FROM forgeyard.audit_verify($1, $2, $3, $4, $5::pg_catalog.bytea)",
                             5};
const PgStatement read_sql{"fy_audit_read",
                           "SELECT seq, event_id::pg_catalog.text, " FY_USECS("occurred_at") ", " FY_USECS("recorded_at")
                           ", actor, action, resource, details::pg_catalog.text, payload_digest, payload_ref,"
                           " prev_hash, hash FROM forgeyard.audit_read($1, $2, $3)",
                           3};

std::optional<std::string> timestamp_param(const std::optional<TimePoint>& t) {
  if (!t) return std::nullopt;
  return fy::core::format_timestamp(unix_usecs(*t));
}

std::optional<std::string> uuid_param(const fy::core::AuditEvent& e) {
  if (e.event_id.empty()) return std::nullopt;
  return fy::core::format_uuid(e.event_id);
}

std::optional<std::string> optional_bytea(const std::optional<std::string>& bytes) {
  if (!bytes) return std::nullopt;
  return bytea_param(*bytes);
}

AuditHead head_of(const PgResult& r, int row) {
  return AuditHead{r.int8(row, 0), r.bytea(row, 1)};
}

}  // namespace

AuditHead PgAudit::append(std::string_view tenant, const AuditEvent& event) {
  return session_.measure("audit.append", [&] {
    const fy::core::AuditEvent e = audit_input(tenant, event);
    PgResult r =
        session_.run(append_sql, {e.tenant, e.actor, e.action, e.resource, e.details, optional_bytea(e.payload_digest),
                                  e.payload_ref, timestamp_param(event.occurred_at), uuid_param(e)});
    return head_of(r, 0);
  });
}

std::vector<AuditHead> PgAudit::append_batch(std::string_view tenant, const std::vector<AuditEvent>& events) {
  return session_.measure("audit.append_batch", [&] {
    if (events.size() > static_cast<std::size_t>(fy::core::max_audit_batch))
      throw Error("22023", "a batch holds at most " + std::to_string(fy::core::max_audit_batch) + " events");
    std::vector<std::optional<std::string>> actors, actions, resources, details, digests, refs, occurred, ids;
    for (const AuditEvent& event : events) {
      const fy::core::AuditEvent e = audit_input(tenant, event);
      actors.push_back(e.actor);
      actions.push_back(e.action);
      resources.push_back(e.resource);
      details.push_back(e.details);
      digests.push_back(optional_bytea(e.payload_digest));
      refs.push_back(e.payload_ref);
      occurred.push_back(timestamp_param(event.occurred_at));
      ids.push_back(uuid_param(e));
    }
    PgResult r = session_.run(append_batch_sql, {std::string(tenant), array_param(actors), array_param(actions),
                                                 array_param(resources), array_param(details), array_param(digests),
                                                 array_param(refs), array_param(occurred), array_param(ids)});
    std::vector<AuditHead> out;
    out.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) out.push_back(head_of(r, i));
    return out;
  });
}

AuditHead PgAudit::head(std::string_view tenant, ReadClass read) {
  return session_.measure("audit.head",
                          [&] { return head_of(session_.read(head_sql, {std::string(tenant)}, read), 0); });
}

AuditVerification PgAudit::verify(std::string_view tenant, std::int64_t from_seq, std::optional<std::int64_t> to_seq,
                                  std::optional<AuditHead> anchor, ReadClass read) {
  return session_.measure("audit.verify", [&] {
    PgResult r = session_.read(
        verify_sql,
        {std::string(tenant), std::to_string(from_seq), to_seq ? std::optional(std::to_string(*to_seq)) : std::nullopt,
         anchor ? std::optional(std::to_string(anchor->seq)) : std::nullopt,
         anchor ? std::optional(bytea_param(anchor->hash)) : std::nullopt},
        read);
    AuditVerification v;
    v.ok = r.boolean(0, 0);
    v.checked = r.int8(0, 1);
    if (!r.is_null(0, 2)) v.first_bad_seq = r.int8(0, 2);
    if (!r.is_null(0, 3)) v.reason = r.text(0, 3);
    return v;
  });
}

std::vector<AuditRecord> PgAudit::read(std::string_view tenant, std::int64_t from_seq, int max_events,
                                       ReadClass read_class) {
  return session_.measure("audit.read", [&] {
    PgResult r = session_.read(read_sql, {std::string(tenant), std::to_string(from_seq), std::to_string(max_events)},
                               read_class);
    std::vector<AuditRecord> out;
    for (int i = 0; i < r.rows(); ++i) {
      AuditRecord a;
      a.tenant = std::string(tenant);
      a.seq = r.int8(i, 0);
      a.event_id = r.text(i, 1);
      a.occurred_at = from_unix_usecs(r.int8(i, 2));
      a.recorded_at = from_unix_usecs(r.int8(i, 3));
      a.actor = r.text(i, 4);
      a.action = r.text(i, 5);
      a.resource = r.text(i, 6);
      if (!r.is_null(i, 7)) {
        // A stored value that is no longer an object (edited past the triggers) is kept as it
        // is, so that verification reports it instead of the read failing.
        const std::string text = r.text(i, 7);
        try {
          a.details = fy::core::canonical_details(text);
        } catch (const fy::core::Error&) {
          a.details = text;
        }
      }
      if (!r.is_null(i, 8)) a.payload_digest = r.bytea(i, 8);
      if (!r.is_null(i, 9)) a.payload_ref = r.text(i, 9);
      a.prev_hash = r.bytea(i, 10);
      a.hash = r.bytea(i, 11);
      out.push_back(std::move(a));
    }
    return out;
  });
}

}  // namespace forgeyard::detail
