// Leases with fencing epochs (docs/sql-api.md#leases).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
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

// The columns of forgeyard.leases.
struct LeaseColumns {
  int owner, epoch, acquired_at, expires_at, released_at, reaped_at;
  explicit LeaseColumns(const pg::Table& l)
      : owner(l.column("owner")),
        epoch(l.column("epoch")),
        acquired_at(l.column("acquired_at")),
        expires_at(l.column("expires_at")),
        released_at(l.column("released_at")),
        reaped_at(l.column("reaped_at")) {}
};

// The row of (tenant, resource) in the slot; false when there is none.
bool find_lease(pg::Table& l, const pg::Value& tenant, const pg::Value& resource) {
  return l.find(pg::OwnIndex::leases_pkey, {{1, pg::Compare::eq, tenant}, {2, pg::Compare::eq, resource}});
}

// Whether the row in the slot is grant `epoch` and still live at `now` (core::is_live).
bool is_live_grant(const pg::Table& l, const LeaseColumns& c, std::int64_t epoch, TimestampTz now) {
  return l.int8(c.epoch) == epoch && l.is_null(c.released_at) && l.is_null(c.reaped_at) &&
         l.timestamptz(c.expires_at) > now;
}

// Renew and release below SPI (pg/table_access.hpp), as the UPDATE ... WHERE epoch = $3 AND live
// they replace: the row is locked only if the version read qualifies (a stale caller waits on
// nobody), FOR NO KEY UPDATE (lease_fence's KEY SHARE does not stop the holder), and a newer
// version followed while locking is checked again. Sets `column` to `value`; false if the grant
// is not the live one.
bool update_live_grant(const std::string& tenant, const std::string& resource, std::int64_t epoch, TimestampTz now,
                       const char* column, const pg::Value& value) {
  pg::Access access;
  pg::Table l(access, pg::OwnTable::leases);
  const LeaseColumns c(l);
  bool updated = false;
  if (find_lease(l, pg::text_value(tenant), pg::text_value(resource)) && is_live_grant(l, c, epoch, now)) {
    const pg::Locked locked = l.lock(pg::LockMode::no_key_update, pg::Wait::block);
    if (locked == pg::Locked::as_read || (locked == pg::Locked::newer_version && is_live_grant(l, c, epoch, now))) {
      l.update({{l.column(column), value}});
      updated = true;
    }
  }
  l.finish();
  access.finish();
  return updated;
}

}  // namespace
}  // namespace fy

using namespace fy;

// lease_acquire(tenant, resource, owner, ttl) -> (acquired, epoch, holder, expires_at)
FY_FUNCTION(fy_lease_acquire) {
  static pg::Statement insert(
      "INSERT INTO forgeyard.leases (tenant_id, resource, owner, epoch, acquired_at, expires_at)"
      " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID});

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
  // are microseconds since 1970. The row is read locked FOR UPDATE below SPI (it blocks
  // lease_fence's KEY SHARE, and waits for it); only a first grant is an INSERT statement.
  const std::int64_t now_us = pg::unix_usecs(now);
  bool acquired = true;
  std::int64_t epoch = 0;
  std::string holder = owner;
  TimestampTz holder_expires = expires_at;
  for (;;) {
    bool insert_first = false;
    {
      pg::Access access;
      pg::Table l(access, pg::OwnTable::leases);
      const LeaseColumns c(l);
      std::optional<core::LeaseRow> current;
      TimestampTz current_expires = 0;
      // A row deleted while we waited for its lock is no row.
      if (find_lease(l, t, r) && l.lock(pg::LockMode::update, pg::Wait::block) != pg::Locked::skipped) {
        current_expires = l.timestamptz(c.expires_at);
        current = core::LeaseRow{l.text(c.owner).value_or(""), l.int8(c.epoch), pg::unix_usecs(current_expires),
                                 !l.is_null(c.released_at), !l.is_null(c.reaped_at)};
      }
      const core::AcquireDecision decision = core::decide_acquire(current ? &*current : nullptr, owner, now_us);
      epoch = decision.epoch;
      switch (decision.action) {
        case core::AcquireAction::insert:
          insert_first = true;
          break;
        case core::AcquireAction::take_over:
          l.update({{c.owner, o},
                    {c.epoch, pg::int8_value(epoch)},
                    {c.acquired_at, pg::timestamptz_value(now)},
                    {c.expires_at, pg::timestamptz_value(expires_at)},
                    {c.released_at, pg::null_value()},
                    {c.reaped_at, pg::null_value()}});
          break;
        case core::AcquireAction::extend:  // never shortened: a keeper may hold it for longer
          holder_expires = std::max(current_expires, expires_at);
          l.update({{c.expires_at, pg::timestamptz_value(holder_expires)}});
          break;
        case core::AcquireAction::contended:
          acquired = false, holder = current->owner, holder_expires = current_expires;
          break;
      }
      l.finish();
      access.finish();
    }
    // A concurrent first grant makes the insert a no-op; the loop then locks its row.
    if (insert_first && spi.run(insert, {t, r, o, pg::int8_value(epoch), pg::timestamptz_value(now),
                                         pg::timestamptz_value(expires_at)}) == 0)
      continue;
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
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const std::int64_t ttl = pg::duration_arg(fcinfo, 3, "ttl", core::max_lease_ttl_usecs);
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  const bool renewed = update_live_grant(tenant, resource, epoch, now, "expires_at", pg::timestamptz_value(now + ttl));
  spi.finish();
  if (!renewed) core::throw_stale_lease(resource, epoch);
  return TimestampTzGetDatum(now + ttl);
}

// lease_release(tenant, resource, epoch) -> whether epoch was the live grant. The row stays, so
// its epoch is never handed out again.
FY_FUNCTION(fy_lease_release) {
  const std::string tenant = tenant_arg(fcinfo);
  const std::string resource = resource_arg(fcinfo);
  const std::int64_t epoch = pg::int8_arg(fcinfo, 2, "epoch");
  const TimestampTz now = pg::now();

  pg::Spi spi;
  check_tenant(spi, tenant);
  const bool released = update_live_grant(tenant, resource, epoch, now, "released_at", pg::timestamptz_value(now));
  spi.finish();
  return BoolGetDatum(released);
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
