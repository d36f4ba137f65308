// Probes of the C++ / PostgreSQL boundary, for the regression suite (superuser-only).
#include <string>

#include "pg/args.hpp"

// forgeyard.boundary_throw(sqlstate, message): throws a C++ exception carrying sqlstate, or a
// std::runtime_error when sqlstate is NULL. Proves it surfaces as a clean ERROR with that code.
FY_FUNCTION(fy_boundary_throw) {
  std::string message = fy::pg::optional_name_arg(fcinfo, 1, "message", 1000).value_or("boom");
  std::optional<std::string> code = fy::pg::optional_name_arg(fcinfo, 0, "sqlstate", 5);
  if (!code) throw std::runtime_error(message);
  throw fy::core::Error(*code, message, "raised by forgeyard.boundary_throw");
}

// forgeyard.boundary_pg_error(sql): runs sql through the guarded SPI path while C++ objects are
// live. Any PostgreSQL error it raises must come back unchanged and leave the session usable.
FY_FUNCTION(fy_boundary_pg_error) {
  const std::string sql = fy::pg::name_arg(fcinfo, 0, "sql", 10000);  // live across the call
  fy::pg::Spi spi;
  const std::int64_t rows = static_cast<std::int64_t>(spi.run_once(sql));
  spi.finish();
  return Int64GetDatum(rows);
}
