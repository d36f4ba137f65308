// Idempotency keys (docs/sql-api.md#idempotency-keys): one effect per (tenant, scope, key).
#include <optional>
#include <string>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "maintenance.hpp"
#include "tenant.hpp"

namespace fy {
namespace {

struct Key {
  std::string tenant, scope, key;
  pg::Value t, s, k;
};

Key key_args(FunctionCallInfo fcinfo) {
  Key key{pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes),
          pg::name_arg(fcinfo, 1, "scope", core::max_scope_bytes),
          pg::name_arg(fcinfo, 2, "key", core::max_idempotency_key_bytes),
          {},
          {},
          {}};
  key.t = pg::text_value(key.tenant);
  key.s = pg::text_value(key.scope);
  key.k = pg::text_value(key.key);
  return key;
}

// The stored key, locked FOR UPDATE: a concurrent caller waits here until this one's
// transaction ends, then sees what it committed.
struct Stored {
  core::IdempotencyRow row;
  std::optional<std::string> recovery_point;
  std::optional<std::string> response;
};

std::optional<Stored> lock_key(pg::Spi& spi, const Key& key) {
  static pg::Statement lock(
      "SELECT i.request_digest, i.status OPERATOR(pg_catalog.=) 'completed', i.attempt, i.locked_until,"
      "       i.expires_at, i.recovery_point, i.response"
      "  FROM forgeyard.idempotency_keys i"
      " WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.scope OPERATOR(pg_catalog.=) $2"
      "   AND i.key OPERATOR(pg_catalog.=) $3 FOR UPDATE",
      {TEXTOID, TEXTOID, TEXTOID});
  std::optional<Stored> stored;
  spi.run(lock, {key.t, key.s, key.k}, [&](const pg::Row& r) {
    stored = Stored{
        {*r.bytea(1), *r.boolean(2), *r.int8(3), pg::unix_usecs(*r.timestamptz(4)), pg::unix_usecs(*r.timestamptz(5))},
        r.text(6),
        r.bytea(7)};
  });
  return stored;
}

// checkpoint / complete / abandon: `changed` is how many rows their statement (which matches
// only an in-progress key with the caller's attempt) touched. None: say why, from the row.
void explain_unchanged(pg::Spi& spi, const Key& key, std::uint64_t changed, const std::optional<std::int64_t>& attempt,
                       const char* operation) {
  if (changed > 0) return;
  std::optional<Stored> stored = lock_key(spi, key);
  if (!stored) core::throw_unknown_key(key.scope, key.key);
  core::check_attempt(stored->row, attempt ? &*attempt : nullptr, operation);
  throw core::Error(core::sqlstate::internal_error, std::string(operation) + " changed no row");
}

// The WHERE clause of those statements: the key, in progress, and (when given, as $4) the attempt.
#define FY_IN_PROGRESS_KEY                                                               \
  " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2"       \
  "   AND key OPERATOR(pg_catalog.=) $3 AND status OPERATOR(pg_catalog.=) 'in_progress'" \
  "   AND ($4::pg_catalog.int8 IS NULL OR attempt OPERATOR(pg_catalog.=) $4)"

}  // namespace
}  // namespace fy

using namespace fy;

