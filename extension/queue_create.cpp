// A queue's life: queue_create, queue_alter (options from jsonb, checked by the core) and queue_drop
// (docs/sql-api.md#queues).
#include <string>
#include <utility>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "pg/trigger.hpp"
#include "core/workflow.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {
namespace {

using core::sqlstate::invalid_parameter;

// Options from jsonb over `base`: numbers and names as text, durations as interval text.
core::QueueOptions parse_options(pg::Spi& spi, const pg::Value& json, core::QueueOptions base) {
  for (const auto& [key, value] : pg::jsonb_option_pairs(spi, json)) {
    if (key == "aging" && value == "null")  // (null: no aging, as 0)
      base.aging_usecs = 0;
    else if (core::is_duration_option(key))
      core::set_queue_duration(base, key, pg::parse_interval(value, "queue option " + key));
    else
      core::set_queue_option(base, key, value);
  }
  core::validate(base);
  return base;
}

// The flow-control options (0.7.0 columns). A database still at 0.6.0 has none: a queue there
// keeps the defaults, and asking for another value is refused rather than dropped.
void write_flow_options(pg::Spi& spi, const pg::Value& t, const pg::Value& q, const core::QueueOptions& o) {
  static pg::Statement set_flow(
      "UPDATE forgeyard.queues SET retry_budget = $3, retry_budget_min = $4, retry_budget_window_usecs = $5,"
      "   max_in_flight_per_key = $6, fairness = $7, aging_usecs = $8"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, FLOAT8OID, INT8OID, INT8OID, INT8OID, BOOLOID, INT8OID});
  const core::QueueOptions d;
  if (!flow_schema()) {
    if (o.retry_budget || o.retry_budget_min != d.retry_budget_min ||
        o.retry_budget_window_usecs != d.retry_budget_window_usecs || o.max_in_flight_per_key > 0 || o.fairness ||
        o.aging_usecs > 0)
      throw core::Error(invalid_parameter,
                        std::string("queue option ") +
                            (o.aging_usecs > 0             ? "aging"
                             : o.fairness                  ? "fairness"
                             : o.max_in_flight_per_key > 0 ? "max_in_flight_per_key"
                                                           : "retry_budget") +
                            " needs the extension at 0.7.0",
                        "run ALTER EXTENSION forgeyard UPDATE");
    return;
  }
  spi.run(set_flow, {t, q, pg::optional_float8_value(o.retry_budget), pg::int8_value(o.retry_budget_min),
                     pg::int8_value(o.retry_budget_window_usecs),
                     o.max_in_flight_per_key > 0 ? pg::int8_value(o.max_in_flight_per_key) : pg::null_value(),
                     pg::bool_value(o.fairness), pg::int8_value(o.aging_usecs)});
}

std::vector<pg::Value> option_values(const core::QueueOptions& o) {
  std::vector<pg::Value> v = {pg::int8_value(o.max_messages),
                              pg::int8_value(o.max_bytes),
                              pg::int8_value(o.max_payload_bytes),
                              pg::int8_value(o.visibility_usecs),
                              pg::int8_value(o.max_attempts),
                              pg::int8_value(o.backoff_base_usecs),
                              pg::int8_value(o.backoff_max_usecs),
                              pg::text_value(o.partitioned ? "partition" : "none"),
                              pg::text_value(o.keep_dead_payload ? "keep" : "drop"),
                              pg::int8_value(o.retain_acked_usecs),
                              pg::int8_value(o.max_dead),
                              pg::int8_value(o.dead_retention_usecs),
                              pg::int8_value(o.dedup_window_usecs)};
  for (int p = 0; p < core::priority_classes; ++p) v.push_back(pg::int8_value(o.admit_percent[p]));
  v.push_back(pg::bool_value(o.notify));
  return v;
}

}  // namespace
}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

