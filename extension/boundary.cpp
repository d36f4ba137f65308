// Probes of the C++ / PostgreSQL boundary, for the regression suite (superuser-only).
#include <string>

#include "pg/args.hpp"
#include "pg/memory.hpp"
#include "pg/probes.hpp"

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

// boundary_parse_input(type regtype, input text) -> true: reads input with the type's input
// function through pg::parse_input, as pg::parse_interval does. Bad input must become 22023
// naming "input"; any other error (a cancel in a domain's CHECK, a failed CHECK) must come back
// unchanged. Defined only inside regress/boundary.sql.
FY_FUNCTION(fy_boundary_parse_input) {
  const Oid type = fy::pg::oid_arg(fcinfo, 0, "type");
  const std::string input = fy::pg::text_arg(fcinfo, 1, "input", 1 << 20, false).value();
  fy::pg::parse_input(type, input, "input", "a value of that type");
  return BoolGetDatum(true);
}

// boundary_throw_repeat(sqlstate, piece, times): throws a C++ exception whose message and detail
// are piece repeated `times` times, to prove a text longer than invoke()'s buffers is cut at a
// character boundary. Defined only inside regress/boundary.sql.
FY_FUNCTION(fy_boundary_throw_repeat) {
  const std::string code = fy::pg::name_arg(fcinfo, 0, "sqlstate", 5);
  const std::string piece = fy::pg::name_arg(fcinfo, 1, "piece", 100);
  const std::int32_t times = fy::pg::int4_arg(fcinfo, 2, "times");
  if (times < 0 || times > 100000) throw fy::core::Error("22023", "times must be between 0 and 100000");
  std::string text;
  for (std::int32_t i = 0; i < times; ++i) text += piece;
  throw fy::core::Error(code, text, text);
}

// boundary_break_stacks(exception_stack, context_stack, then_throw): returns (or throws) with
// PostgreSQL's exception stack and/or error context stack changed; invoke() must restore them
// and raise XX000 instead of leaving the session to crash. Defined only inside regress/boundary.sql.
FY_FUNCTION(fy_boundary_break_stacks) {
  const bool exception_stack = fy::pg::bool_arg(fcinfo, 0, false);
  const bool context_stack = fy::pg::bool_arg(fcinfo, 1, false);
  const bool then_throw = fy::pg::bool_arg(fcinfo, 2, false);
  fy::pg::probe::break_error_stacks(exception_stack, context_stack);
  if (then_throw) throw fy::core::Error("FY001", "thrown after breaking the stacks");
  return BoolGetDatum(true);
}

// boundary_peak_memory(sql) -> bigint: runs sql through SPI and returns by how much the
// backend's memory contexts grew at their peak, sampled at the end of every statement run
// meanwhile (nested ones included). Defined only inside regress/boundary.sql.
FY_FUNCTION(fy_boundary_peak_memory) {
  const std::string sql = fy::pg::name_arg(fcinfo, 0, "sql", 10000);
  fy::pg::Spi spi;
  std::int64_t growth = 0;
  {
    fy::pg::MemoryPeak peak;
    spi.run_once(sql);
    growth = peak.peak_growth();
  }
  spi.finish();
  return Int64GetDatum(growth);
}
