// storage install: forgeyard into a PostgreSQL database, either edition, or the PL/pgSQL edition's
// scripts for psql and pg_tle (docs/operations.md, "Installing forgeyard"). Like backup, it works
// on the store's URL: there is no store to open before it has run.
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

namespace forgeyard::cli {

void add_install_command(CLI::App& storage, Commands& commands) {
  struct Install {
    std::string edition;
    std::string print;
    bool json = false;
  };
  auto i = std::make_shared<Install>();
  CLI::App* install = storage.add_subcommand(
      "install", "install or upgrade forgeyard in a PostgreSQL database (C++ or PL/pgSQL edition)");
  install->add_option("--edition", i->edition, "cpp or plpgsql (default: cpp where the server offers it)")
      ->type_name("cpp|plpgsql")
      ->check(CLI::IsMember({"cpp", "plpgsql"}).description(""));
  install->add_option("--print", i->print, "print the script instead: plpgsql (for psql -f) or pg_tle")
      ->type_name("plpgsql|pg_tle")
      ->check(CLI::IsMember({"plpgsql", "pg_tle"}).description(""));
  install->add_flag("--json", i->json, "print one JSON object");
  commands.on(install, [i](Context& ctx) {
    if (!i->print.empty()) {
      if (!i->edition.empty() && i->edition != "plpgsql")
        throw Usage("--print writes the PL/pgSQL edition's scripts; the C++ edition installs with CREATE EXTENSION");
      std::cout << install_script(i->print);
      return static_cast<int>(exit_done);
    }
    InstallOptions options;
    if (!i->edition.empty()) options.edition = parse_edition(i->edition);
    options.progress = progress_on_stderr();
    const InstallResult r = install_store(ctx.url, options);
    Output out(i->json);
    out.field("edition", std::string(to_string(r.edition)));
    out.field("from_version", r.from_version);
    out.field("version", r.version);
    out.field("action", r.from_version.empty() ? (r.changed() ? "installed" : "none")
                        : r.changed()          ? "upgraded"
                                               : "unchanged");
    std::string steps;
    for (const std::string& step : r.steps) steps += (steps.empty() ? "" : ",") + step;
    out.field("steps", steps);
    out.print();
    return static_cast<int>(exit_done);
  });
}

}  // namespace forgeyard::cli