namespace fy::queue {

bool insert_queue(pg::Spi& spi, const std::string& tenant, const std::string& name, const core::QueueOptions& o) {
  static pg::Statement create(
      "INSERT INTO forgeyard.queues (tenant_id, queue, max_messages, max_bytes, max_payload_bytes, visibility_usecs,"
      "   max_attempts, backoff_base_usecs, backoff_max_usecs, ordering, dead_letter_payload, retain_acked_usecs,"
      "   max_dead, dead_retention_usecs, dedup_window_usecs, admit_emergency, admit_security_control,"
      "   admit_realtime, admit_interactive, admit_background, admit_bulk, notify, slots, created_at)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,"
      "         $23, $24) ON CONFLICT DO NOTHING",
      {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
       INT8OID, TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
       INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID, INT4OID, TIMESTAMPTZOID});
  static pg::Statement counters(
      "INSERT INTO forgeyard.queue_slots (tenant_id, queue, slot) SELECT $1, $2, s FROM pg_catalog.generate_series(0, $3 OPERATOR(pg_catalog.-) 1) s;"
      "INSERT INTO forgeyard.queue_releases (tenant_id, queue, slot) SELECT $1, $2, s FROM pg_catalog.generate_series(0, $3 OPERATOR(pg_catalog.-) 1) s",
      {TEXTOID, TEXTOID, INT4OID});
  const int slots = core::capacity_slots(o);
  const std::vector<pg::Value> v = option_values(o);
  const pg::Value t = pg::text_value(tenant), q = pg::text_value(name);
  const std::uint64_t created = spi.run(create, {t,
                                                 q,
                                                 v[0],
                                                 v[1],
                                                 v[2],
                                                 v[3],
                                                 v[4],
                                                 v[5],
                                                 v[6],
                                                 v[7],
                                                 v[8],
                                                 v[9],
                                                 v[10],
                                                 v[11],
                                                 v[12],
                                                 v[13],
                                                 v[14],
                                                 v[15],
                                                 v[16],
                                                 v[17],
                                                 v[18],
                                                 v[19],
                                                 pg::int4_value(slots),
                                                 pg::timestamptz_value(pg::now())});
  if (created == 0) return false;
  spi.run(counters, {t, q, pg::int4_value(slots)});
  // Its ready lanes (sql/src/forgeyard.sql, 0.10.0), made by the function both editions share.
  static pg::Statement lanes("SELECT forgeyard.queue_lanes_open($1, $2)", {TEXTOID, TEXTOID});
  if (lanes_schema()) spi.run(lanes, {t, q});
  write_flow_options(spi, t, q, o);
  return true;
}

void ensure_queue(pg::Spi& spi, const std::string& tenant, const std::string& name) {
  static pg::Statement exists(
      "SELECT 1 FROM forgeyard.queues"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  if (spi.run(exists, {pg::text_value(tenant), pg::text_value(name)}) == 0)
    insert_queue(spi, tenant, name, core::QueueOptions{});
}

}  // namespace fy::queue

// queue_create(tenant, queue, options)
FY_FUNCTION(fy_queue_create) {
  const std::string tenant = tenant_arg(fcinfo);
  const std::string name = queue_arg(fcinfo);
  core::workflow::refuse_reserved_queue(name);
  pg::Spi spi;
  check_tenant(spi, tenant);
  const core::QueueOptions o =
      pg::arg_is_null(fcinfo, 2) ? core::QueueOptions{} : parse_options(spi, pg::jsonb_arg(fcinfo, 2, "options"), {});
  if (!insert_queue(spi, tenant, name, o))
    throw core::Error(core::sqlstate::duplicate_object,
                      "queue \"" + name + "\" already exists for tenant \"" + tenant + "\"",
                      "use forgeyard.queue_alter to change its options");
  spi.finish();
  return (Datum)0;
}

// queue_alter(tenant, queue, options): changes the given options, keeps the others.
FY_FUNCTION(fy_queue_alter) {
  static pg::Statement alter(
      "UPDATE forgeyard.queues SET max_messages = $3, max_bytes = $4, max_payload_bytes = $5, visibility_usecs = $6,"
      "   max_attempts = $7, backoff_base_usecs = $8, backoff_max_usecs = $9, ordering = $10,"
      "   dead_letter_payload = $11, retain_acked_usecs = $12, max_dead = $13, dead_retention_usecs = $14,"
      "   dedup_window_usecs = $15, admit_emergency = $16, admit_security_control = $17, admit_realtime = $18,"
      "   admit_interactive = $19, admit_background = $20, admit_bulk = $21, notify = $22"
      " WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID, TEXTOID,
       INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, BOOLOID});
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const core::QueueOptions o = parse_options(spi, pg::jsonb_arg(fcinfo, 2, "options"), queue.options);
  if (o.partitioned != queue.options.partitioned)
    throw core::Error(invalid_parameter, "queue option ordering cannot change after the queue is created");
  // Setting or removing the per-key limit while messages are pending would leave their keys
  // uncounted, or their waiting messages with nothing to promote them; changing it is safe.
  // The queue's drop lock waits for open producers, which enqueued under the old options. Setting
  // or removing fairness while messages are pending would leave them without a pass, or with one
  // the claim no longer reads.
  const bool toggles_key_limit = (o.max_in_flight_per_key > 0) != (queue.options.max_in_flight_per_key > 0);
  const bool toggles_fairness = o.fairness != queue.options.fairness;
  if (toggles_key_limit || toggles_fairness) pg::lock_queue(queue.tenant, queue.name, pg::QueueLock::drop);
  if ((toggles_key_limit || toggles_fairness) && usage(spi, queue).messages > 0)
    throw core::Error(invalid_parameter,
                      std::string("queue option ") + (toggles_fairness ? "fairness" : "max_in_flight_per_key") +
                          " can be set or removed only while the queue holds no messages",
                      toggles_fairness ? "" : "it can be changed to another limit at any time");
  const std::vector<pg::Value> v = option_values(o);
  spi.run(alter, {queue.t, queue.q, v[0],  v[1],  v[2],  v[3],  v[4],  v[5],  v[6],  v[7],  v[8],
                  v[9],    v[10],   v[11], v[12], v[13], v[14], v[15], v[16], v[17], v[18], v[19]});
  write_flow_options(spi, queue.t, queue.q, o);
  spi.finish();
  return (Datum)0;
}

