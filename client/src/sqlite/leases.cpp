#include "sqlite/leases.hpp"

#include <algorithm>

#include "core/core.hpp"
#include "error_map.hpp"
#include "lease_state.hpp"

namespace forgeyard::detail {

namespace {

using fy::core::max_owner_bytes;
using fy::core::max_resource_bytes;
using fy::core::max_tenant_bytes;

void check_key(std::string_view tenant, std::string_view resource) {
  fy::core::check_name("tenant", true, tenant, max_tenant_bytes);
  fy::core::check_name("resource", true, resource, max_resource_bytes);
}

std::int64_t check_ttl(Duration ttl) {
  return fy::core::check_duration("ttl", {0, 0, ttl.count()}, fy::core::max_lease_ttl_usecs);
}

// fy::core::is_live as SQL over the row, with ?1 = now.
const std::string& live_grant() {
  static const std::string sql = fy::core::live_lease_sql("?1");
  return sql;
}

}  // namespace

LeaseGrant SqliteLeases::acquire(std::string_view tenant, std::string_view resource, std::string_view owner,
                                 Duration ttl) {
  return session_.measure("lease.acquire", [&] {
    return core_guarded([&] {
      check_key(tenant, resource);
      fy::core::check_name("owner", true, owner, max_owner_bytes);
      const std::int64_t ttl_us = check_ttl(ttl);
      LeaseGrant grant;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        std::optional<fy::core::LeaseRow> current;
        {
          auto q = db.query(
              "SELECT owner, epoch, expires_at, released_at IS NOT NULL, reaped_at IS NOT NULL FROM leases"
              " WHERE tenant_id = ?1 AND resource = ?2");
          q.bind(1, tenant).bind(2, resource);
          if (q.step())
            current = fy::core::LeaseRow{q.text(0), q.int64(1), q.int64(2), q.int64(3) != 0, q.int64(4) != 0};
        }
        const auto decision = fy::core::decide_acquire(current ? &*current : nullptr, owner, now);
        std::int64_t expires_at = now + ttl_us;
        using fy::core::AcquireAction;
        switch (decision.action) {
          case AcquireAction::contended:
            grant = {false, current->epoch, current->owner, from_unix_usecs(current->expires_at)};
            return;
          case AcquireAction::insert:
          case AcquireAction::take_over:
            db.query(
                  "INSERT INTO leases (tenant_id, resource, owner, epoch, acquired_at, expires_at)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                  " ON CONFLICT (tenant_id, resource) DO UPDATE SET owner = excluded.owner,"
                  " epoch = excluded.epoch, acquired_at = excluded.acquired_at,"
                  " expires_at = excluded.expires_at, released_at = NULL, reaped_at = NULL")
                .bind(1, tenant)
                .bind(2, resource)
                .bind(3, owner)
                .bind(4, decision.epoch)
                .bind(5, now)
                .bind(6, expires_at)
                .run();
            break;
          case AcquireAction::extend:  // never shortened: a keeper may hold it for longer
            expires_at = std::max(expires_at, current->expires_at);
            db.query("UPDATE leases SET expires_at = ?3 WHERE tenant_id = ?1 AND resource = ?2")
                .bind(1, tenant)
                .bind(2, resource)
                .bind(3, expires_at)
                .run();
            break;
        }
        grant = {true, decision.epoch, std::string(owner), from_unix_usecs(expires_at)};
      });
      return grant;
    });
  });
}

TimePoint SqliteLeases::renew(std::string_view tenant, std::string_view resource, std::int64_t epoch, Duration ttl) {
  return session_.measure("lease.renew", [&] {
    return core_guarded([&] {
      check_key(tenant, resource);
      const std::int64_t ttl_us = check_ttl(ttl);
      std::int64_t expires_at = 0;
      session_.write([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        expires_at = now + ttl_us;
        const int renewed = db.query_text(
                                  "UPDATE leases SET expires_at = ?4"
                                  " WHERE tenant_id = ?2 AND resource = ?3 AND epoch = ?5 AND " +
                                  live_grant())
                                .bind(1, now)
                                .bind(2, tenant)
                                .bind(3, resource)
                                .bind(4, expires_at)
                                .bind(5, epoch)
                                .run();
        if (renewed == 0) fy::core::throw_stale_lease(resource, epoch);
      });
      return from_unix_usecs(expires_at);
    });
  });
}

