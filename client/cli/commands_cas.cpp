// cas enable | get | update (versioned rows) and idem status | purge (idempotency keys).
#include <iostream>
#include <optional>

#include "cli.hpp"

namespace forgeyard::cli {

namespace {
struct CasArgs {
  std::string table;
  std::int64_t expected = 0;
  std::vector<std::string> key, set, null;
};
}  // namespace

void add_cas_commands(CLI::App& app, Commands& commands) {
  CLI::App* cas = app.add_subcommand("cas", "versioned rows: compare-and-set");
  cas->require_subcommand(1);
  auto a = std::make_shared<CasArgs>();

  CLI::App* enable = cas->add_subcommand("enable", "put a table under version control");
  enable->add_option("TABLE", a->table, "schema.table")->required();
  commands.on(enable, [a](Context& ctx) {
    ctx.store().versioned_rows().enable(a->table);
    std::cout << "versioned=" << a->table << "\n";
    return 0;
  });

  CLI::App* get = cas->add_subcommand("get", "a versioned row and its version");
  get->add_option("TABLE", a->table, "schema.table")->required();
  add_repeated(*get, "--key", a->key, "a key column and its value (repeat for each)", "COL=VALUE");
  commands.on(get, [a](Context& ctx) {
    auto row = ctx.store().versioned_rows().get(a->table, parse_fields(a->key, {}, "key"), ctx.read());
    if (!row) {
      std::cout << "found=false\n";
      return 1;
    }
    std::cout << "entity_version=" << row->version << "\n";
    for (const auto& [column, value] : row->values) {
      std::cout << column << "=";
      print_value(value);
      std::cout << "\n";
    }
    return 0;
  });

  CLI::App* update = cas->add_subcommand("update", "compare-and-set from version EXPECTED");
  update->add_option("TABLE", a->table, "schema.table")->required();
  update->add_option("EXPECTED", a->expected, "the version the row must still have")->required();
  add_repeated(*update, "--key", a->key, "a key column and its value (repeat for each)", "COL=VALUE");
  add_repeated(*update, "--set", a->set, "a column to change (repeat for each)", "COL=VALUE");
  add_repeated(*update, "--null", a->null, "a column to set to NULL (repeat for each)", "COL");
  commands.on(update, [a](Context& ctx) {
    const Fields key = parse_fields(a->key, {}, "key");
    const Fields changes = parse_fields(a->set, a->null, "set");
    const std::int64_t version = ctx.store().versioned_rows().update(a->table, key, a->expected, changes);
    std::cout << "entity_version=" << version << "\n";
    return 0;
  });
}

namespace {
struct IdemArgs {
  std::string tenant, scope, key;
  int max = 1000;
};
}  // namespace

void add_idem_commands(CLI::App& app, Commands& commands) {
  CLI::App* idem = app.add_subcommand("idem", "idempotency keys");
  idem->require_subcommand(1);
  auto a = std::make_shared<IdemArgs>();

  CLI::App* status = idem->add_subcommand("status", "state of an idempotency key");
  status->add_option("TENANT", a->tenant, "the tenant")->required();
  status->add_option("SCOPE", a->scope, "the operation the key belongs to")->required();
  status->add_option("KEY", a->key, "the idempotency key")->required();
  commands.on(status, [a](Context& ctx) {
    auto s = ctx.store().idempotency().status({a->tenant, a->scope, a->key}, ctx.read());
    if (!s) {
      std::cout << "status=none\n";
      return 1;
    }
    std::cout << "status=" << s->status << "\nattempt=" << s->attempt
              << "\nrecovery_point=" << s->recovery_point.value_or("") << "\nlocked_until=" << iso(s->locked_until)
              << "\nexpires_at=" << iso(s->expires_at) << "\n";
    return 0;
  });

  CLI::App* purge = idem->add_subcommand("purge", "delete keys whose retention ended");
  purge->add_option("--max", a->max, "keys at most")->type_name("N")->capture_default_str();
  purge->add_option("--tenant", a->tenant, "only this tenant")->type_name("T");
  commands.on(purge, [a](Context& ctx) {
    const int purged = ctx.store().idempotency().purge(
        a->max, a->tenant.empty() ? std::nullopt : std::optional<std::string>(a->tenant));
    std::cout << "purged=" << purged << "\n";
    return 0;
  });
}

}  // namespace forgeyard::cli