// queue_drop(tenant, queue) -> whether it existed; its messages, events and counters go too.
FY_FUNCTION(fy_queue_drop) {
  // The queue's producer lock first (pg/table_access.hpp): that waits for open producers to
  // commit, and the deletes after it then see their messages.
  static pg::Statement drop_queue(
      "DELETE FROM forgeyard.queues WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_rest(
      "WITH m AS (DELETE FROM forgeyard.messages WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " e AS (DELETE FROM forgeyard.queue_events WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " p AS (DELETE FROM forgeyard.queue_partitions WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " s AS (DELETE FROM forgeyard.queue_slots WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2)"
      " DELETE FROM forgeyard.queue_releases WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  const std::string tenant = tenant_arg(fcinfo);
  const std::string name = queue_arg(fcinfo);
  core::workflow::refuse_reserved_queue(name);
  pg::Spi spi;
  check_tenant(spi, tenant);
  pg::lock_queue(tenant, name, pg::QueueLock::drop);
  const pg::Value t = pg::text_value(tenant), q = pg::text_value(name);
  static pg::Statement drop_flow(
      "WITH a AS (DELETE FROM forgeyard.queue_admission WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2),"
      " k AS (DELETE FROM forgeyard.queue_fair_keys WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2)"
      " DELETE FROM forgeyard.queue_retry_windows WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_deltas(
      "DELETE FROM forgeyard.queue_release_deltas WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_generations(
      "DELETE FROM forgeyard.queue_admit_deltas WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND queue OPERATOR(pg_catalog.=) $2",
      {TEXTOID, TEXTOID});
  static pg::Statement drop_lanes("SELECT forgeyard.queue_lanes_close($1, $2)", {TEXTOID, TEXTOID});
  if (lanes_schema()) spi.run(drop_lanes, {t, q});
  const bool dropped = spi.run(drop_queue, {t, q}) > 0;
  spi.run(drop_rest, {t, q});
  if (pg::has_table(pg::CachedTable::queue_release_deltas)) spi.run(drop_deltas, {t, q});
  if (pg::has_table(pg::CachedTable::queue_admit_deltas)) spi.run(drop_generations, {t, q});
  if (flow_schema()) spi.run(drop_flow, {t, q});
  spi.finish();
  return BoolGetDatum(dropped);
}
