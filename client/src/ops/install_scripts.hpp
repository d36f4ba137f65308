// The PL/pgSQL edition's scripts as sql/generate.py wrote them, built into the library
// (sql/generate.py --embed): forgeyard--V.sql and forgeyard--A--B.sql (extension scripts,
// for pg_tle), plain--V.sql and plain--A--B.sql (the plain install).
#pragma once

#include <string>
#include <vector>

namespace forgeyard::detail {

struct EditionScript {
  std::string name;
  std::string sql;
};

std::vector<EditionScript> embedded_plpgsql_scripts();

}  // namespace forgeyard::detail
