// The consumer inbox: exactly-once effect on top of at-least-once delivery.
#include "maintenance.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "tenant.hpp"

using namespace fy;

// inbox_accept(tenant, consumer, event_id) -> true the first time, false for every duplicate.
// Inside the consumer's transaction: if it rolls back, the event was never accepted.
FY_FUNCTION(fy_inbox_accept) {
  static pg::Statement accept(
      "INSERT INTO forgeyard.inbox (tenant_id, consumer, event_id, accepted_at) VALUES ($1, $2, $3, $4)"
      " ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::string consumer = pg::name_arg(fcinfo, 1, "consumer", core::max_consumer_bytes);
  const std::optional<std::string> event_id = pg::optional_uuid_arg(fcinfo, 2);
  if (!event_id) throw core::Error(core::sqlstate::null_value, "event_id must not be NULL");
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, tenant);
  const bool first = spi.run(accept, {pg::text_value(tenant), pg::text_value(consumer), pg::uuid_value(*event_id),
                                      pg::timestamptz_value(now)}) > 0;
  spi.finish();
  return BoolGetDatum(first);
}

// inbox_purge(older_than, max_rows, tenant) -> entries deleted that were accepted before now - older_than.
FY_FUNCTION(fy_inbox_purge) {
  const std::int64_t older_than = pg::duration_arg(fcinfo, 0, "older_than", core::max_queue_retention_usecs);
  const std::int32_t max_rows = pg::int4_arg(fcinfo, 1, "max_rows");
  if (max_rows <= 0) throw core::Error(core::sqlstate::invalid_parameter, "max_rows must be positive");
  const std::optional<std::string> tenant = pg::optional_name_arg(fcinfo, 2, "tenant", core::max_tenant_bytes);
  const TimestampTz now = pg::now();
  pg::Spi spi;
  check_tenant(spi, tenant);
  const std::uint64_t purged = maintenance::purge_inbox(spi, now - older_than, max_rows, tenant);
  spi.finish();
  return Int32GetDatum(static_cast<std::int32_t>(purged));
}

std::uint64_t fy::maintenance::purge_inbox(pg::Spi& spi, TimestampTz before, std::int32_t max_rows,
                                           const Tenant& tenant) {
  static pg::Statement purge(
      "DELETE FROM forgeyard.inbox i USING ("
      "  SELECT e.tenant_id, e.consumer, e.event_id FROM forgeyard.inbox e"
      "   WHERE e.accepted_at OPERATOR(pg_catalog.<) $1"
      "     AND ($3::pg_catalog.text IS NULL OR e.tenant_id OPERATOR(pg_catalog.=) $3)"
      "   ORDER BY e.accepted_at LIMIT $2 FOR UPDATE SKIP LOCKED) d"
      " WHERE i.tenant_id OPERATOR(pg_catalog.=) d.tenant_id AND i.consumer OPERATOR(pg_catalog.=) d.consumer"
      "   AND i.event_id OPERATOR(pg_catalog.=) d.event_id",
      {TIMESTAMPTZOID, INT4OID, TEXTOID});
  return spi.run(purge, {pg::timestamptz_value(before), pg::int4_value(max_rows), pg::optional_text_value(tenant)});
}
