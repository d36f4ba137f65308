// forgeyard.storage_stats(tenant): every figure `storage stats`, `storage status`, `storage doctor`
// and `forgeyard metrics` read, in one round trip, as (kind, tenant_id, name, state, value) rows
// (docs/sql-api.md#operations). NULL tenant = all tenants and the server-wide rows, which only an
// unbound role may ask for (FY040 otherwise, as for every maintenance call).
#include <optional>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "tenant.hpp"

// The statement, shared with the PL/pgSQL edition: extension/operations.sql, "@statement
// storage_stats", which sql/generate.py writes as fy::statements::storage_stats.
#include "sql/gen/statements.hpp"

using namespace fy;

namespace {

struct StatRow {
  std::string kind;
  std::optional<std::string> tenant, name;
  std::string state;
  std::int64_t value;
};

}  // namespace

FY_FUNCTION(fy_storage_stats) {
  static pg::Statement stats(statements::storage_stats, {TEXTOID, TIMESTAMPTZOID});
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const TimestampTz now = pg::now();
  std::vector<StatRow> rows;
  pg::Spi spi;
  check_tenant(spi, tenant);
  spi.run(stats, {pg::optional_text_value(tenant), pg::timestamptz_value(now)}, [&](const pg::Row& r) {
    rows.push_back({*r.text(1), r.text(2), r.text(3), *r.text(4), *r.int8(5)});
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  for (const StatRow& r : rows)
    out.add_row({pg::text_value(r.kind), pg::optional_text_value(r.tenant), pg::optional_text_value(r.name),
                 pg::text_value(r.state), pg::int8_value(r.value)});
  return (Datum)0;
}
