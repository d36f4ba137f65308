// Installing and upgrading forgeyard in a PostgreSQL database (docs/operations.md, "Installing
// forgeyard"): the C++ edition with CREATE EXTENSION, or the PL/pgSQL edition, which loads no C,
// as a plain install by the database owner or through pg_tle (managed PostgreSQL).
#pragma once

#include "forgeyard/export.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace forgeyard {

enum class Edition { Cpp, Plpgsql };

FORGEYARD_API std::string_view to_string(Edition edition) noexcept;
// "cpp" or "plpgsql"; anything else is nullopt.
FORGEYARD_API std::optional<Edition> parse_edition(std::string_view text) noexcept;

struct InstallOptions {
  // nullopt: the C++ edition where the server offers it (pg_available_extensions), else the
  // PL/pgSQL edition.
  std::optional<Edition> edition;
  // One line for a human per step (the CLI prints it on stderr).
  std::function<void(const std::string&)> progress;
};

struct InstallResult {
  Edition edition = Edition::Cpp;
  std::string from_version;        // empty: nothing was installed
  std::string version;             // installed now
  std::vector<std::string> steps;  // the scripts run, in order ("0.8.0", "0.8.0--0.9.0")
  bool changed() const { return !steps.empty(); }
};

// Installs forgeyard at this library's version into the database of `url` (postgresql://...), or
// upgrades it there, step by step, each step in one transaction under an advisory lock, so that
// two installers never interleave and a run that stops keeps every step it finished. Safe to run
// again (nothing to do: no step). Refuses, changing nothing: a role without CREATE on the
// database (42501), a database holding the other edition (42710), a database at a newer version
// than this library (22023), a SQLite URL (22023: SQLite stores migrate when opened).
FORGEYARD_API InstallResult install_store(std::string_view url, const InstallOptions& options = {});

// The PL/pgSQL edition as a script, for a database this library cannot reach:
//   "plpgsql"  for `psql -v ON_ERROR_STOP=1 -f` by the database owner: the same steps, locks and
//              refusals as install_store;
//   "pg_tle"   for a role holding pgtle_admin: registers every version and upgrade step with
//              pg_tle, after which CREATE EXTENSION forgeyard (and ALTER EXTENSION ... UPDATE)
//              install it.
// Anything else is InvalidArgument.
FORGEYARD_API std::string install_script(std::string_view kind);

}  // namespace forgeyard