// idem_begin(tenant, scope, key, request_digest, lock_ttl, retain) -> (status, recovery_point, response, attempt)
FY_FUNCTION(fy_idem_begin) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.idempotency_keys (tenant_id, scope, key, request_digest, status, attempt,"
      "   locked_until, lock_usecs, retain_usecs, created_at, expires_at)"
      " VALUES ($1, $2, $3, $4, 'in_progress', pg_catalog.nextval('forgeyard.idempotency_attempts'), $5, $6, $7,"
      "         $8, $9) ON CONFLICT DO NOTHING RETURNING attempt",
      {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement restart(
      "UPDATE forgeyard.idempotency_keys SET request_digest = $4, status = 'in_progress',"
      "   attempt = pg_catalog.nextval('forgeyard.idempotency_attempts'),"
      "   recovery_point = CASE WHEN $10 THEN recovery_point END,"
      "   response = NULL, completed_at = NULL, locked_until = $5, lock_usecs = $6, retain_usecs = $7,"
      "   created_at = CASE WHEN $10 THEN created_at ELSE $8 END, expires_at = $9"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND scope OPERATOR(pg_catalog.=) $2 AND key OPERATOR(pg_catalog.=) $3"
      " RETURNING attempt",
      {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID});
  const Key key = key_args(fcinfo);
  const std::string digest = *pg::bytea_arg(fcinfo, 3, "request_digest", core::max_request_digest_bytes, false, 1);
  const std::int64_t lock_ttl = pg::duration_arg(fcinfo, 4, "lock_ttl", core::max_idempotency_lock_usecs);
  const std::int64_t retain = pg::duration_arg(fcinfo, 5, "retain", core::max_idempotency_retention_usecs);
  if (retain < lock_ttl)
    throw core::Error(core::sqlstate::invalid_parameter, "retain must not be shorter than lock_ttl");
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, key.tenant);
  std::string status = "started";
  std::optional<std::string> recovery_point, response;
  std::int64_t attempt = 0;
  auto insert_key = [&] {
    return spi.run(insert,
                   {key.t, key.s, key.k, pg::bytea_value(digest), pg::timestamptz_value(now + lock_ttl),
                    pg::int8_value(lock_ttl), pg::int8_value(retain), pg::timestamptz_value(now),
                    pg::timestamptz_value(now + retain)},
                   [&](const pg::Row& r) { attempt = *r.int8(1); }) > 0;
  };
  // A new attempt on the existing row; `resume` keeps its recovery point (a take-over).
  auto restart_key = [&](bool resume) {
    spi.run(restart,
            {key.t, key.s, key.k, pg::bytea_value(digest), pg::timestamptz_value(now + lock_ttl),
             pg::int8_value(lock_ttl), pg::int8_value(retain), pg::timestamptz_value(now),
             pg::timestamptz_value(now + retain), pg::bool_value(resume)},
            [&](const pg::Row& r) { attempt = *r.int8(1); });
  };
  // A new key is one INSERT. If the key exists, or a concurrent first begin holds it uncommitted
  // (the INSERT waits for that transaction, then does nothing if it committed), decide on the
  // locked row.
  while (!insert_key()) {
    std::optional<Stored> stored = lock_key(spi, key);
    if (!stored) continue;  // deleted meanwhile (abandon, purge): insert again
    switch (core::decide_begin(&stored->row, digest, pg::unix_usecs(now))) {
      case core::BeginAction::start:  // past its retention: the key counts as unused
        restart_key(false);
        break;
      case core::BeginAction::take_over:
        recovery_point = stored->recovery_point;
        restart_key(true);
        break;
      case core::BeginAction::replay:
        status = "replay";
        attempt = stored->row.attempt;
        recovery_point = stored->recovery_point;
        response = stored->response;
        break;
      case core::BeginAction::in_progress:
        core::throw_key_in_progress(key.key, stored->row.attempt);
      case core::BeginAction::mismatch:
        core::throw_key_mismatch(key.key);
    }
    break;
  }
  spi.finish();

  pg::TableResult out(fcinfo);
  out.add_row({pg::text_value(status), pg::optional_text_value(recovery_point), pg::optional_bytea_value(response),
               pg::int8_value(attempt)});
  return (Datum)0;
}

// idem_checkpoint(tenant, scope, key, recovery_point, attempt): records progress, extends the lock.
FY_FUNCTION(fy_idem_checkpoint) {
  static pg::Statement save(
      "UPDATE forgeyard.idempotency_keys SET recovery_point = $5,"
      "   locked_until = $6 OPERATOR(pg_catalog.+) (lock_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval),"
      "   expires_at = GREATEST(expires_at,"
      "     $6 OPERATOR(pg_catalog.+) (lock_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval))" FY_IN_PROGRESS_KEY,
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID});
  const Key key = key_args(fcinfo);
  const std::string recovery_point = *pg::text_arg(fcinfo, 3, "recovery_point", core::max_recovery_point_bytes, false);
  const std::optional<std::int64_t> attempt = pg::optional_int8_arg(fcinfo, 4);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, key.tenant);
  const std::uint64_t changed =
      spi.run(save, {key.t, key.s, key.k, attempt ? pg::int8_value(*attempt) : pg::null_value(),
                     pg::text_value(recovery_point), pg::timestamptz_value(now)});
  explain_unchanged(spi, key, changed, attempt, "checkpoint");
  spi.finish();
  return (Datum)0;
}