bool SqliteLeases::release(std::string_view tenant, std::string_view resource, std::int64_t epoch) {
  return session_.measure("lease.release", [&] {
    return core_guarded([&] {
      check_key(tenant, resource);
      bool released = false;
      session_.write([&](Db& db) {
        released = db.query_text(
                         "UPDATE leases SET released_at = ?1"
                         " WHERE tenant_id = ?2 AND resource = ?3 AND epoch = ?4 AND " +
                         live_grant())
                       .bind(1, session_.now_usecs())
                       .bind(2, tenant)
                       .bind(3, resource)
                       .bind(4, epoch)
                       .run() > 0;
      });
      return released;
    });
  });
}

void SqliteLeases::fence(std::string_view tenant, std::string_view resource, std::int64_t epoch) {
  // The write transaction (BEGIN IMMEDIATE) holds SQLite's write lock until it ends, so the
  // grant cannot change hands before the caller's transaction commits or rolls back.
  session_.measure("lease.fence", [&] {
    core_guarded([&] {
      check_key(tenant, resource);
      session_.write([&](Db& db) {
        auto q = db.query_text("SELECT 1 FROM leases WHERE tenant_id = ?2 AND resource = ?3 AND epoch = ?4 AND " +
                               live_grant());
        q.bind(1, session_.now_usecs()).bind(2, tenant).bind(3, resource).bind(4, epoch);
        if (!q.step()) fy::core::throw_stale_lease(resource, epoch);
      });
    });
  });
}

std::optional<LeaseInfo> SqliteLeases::get(std::string_view tenant, std::string_view resource,
                                           ReadClass /*read: one file*/) {
  return session_.measure("lease.get", [&] {
    return core_guarded([&] {
      check_key(tenant, resource);
      std::optional<LeaseInfo> info;
      session_.read([&](Db& db) {
        const std::int64_t now = session_.now_usecs();
        auto q = db.query(
            "SELECT owner, epoch, acquired_at, expires_at, released_at IS NOT NULL, reaped_at IS NOT NULL"
            " FROM leases WHERE tenant_id = ?1 AND resource = ?2");
        q.bind(1, tenant).bind(2, resource);
        if (!q.step()) return;
        const std::int64_t expires_at = q.int64(3);
        const fy::core::LeaseRow row{q.text(0), q.int64(1), expires_at, q.int64(4) != 0, q.int64(5) != 0};
        const std::string state = fy::core::lease_state(row, now);
        info = LeaseInfo{row.owner, row.epoch, from_unix_usecs(q.int64(2)), from_unix_usecs(expires_at),
                         parse_lease_state(state)};
      });
      return info;
    });
  });
}

std::vector<ReapedLease> SqliteLeases::reap(int max_leases, std::optional<std::string> tenant) {
  return session_.measure("lease.reap", [&] {
    return core_guarded([&] {
      if (max_leases <= 0) throw Error(sqlstate::invalid_parameter, "max_leases must be positive");
      if (tenant) fy::core::check_name("tenant", true, *tenant, max_tenant_bytes);
      std::vector<ReapedLease> out;
      session_.write([&](Db& db) {
        out.clear();
        auto q = db.query(
            "UPDATE leases SET reaped_at = ?1"
            " WHERE (tenant_id, resource) IN (SELECT tenant_id, resource FROM leases"
            "   WHERE released_at IS NULL AND reaped_at IS NULL AND expires_at <= ?1"
            "     AND (?3 IS NULL OR tenant_id = ?3) ORDER BY expires_at LIMIT ?2)"
            " RETURNING tenant_id, resource, epoch, owner, expires_at");
        q.bind(1, session_.now_usecs()).bind(2, static_cast<std::int64_t>(max_leases));
        if (tenant)
          q.bind(3, *tenant);
        else
          q.bind_null(3);
        while (q.step()) out.push_back({q.text(0), q.text(1), q.int64(2), q.text(3), from_unix_usecs(q.int64(4))});
      });
      return out;
    });
  });
}

}  // namespace forgeyard::detail
