// The Leases capability over the forgeyard extension's SQL API.
#include "postgres/leases.hpp"

#include "lease_state.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement acquire_sql{"fy_lease_acquire",
                              "SELECT acquired, epoch, holder, " FY_USECS(
                                  "expires_at") " FROM forgeyard.lease_acquire($1, $2, $3, $4::pg_catalog.interval)",
                              4};
const PgStatement renew_sql{"fy_lease_renew",
                            "SELECT " FY_USECS("forgeyard.lease_renew($1, $2, $3, $4::pg_catalog.interval)"), 4};
const PgStatement lease_release_sql{"fy_lease_release", "SELECT forgeyard.lease_release($1, $2, $3)", 3};
const PgStatement fence_sql{"fy_lease_fence", "SELECT forgeyard.lease_fence($1, $2, $3)", 3};
const PgStatement get_sql{"fy_lease_get",
                          "SELECT owner, epoch, " FY_USECS("acquired_at") ", " FY_USECS("expires_at") ", state"
                          " FROM forgeyard.lease_get($1, $2)",
                          2};
const PgStatement reap_sql{
    "fy_lease_reap",
    "SELECT tenant, resource, epoch, holder, " FY_USECS("expired_at") " FROM forgeyard.lease_reap($1, $2)", 2};

}  // namespace

LeaseGrant PgLeases::acquire(std::string_view tenant, std::string_view resource, std::string_view owner, Duration ttl) {
  return session_.measure("lease.acquire", [&] {
    PgResult r =
        session_.run(acquire_sql, {text_param(tenant), text_param(resource), text_param(owner), interval_param(ttl)});
    return LeaseGrant{r.boolean(0, 0), r.int8(0, 1), r.text(0, 2), from_unix_usecs(r.int8(0, 3))};
  });
}

TimePoint PgLeases::renew(std::string_view tenant, std::string_view resource, std::int64_t epoch, Duration ttl) {
  return session_.measure("lease.renew", [&] {
    PgResult r =
        session_.run(renew_sql, {text_param(tenant), text_param(resource), std::to_string(epoch), interval_param(ttl)});
    return from_unix_usecs(r.int8(0, 0));
  });
}

bool PgLeases::release(std::string_view tenant, std::string_view resource, std::int64_t epoch) {
  return session_.measure("lease.release", [&] {
    return session_.run(lease_release_sql, {text_param(tenant), text_param(resource), std::to_string(epoch)})
        .boolean(0, 0);
  });
}

void PgLeases::fence(std::string_view tenant, std::string_view resource, std::int64_t epoch) {
  session_.measure("lease.fence", [&] {
    session_.run(fence_sql, {text_param(tenant), text_param(resource), std::to_string(epoch)});
  });
}

std::optional<LeaseInfo> PgLeases::get(std::string_view tenant, std::string_view resource, ReadClass read) {
  return session_.measure("lease.get", [&]() -> std::optional<LeaseInfo> {
    PgResult r = session_.read(get_sql, {text_param(tenant), text_param(resource)}, read);
    if (r.rows() == 0) return std::nullopt;
    return LeaseInfo{r.text(0, 0), r.int8(0, 1), from_unix_usecs(r.int8(0, 2)), from_unix_usecs(r.int8(0, 3)),
                     parse_lease_state(r.text(0, 4))};
  });
}

std::vector<ReapedLease> PgLeases::reap(int max_leases, std::optional<std::string> tenant) {
  return session_.measure("lease.reap", [&] {
    PgResult r = session_.run(reap_sql, {std::to_string(max_leases), tenant});
    std::vector<ReapedLease> out;
    out.reserve(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.text(i, 1), r.int8(i, 2), r.text(i, 3), from_unix_usecs(r.int8(i, 4))});
    return out;
  });
}

}  // namespace forgeyard::detail
