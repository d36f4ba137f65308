// Leases with fencing epochs (docs/sql-api.md#leases).
#include <optional>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "tenant.hpp"

namespace fy {
namespace {

using core::max_owner_bytes;
using core::max_resource_bytes;
using core::max_tenant_bytes;

std::string tenant_arg(FunctionCallInfo fcinfo) {
  return pg::name_arg(fcinfo, 0, "tenant", max_tenant_bytes);
}
std::string resource_arg(FunctionCallInfo fcinfo) {
  return pg::name_arg(fcinfo, 1, "resource", max_resource_bytes);
}

// core::is_live as SQL over the row, with $4 = now.
std::string live_grant() {
  return core::live_lease_sql("$4", "OPERATOR(pg_catalog.>)");
}

}  // namespace
}  // namespace fy

using namespace fy;

// lease_acquire(tenant, resource, owner, ttl) -> (acquired, epoch, holder, expires_at)
FY_FUNCTION(fy_lease_acquire) {
  static pg::Statement lock(
      "SELECT l.owner, l.epoch, l.expires_at, l.released_at IS NOT NULL, l.reaped_at IS NOT NULL FROM forgeyard.leases l"
      " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.resource OPERATOR(pg_catalog.=) $2 FOR UPDATE",
      {TEXTOID, TEXTOID});
  static pg::Statement insert(
      "INSERT INTO forgeyard.leases (tenant_id, resource, owner, epoch, acquired_at, expires_at)"
      " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement take(
      "UPDATE forgeyard.leases SET owner = $3, epoch = $4, acquired_at = $5, expires_at = $6,"
      " released_at = NULL, reaped_at = NULL"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  static pg::Statement extend(
      "UPDATE forgeyard.leases SET expires_at = GREATEST(expires_at, $3)"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2 RETURNING expires_at",
      {TEXTOID, TEXTOID, TIMESTAMPTZOID});

  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::string owner = pg::name_arg(fcinfo, 2, "owner", max_owner_bytes);
  const std::int64_t ttl = pg::duration_arg(fcinfo, 3, "ttl", core::max_lease_ttl_usecs);
  const TimestampTz now = pg::now();
  const TimestampTz expires_at = now + ttl;

  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value t = pg::text_value(tenant), r = pg::text_value(resource), o = pg::text_value(owner);

  // The decision is the shared core rule (the SQLite shim makes the same one); times in core
  // are microseconds since 1970.
  const std::int64_t now_us = pg::unix_usecs(now);
  bool acquired = true;
  std::int64_t epoch = 0;
  std::string holder = owner;
  TimestampTz holder_expires = expires_at;
  for (;;) {
    std::optional<core::LeaseRow> current;
    TimestampTz current_expires = 0;
    spi.run(lock, {t, r}, [&](const pg::Row& row) {
      current_expires = *row.timestamptz(3);
      current = core::LeaseRow{row.text(1).value_or(""), *row.int8(2), pg::unix_usecs(current_expires), *row.boolean(4),
                               *row.boolean(5)};
    });
    const core::AcquireDecision decision = core::decide_acquire(current ? &*current : nullptr, owner, now_us);
    epoch = decision.epoch;
    switch (decision.action) {
      case core::AcquireAction::insert:
        // A concurrent first grant makes the insert a no-op; the loop then locks its row.
        if (spi.run(insert, {t, r, o, pg::int8_value(epoch), pg::timestamptz_value(now),
                             pg::timestamptz_value(expires_at)}) == 0)
          continue;
        break;
      case core::AcquireAction::take_over:
        spi.run(take, {t, r, o, pg::int8_value(epoch), pg::timestamptz_value(now), pg::timestamptz_value(expires_at)});
        break;
      case core::AcquireAction::extend:  // never shortened: a keeper may hold it for longer
        spi.run(extend, {t, r, pg::timestamptz_value(expires_at)},
                [&](const pg::Row& row) { holder_expires = *row.timestamptz(1); });
        break;
      case core::AcquireAction::contended:
        acquired = false, holder = current->owner, holder_expires = current_expires;
        break;
    }
    break;
  }
  spi.finish();

  pg::TableResult out(fcinfo);
  out.add_row(
      {pg::bool_value(acquired), pg::int8_value(epoch), pg::text_value(holder), pg::timestamptz_value(holder_expires)});
  return (Datum)0;
}

// lease_renew(tenant, resource, epoch, ttl) -> new expires_at, FY001 unless epoch is the live grant
FY_FUNCTION(fy_lease_renew) {
  static pg::Statement renew(
      "UPDATE forgeyard.leases SET expires_at = $5"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2"
      "   AND epoch OPERATOR(pg_catalog.=) $3 AND " +
          live_grant(),
      {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::int64_t ttl = pg::duration_arg(fcinfo, 3, "ttl", core::max_lease_ttl_usecs);
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::uint64_t renewed = spi.run(renew, {pg::text_value(tenant), pg::text_value(resource), pg::int8_value(epoch),
                                                pg::timestamptz_value(now), pg::timestamptz_value(now + ttl)});
  spi.finish();
  if (renewed == 0) core::throw_stale_lease(resource, epoch);
  return TimestampTzGetDatum(now + ttl);
}

// lease_release(tenant, resource, epoch) -> whether epoch was the live grant. The row stays, so
// its epoch is never handed out again.
FY_FUNCTION(fy_lease_release) {
  static pg::Statement release(
      "UPDATE forgeyard.leases SET released_at = $4"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2"
      "   AND epoch OPERATOR(pg_catalog.=) $3 AND " +
          live_grant(),
      {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::uint64_t released = spi.run(
      release, {pg::text_value(tenant), pg::text_value(resource), pg::int8_value(epoch), pg::timestamptz_value(now)});
  spi.finish();
  return BoolGetDatum(released > 0);
}

// lease_fence(tenant, resource, epoch): FY001 unless epoch is the live grant. The KEY SHARE lock
// it takes blocks lease_acquire's FOR UPDATE until the caller's transaction ends, while the
// holder's own renewals (no-key updates) still go through.
FY_FUNCTION(fy_lease_fence) {
  static pg::Statement fence(
      "SELECT 1 FROM forgeyard.leases"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND resource OPERATOR(pg_catalog.=) $2"
      "   AND epoch OPERATOR(pg_catalog.=) $3 AND " +
          live_grant() + " FOR KEY SHARE",
      {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::uint64_t live = spi.run(
      fence, {pg::text_value(tenant), pg::text_value(resource), pg::int8_value(epoch), pg::timestamptz_value(now)});
  spi.finish();
  if (live == 0) core::throw_stale_lease(resource, epoch);
  return (Datum)0;
}

// lease_get(tenant, resource) -> (owner, epoch, acquired_at, expires_at, state), no row if never leased
FY_FUNCTION(fy_lease_get) {
  static pg::Statement get(
      "SELECT l.owner, l.epoch, l.acquired_at, l.expires_at, l.released_at IS NOT NULL, l.reaped_at IS NOT NULL"
      "  FROM forgeyard.leases l"
      " WHERE l.tenant_id OPERATOR(pg_catalog.=) $1 AND l.resource OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const TimestampTz now = pg::now();

  std::optional<core::LeaseRow> lease;
  TimestampTz acquired_at = 0, expires_at = 0;
  pg::Spi spi;
  check_tenant(spi, tenant);
  spi.run(get, {pg::text_value(tenant), pg::text_value(resource)}, [&](const pg::Row& row) {
    acquired_at = *row.timestamptz(3);
    expires_at = *row.timestamptz(4);
    lease = core::LeaseRow{row.text(1).value_or(""), *row.int8(2), pg::unix_usecs(expires_at), *row.boolean(5),
                           *row.boolean(6)};
  });
  spi.finish();

  pg::TableResult out(fcinfo);
  if (lease)
    out.add_row({pg::text_value(lease->owner), pg::int8_value(lease->epoch), pg::timestamptz_value(acquired_at),
                 pg::timestamptz_value(expires_at), pg::text_value(core::lease_state(*lease, pg::unix_usecs(now)))});
  return (Datum)0;
}

// lease_reap(max_leases, tenant) -> grants that expired without release, each returned once.
// SKIP LOCKED lets several reapers run at once without waiting on each other.
FY_FUNCTION(fy_lease_reap) {
  static pg::Statement reap(
      "UPDATE forgeyard.leases l SET reaped_at = $1"
      "  FROM (SELECT e.tenant_id, e.resource FROM forgeyard.leases e"
      "         WHERE e.released_at IS NULL AND e.reaped_at IS NULL"
      "           AND e.expires_at OPERATOR(pg_catalog.<=) $1"
      "           AND ($3::pg_catalog.text IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) $3)"
      "         ORDER BY e.expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) d"
      " WHERE l.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND l.resource OPERATOR(pg_catalog.=) d.resource"
      " RETURNING l.tenant_id, l.resource, l.epoch, l.owner, l.expires_at",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  const std::int32_t max_leases = pg::int4_arg(fcinfo, 0, "max_leases");
  if (max_leases <= 0) throw core::Error(core::sqlstate::invalid_parameter, "max_leases must be positive");
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 1, "tenant", max_tenant_bytes);
  const TimestampTz now = pg::now();

  struct Reaped {
    std::string tenant, resource, holder;
    std::int64_t epoch;
    TimestampTz expired_at;
  };
  std::vector<Reaped> reaped;
  pg::Spi spi;
  check_tenant(spi, tenant);
  spi.run(reap, {pg::timestamptz_value(now), pg::int4_value(max_leases), pg::optional_text_value(tenant)},
          [&](const pg::Row& row) {
            reaped.push_back({*row.text(1), *row.text(2), row.text(4).value_or(""), *row.int8(3), *row.timestamptz(5)});
          });
  spi.finish();

  pg::TableResult out(fcinfo);
  for (const Reaped& r : reaped)
    out.add_row({pg::text_value(r.tenant), pg::text_value(r.resource), pg::int8_value(r.epoch),
                 pg::text_value(r.holder), pg::timestamptz_value(r.expired_at)});
  return (Datum)0;
}
