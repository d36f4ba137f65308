// storage and maintain: the store as a whole (storage status, doctor, stats: commands_ops.cpp;
// backup, restore, copy, verify: commands_backup.cpp; install: commands_install.cpp).
#include <iostream>
#include <optional>

#include "cli.hpp"

namespace forgeyard::cli {

void add_storage_commands(CLI::App& app, Commands& commands) {
  CLI::App* storage = app.add_subcommand("storage", "the store itself");
  storage->require_subcommand(1);
  // status, doctor and stats: commands_ops.cpp.
  add_backup_commands(*storage, commands);

  add_install_command(*storage, commands);

  struct Maintain {
    int max = 1000;
    std::string tenant;
  };
  auto m = std::make_shared<Maintain>();
  CLI::App* maintain = app.add_subcommand("maintain", "one bounded clean-up pass (purges, retention)");
  maintain->add_option("--max", m->max, "rows per task at most")->type_name("N")->capture_default_str();
  maintain->add_option("--tenant", m->tenant, "only this tenant")->type_name("T");
  commands.on(maintain, [m](Context& ctx) {
    for (const auto& [task, rows] :
         ctx.store().maintain(m->max, m->tenant.empty() ? std::nullopt : std::optional<std::string>(m->tenant)))
      std::cout << task << "=" << rows << "\n";
    return 0;
  });
}

}  // namespace forgeyard::cli