// idem_complete(tenant, scope, key, response, attempt): stores the response; later begins replay it.
FY_FUNCTION(fy_idem_complete) {
  static pg::Statement complete(
      "UPDATE forgeyard.idempotency_keys SET status = 'completed', response = $5, completed_at = $6, locked_until = $6,"
      "   expires_at = $6 OPERATOR(pg_catalog.+) (retain_usecs OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)" FY_IN_PROGRESS_KEY,
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, BYTEAOID, TIMESTAMPTZOID});
  const Key key = key_args(fcinfo);
  const std::optional<std::string> response = pg::bytea_arg(fcinfo, 3, "response", core::max_response_bytes, true);
  const std::optional<std::int64_t> attempt = pg::optional_int8_arg(fcinfo, 4);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, key.tenant);
  const std::uint64_t changed =
      spi.run(complete, {key.t, key.s, key.k, attempt ? pg::int8_value(*attempt) : pg::null_value(),
                         pg::optional_bytea_value(response), pg::timestamptz_value(now)});
  explain_unchanged(spi, key, changed, attempt, "complete");
  spi.finish();
  return (Datum)0;
}

// idem_abandon(tenant, scope, key, attempt): gives the key up so that the next begin starts afresh.
FY_FUNCTION(fy_idem_abandon) {
  static pg::Statement remove("DELETE FROM forgeyard.idempotency_keys" FY_IN_PROGRESS_KEY,
                              {TEXTOID, TEXTOID, TEXTOID, INT8OID});
  const Key key = key_args(fcinfo);
  const std::optional<std::int64_t> attempt = pg::optional_int8_arg(fcinfo, 3);
  pg::Spi spi;
  check_tenant(spi, key.tenant);
  const std::uint64_t changed =
      spi.run(remove, {key.t, key.s, key.k, attempt ? pg::int8_value(*attempt) : pg::null_value()});
  explain_unchanged(spi, key, changed, attempt, "abandon");
  spi.finish();
  return (Datum)0;
}

#undef FY_IN_PROGRESS_KEY

// idem_status(tenant, scope, key) -> (status, attempt, recovery_point, locked_until, expires_at); for operators.
FY_FUNCTION(fy_idem_status) {
  static pg::Statement read(
      "SELECT CASE WHEN i.expires_at OPERATOR(pg_catalog.<=) $4 AND (i.status OPERATOR(pg_catalog.=) 'completed'"
      "              OR i.locked_until OPERATOR(pg_catalog.<=) $4) THEN 'expired' ELSE i.status END,"
      "       i.attempt, i.recovery_point, i.locked_until, i.expires_at"
      "  FROM forgeyard.idempotency_keys i"
      " WHERE i.tenant_id OPERATOR(pg_catalog.=) $1 AND i.scope OPERATOR(pg_catalog.=) $2"
      "   AND i.key OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID});
  const Key key = key_args(fcinfo);
  const TimestampTz now = pg::now();
  struct Status {
    std::string status;
    std::int64_t attempt;
    std::optional<std::string> recovery_point;
    TimestampTz locked_until, expires_at;
  };
  std::optional<Status> found;
  pg::Spi spi;
  check_tenant(spi, key.tenant);
  spi.run(read, {key.t, key.s, key.k, pg::timestamptz_value(now)}, [&](const pg::Row& r) {
    found = Status{*r.text(1), *r.int8(2), r.text(3), *r.timestamptz(4), *r.timestamptz(5)};
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  if (found)
    out.add_row({pg::text_value(found->status), pg::int8_value(found->attempt),
                 pg::optional_text_value(found->recovery_point), pg::timestamptz_value(found->locked_until),
                 pg::timestamptz_value(found->expires_at)});
  return (Datum)0;
}

// idem_purge(max_keys, tenant) -> keys deleted whose retention ended. Bounded; safe from several places.
FY_FUNCTION(fy_idem_purge) {
  const std::int32_t max_keys = pg::int4_arg(fcinfo, 0, "max_keys");
  if (max_keys <= 0) throw core::Error(core::sqlstate::invalid_parameter, "max_keys must be positive");
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 1, "tenant", core::max_tenant_bytes);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::uint64_t purged = maintenance::purge_idempotency_keys(spi, now, max_keys, tenant);
  spi.finish();
  return Int32GetDatum(static_cast<std::int32_t>(purged));
}

std::uint64_t fy::maintenance::purge_idempotency_keys(pg::Spi& spi, TimestampTz now, std::int32_t max_rows,
                                                      const Tenant& tenant) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.idempotency_keys i USING ("
      "  SELECT e.tenant_id, e.scope, e.key FROM forgeyard.idempotency_keys e"
      "   WHERE e.expires_at OPERATOR(pg_catalog.<=) $1"
      "     AND (e.status OPERATOR(pg_catalog.=) 'completed' OR e.locked_until OPERATOR(pg_catalog.<=) $1)"
      "     AND ($3::pg_catalog.text IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) $3)"
      "   ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) d"
      " WHERE i.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND i.scope OPERATOR(pg_catalog.=) d.scope"
      "   AND i.key OPERATOR(pg_catalog.=) d.key",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(now), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}
