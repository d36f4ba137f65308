// lease acquire | renew | release | status | reap (docs/sql-api.md, "Leases").
#include <iostream>
#include <optional>

#include "cli.hpp"

namespace forgeyard::cli {

namespace {
struct LeaseArgs {
  std::string tenant, resource, owner;
  std::int64_t epoch = 0;
  std::string ttl = "30s";
  int max = 100;
};

void add_target(CLI::App& c, LeaseArgs& a) {
  c.add_option("TENANT", a.tenant, "the tenant")->required();
  c.add_option("RESOURCE", a.resource, "what the lease guards")->required();
}
void add_ttl(CLI::App& c, LeaseArgs& a) {
  c.add_option("--ttl", a.ttl, "how long the grant lives")->type_name("D")->capture_default_str();
}
}  // namespace

void add_lease_commands(CLI::App& app, Commands& commands) {
  CLI::App* lease = app.add_subcommand("lease", "leases with fencing epochs");
  lease->require_subcommand(1);

  auto a = std::make_shared<LeaseArgs>();
  CLI::App* acquire = lease->add_subcommand("acquire", "take the lease");
  add_target(*acquire, *a);
  acquire->add_option("OWNER", a->owner, "who holds it")->required();
  add_ttl(*acquire, *a);
  commands.on(acquire, [a](Context& ctx) {
    auto g = ctx.store().leases().acquire(a->tenant, a->resource, a->owner, parse_duration(a->ttl));
    std::cout << "acquired=" << (g.acquired ? "true" : "false") << "\nepoch=" << g.epoch << "\nholder=" << g.holder
              << "\nexpires_at=" << iso(g.expires_at) << "\n";
    return g.acquired ? 0 : 1;
  });

  CLI::App* renew = lease->add_subcommand("renew", "extend the live grant");
  add_target(*renew, *a);
  renew->add_option("EPOCH", a->epoch, "the grant's fencing epoch")->required();
  add_ttl(*renew, *a);
  commands.on(renew, [a](Context& ctx) {
    auto expires = ctx.store().leases().renew(a->tenant, a->resource, a->epoch, parse_duration(a->ttl));
    std::cout << "expires_at=" << iso(expires) << "\n";
    return 0;
  });

  CLI::App* release = lease->add_subcommand("release", "give it up");
  add_target(*release, *a);
  release->add_option("EPOCH", a->epoch, "the grant's fencing epoch")->required();
  commands.on(release, [a](Context& ctx) {
    bool released = ctx.store().leases().release(a->tenant, a->resource, a->epoch);
    std::cout << "released=" << (released ? "true" : "false") << "\n";
    return released ? 0 : 1;
  });

  CLI::App* status = lease->add_subcommand("status", "owner, epoch, expiry and state");
  add_target(*status, *a);
  commands.on(status, [a](Context& ctx) {
    auto info = ctx.store().leases().get(a->tenant, a->resource, ctx.read());
    if (!info) {
      std::cout << "state=none\n";
      return 1;
    }
    std::cout << "state=" << to_string(info->state) << "\nowner=" << info->owner << "\nepoch=" << info->epoch
              << "\nacquired_at=" << iso(info->acquired_at) << "\nexpires_at=" << iso(info->expires_at) << "\n";
    return 0;
  });

  CLI::App* reap = lease->add_subcommand("reap", "report grants that expired without release");
  reap->add_option("--max", a->max, "grants at most")->type_name("N")->capture_default_str();
  reap->add_option("--tenant", a->tenant, "only this tenant")->type_name("T");
  commands.on(reap, [a](Context& ctx) {
    auto reaped =
        ctx.store().leases().reap(a->max, a->tenant.empty() ? std::nullopt : std::optional<std::string>(a->tenant));
    for (const auto& r : reaped)
      std::cout << "tenant=" << r.tenant << " resource=" << r.resource << " epoch=" << r.epoch << " holder=" << r.holder
                << " expired_at=" << iso(r.expired_at) << "\n";
    std::cout << "reaped=" << reaped.size() << "\n";
    return 0;
  });
}

}  // namespace forgeyard::cli
