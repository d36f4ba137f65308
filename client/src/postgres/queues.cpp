// Queues and the inbox over the forgeyard extension's SQL API.
#include "postgres/queues.hpp"

#include "queue_options.hpp"

namespace forgeyard::detail {

namespace {

#define FY_DELIVERY_COLUMNS \
  "msg_id, event_id, partition_key, priority, attempt, claim_token, payload, " FY_USECS("enqueued_at")

const PgStatement create_sql{"fy_queue_create", "SELECT forgeyard.queue_create($1, $2, $3::pg_catalog.jsonb)", 3};
const PgStatement drop_sql{"fy_queue_drop", "SELECT forgeyard.queue_drop($1, $2)", 2};
const PgStatement enqueue_sql{"fy_enqueue",
                              "SELECT forgeyard.enqueue($1, $2, $3::pg_catalog.bytea, $4::pg_catalog.uuid, $5, $6,"
                              " $7::pg_catalog.interval, $8, $9)",
                              9};
const PgStatement enqueue_batch_sql{
    "fy_enqueue_batch",
    "SELECT msg_id FROM forgeyard.enqueue_batch($1, $2, $3::pg_catalog.bytea[],"
    " $4::pg_catalog.uuid[], $5::pg_catalog.text[], $6, $7::pg_catalog.interval, $8, $9)",
    9};
const PgStatement resource_limit_sql{"fy_resource_limit",
                                     "SELECT forgeyard.resource_limit($1, $2, $3::pg_catalog.jsonb)", 3};
const PgStatement breaker_configure_sql{"fy_breaker_configure",
                                        "SELECT forgeyard.breaker_configure($1, $2, $3::pg_catalog.jsonb)", 3};
const PgStatement breaker_state_sql{
    "fy_breaker_state",
    "SELECT state, failures, calls, " FY_USECS("changed_at") " FROM forgeyard.breaker_state($1, $2)", 2};
const PgStatement ack_batch_sql{"fy_ack_batch",
                                "SELECT forgeyard.ack_batch($1, $2, $3::pg_catalog.int8[], $4::pg_catalog.int8[])", 4};
const PgStatement claim_sql{
    "fy_claim", "SELECT " FY_DELIVERY_COLUMNS " FROM forgeyard.claim($1, $2, $3, $4, $5::pg_catalog.interval)", 5};
const PgStatement ack_and_claim_sql{"fy_ack_and_claim",
                                    "SELECT " FY_DELIVERY_COLUMNS
                                    " FROM forgeyard.ack_and_claim($1, $2, $3, $4::pg_catalog.int8[],"
                                    " $5::pg_catalog.int8[], $6, $7::pg_catalog.interval)",
                                    7};
const PgStatement ack_sql{"fy_ack", "SELECT forgeyard.ack($1, $2, $3, $4)", 4};
const PgStatement nack_sql{"fy_nack", "SELECT forgeyard.nack($1, $2, $3, $4, $5, $6)", 6};
const PgStatement extend_sql{"fy_extend",
                             "SELECT " FY_USECS("forgeyard.extend($1, $2, $3, $4, $5::pg_catalog.interval)"), 5};
const PgStatement queue_stats_sql{"fy_queue_stats",
                                  "SELECT ready, in_flight, delayed, dead, bytes, " FY_USECS(
                                      "oldest_ready_age") ", pressure, waiting, retries_delayed"
                                                          " FROM forgeyard.queue_stats($1, $2)",
                                  2};
const PgStatement dead_list_sql{
    "fy_dead_list",
    "SELECT msg_id, event_id, partition_key, priority, attempt, error, error_class, " FY_USECS(
        "dead_at") ", payload FROM forgeyard.dead_list($1, $2, $3, $4)",
    4};
const PgStatement redrive_sql{"fy_dead_redrive", "SELECT forgeyard.dead_redrive($1, $2, $3::pg_catalog.int8[], $4)", 4};
const PgStatement purge_dead_sql{"fy_dead_purge", "SELECT forgeyard.dead_purge($1, $2, $3::pg_catalog.int8[])", 3};
const PgStatement flow_state_sql{
    "fy_flow_state",
    "SELECT queue, kind, subject, \"limit\", available, in_flight, counted, delayed, refused, state, " FY_USECS(
        "since") " FROM forgeyard.flow_state WHERE tenant_id OPERATOR(pg_catalog.=) $1",
    1};
const PgStatement fairness_weight_sql{"fy_fairness_weight",
                                      "SELECT forgeyard.fairness_weight($1, $2, $3, $4::pg_catalog.int4)", 4};
const PgStatement admission_limit_sql{
    "fy_admission_limit", "SELECT forgeyard.admission_limit($1, $2, $3::pg_catalog.int4, $4::pg_catalog.interval)", 4};
const PgStatement inbox_sql{"fy_inbox_accept", "SELECT forgeyard.inbox_accept($1, $2, $3::pg_catalog.uuid)", 3};
#undef FY_DELIVERY_COLUMNS

std::optional<std::string> visibility_param(std::optional<Duration> d) {
  return d ? std::optional<std::string>(interval_param(*d)) : std::nullopt;
}

// An int8[] parameter in text form; NULL for an empty list where the function means "all".
std::optional<std::string> ids_param(const std::vector<std::int64_t>& ids, bool empty_is_null) {
  if (ids.empty() && empty_is_null) return std::nullopt;
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

std::vector<Delivery> deliveries(const PgResult& r) {
  std::vector<Delivery> out;
  for (int i = 0; i < r.rows(); ++i) {
    Delivery d;
    d.msg_id = r.int8(i, 0);
    if (!r.is_null(i, 1)) d.event_id = r.text(i, 1);
    if (!r.is_null(i, 2)) d.partition_key = r.text(i, 2);
    d.priority = priority_from_string(r.text(i, 3));
    d.attempt = static_cast<int>(r.int8(i, 4));
    d.claim_token = r.int8(i, 5);
    d.payload = r.bytea(i, 6);
    d.enqueued_at = from_unix_usecs(r.int8(i, 7));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

void PgQueues::create(std::string_view tenant, std::string_view queue, const QueueOptions& options) {
  session_.measure("queue.create", [&] {
    session_.run(create_sql, {text_param(tenant), text_param(queue), options_json(options)});
  });
}

bool PgQueues::drop(std::string_view tenant, std::string_view queue) {
  return session_.measure("queue.drop", [&] {
    return session_.run(drop_sql, {text_param(tenant), text_param(queue)}).boolean(0, 0);
  });
}

std::int64_t PgQueues::enqueue(std::string_view tenant, std::string_view queue, const OutgoingMessage& m) {
  return session_.measure("queue.enqueue", [&] {
    return session_
        .run(enqueue_sql, {text_param(tenant), text_param(queue), bytea_param(m.payload), m.event_id, m.partition_key,
                           text_param(to_string(m.priority)), interval_param(m.delay), m.fairness_key, m.resource})
        .int8(0, 0);
  });
}

std::vector<std::int64_t> PgQueues::enqueue_many(std::string_view tenant, std::string_view queue,
                                                 const std::vector<OutgoingMessage>& messages) {
  return session_.measure("queue.enqueue_many", [&] {
    // One enqueue_batch per run of messages of the same class, delay, fairness key and resource,
    // in the given order, so that msg_ids keep the order of the list.
    std::vector<PgCall> calls;
    for (std::size_t first = 0; first < messages.size();) {
      std::size_t end = first + 1;
      while (end < messages.size() && messages[end].priority == messages[first].priority &&
             messages[end].delay == messages[first].delay &&
             messages[end].fairness_key == messages[first].fairness_key &&
             messages[end].resource == messages[first].resource)
        ++end;
      std::vector<std::optional<std::string>> payloads, event_ids, keys;
      bool any_event_id = false, any_key = false;
      for (std::size_t i = first; i < end; ++i) {
        payloads.emplace_back(bytea_param(messages[i].payload));
        event_ids.push_back(messages[i].event_id);
        keys.push_back(messages[i].partition_key);
        any_event_id = any_event_id || messages[i].event_id.has_value();
        any_key = any_key || messages[i].partition_key.has_value();
      }
      calls.push_back({&enqueue_batch_sql,
                       {text_param(tenant), text_param(queue), array_param(payloads),
                        any_event_id ? std::optional<std::string>(array_param(event_ids)) : std::nullopt,
                        any_key ? std::optional<std::string>(array_param(keys)) : std::nullopt,
                        text_param(to_string(messages[first].priority)), interval_param(messages[first].delay),
                        messages[first].fairness_key, messages[first].resource}});
      first = end;
    }
    std::vector<std::int64_t> ids;
    if (calls.empty()) return ids;
    for (const PgResult& r : session_.run_all(calls))
      for (int i = 0; i < r.rows(); ++i) ids.push_back(r.int8(i, 0));
    if (ids.size() != messages.size())
      throw Error(ErrorKind::Corruption, "XX000", "enqueue_batch answered another number of msg_ids than it was sent");
    return ids;
  });
}

void PgQueues::ack_many(std::string_view tenant, std::string_view queue, const std::vector<Ack>& acks) {
  session_.measure("queue.ack_many", [&] {
    if (acks.empty()) return;
    std::vector<std::int64_t> ids, tokens;
    for (const auto& [id, token] : acks) ids.push_back(id), tokens.push_back(token);
    session_.run(ack_batch_sql,
                 {text_param(tenant), text_param(queue), ids_param(ids, false), ids_param(tokens, false)});
  });
}

std::vector<Delivery> PgQueues::claim(std::string_view tenant, std::string_view queue, std::string_view consumer,
                                      int max_messages, std::optional<Duration> visibility) {
  return session_.measure("queue.claim", [&] {
    return deliveries(session_.run(claim_sql, {text_param(tenant), text_param(queue), text_param(consumer),
                                               std::to_string(max_messages), visibility_param(visibility)}));
  });
}

void PgQueues::ack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token) {
  session_.measure("queue.ack", [&] {
    session_.run(ack_sql, {text_param(tenant), text_param(queue), std::to_string(msg_id), std::to_string(claim_token)});
  });
}

std::vector<Delivery> PgQueues::ack_and_claim(std::string_view tenant, std::string_view queue,
                                              std::string_view consumer, const std::vector<Ack>& acks, int max_messages,
                                              std::optional<Duration> visibility) {
  return session_.measure("queue.ack_and_claim", [&] {
    std::vector<std::int64_t> ids, tokens;
    for (const auto& [id, token] : acks) ids.push_back(id), tokens.push_back(token);
    return deliveries(session_.run(
        ack_and_claim_sql, {text_param(tenant), text_param(queue), text_param(consumer), ids_param(ids, false),
                            ids_param(tokens, false), std::to_string(max_messages), visibility_param(visibility)}));
  });
}

NackOutcome PgQueues::nack(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                           std::int64_t claim_token, std::string_view error, bool permanent) {
  return session_.measure("queue.nack", [&] {
    const std::string outcome =
        session_
            .run(nack_sql, {text_param(tenant), text_param(queue), std::to_string(msg_id), std::to_string(claim_token),
                            text_param(error), std::string(permanent ? "true" : "false")})
            .text(0, 0);
    if (outcome == "dead") return NackOutcome::Dead;
    if (outcome == "retry") return NackOutcome::Retry;
    throw Error(ErrorKind::Corruption, "XX000", "invalid nack outcome read back: " + outcome);
  });
}

TimePoint PgQueues::extend(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                           std::int64_t claim_token, Duration visibility) {
  return session_.measure("queue.extend", [&] {
    return from_unix_usecs(session_
                               .run(extend_sql, {text_param(tenant), text_param(queue), std::to_string(msg_id),
                                                 std::to_string(claim_token), interval_param(visibility)})
                               .int8(0, 0));
  });
}

QueueStats PgQueues::stats(std::string_view tenant, std::string_view queue, ReadClass read) {
  return session_.measure("queue.stats", [&] {
    PgResult r = session_.read(queue_stats_sql, {text_param(tenant), text_param(queue)}, read);
    QueueStats s{r.int8(0, 0), r.int8(0, 1), r.int8(0, 2), r.int8(0, 3), r.int8(0, 4),
                 std::nullopt, r.text(0, 6), r.int8(0, 7), r.int8(0, 8)};
    if (!r.is_null(0, 5)) s.oldest_ready_age = Duration(r.int8(0, 5));
    return s;
  });
}

std::vector<DeadLetter> PgQueues::dead_letters(std::string_view tenant, std::string_view queue,
                                               std::int64_t after_msg_id, int max_rows) {
  return session_.measure("queue.dead_letters", [&] {
    PgResult r = session_.run(
        dead_list_sql, {text_param(tenant), text_param(queue), std::to_string(after_msg_id), std::to_string(max_rows)});
    std::vector<DeadLetter> out;
    for (int i = 0; i < r.rows(); ++i) {
      DeadLetter d;
      d.msg_id = r.int8(i, 0);
      if (!r.is_null(i, 1)) d.event_id = r.text(i, 1);
      if (!r.is_null(i, 2)) d.partition_key = r.text(i, 2);
      d.priority = priority_from_string(r.text(i, 3));
      d.attempt = static_cast<int>(r.int8(i, 4));
      d.error = r.is_null(i, 5) ? "" : r.text(i, 5);
      d.error_class = r.is_null(i, 6) ? "" : r.text(i, 6);
      d.dead_at = from_unix_usecs(r.int8(i, 7));
      if (!r.is_null(i, 8)) d.payload = r.bytea(i, 8);
      out.push_back(std::move(d));
    }
    return out;
  });
}

int PgQueues::redrive(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids,
                      int max_rows) {
  return session_.measure("queue.redrive", [&] {
    return static_cast<int>(session_
                                .run(redrive_sql, {text_param(tenant), text_param(queue), ids_param(msg_ids, true),
                                                   std::to_string(max_rows)})
                                .int8(0, 0));
  });
}

int PgQueues::purge_dead(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids) {
  return session_.measure("queue.purge_dead", [&] {
    return static_cast<int>(
        session_.run(purge_dead_sql, {text_param(tenant), text_param(queue), ids_param(msg_ids, true)}).int8(0, 0));
  });
}

void PgQueues::admission_limit(std::string_view tenant, std::string_view queue, std::optional<RateLimit> limit) {
  session_.measure("queue.admission_limit", [&] {
    session_.run(admission_limit_sql, {text_param(tenant), text_param(queue),
                                       limit ? std::optional<std::string>(std::to_string(limit->rate)) : std::nullopt,
                                       limit ? std::optional<std::string>(interval_param(limit->per)) : std::nullopt});
  });
}

void PgQueues::fairness_weight(std::string_view tenant, std::string_view queue, std::string_view fairness_key,
                               std::optional<int> weight) {
  session_.measure("queue.fairness_weight", [&] {
    session_.run(fairness_weight_sql, {text_param(tenant), text_param(queue), text_param(fairness_key),
                                       weight ? std::optional<std::string>(std::to_string(*weight)) : std::nullopt});
  });
}

std::vector<FlowLimit> PgQueues::flow_state(std::string_view tenant) {
  return session_.measure("queue.flow_state", [&] {
    const PgResult r = session_.run(flow_state_sql, {text_param(tenant)});
    std::vector<FlowLimit> rows;
    auto text = [&](int i, int j) { return r.is_null(i, j) ? std::nullopt : std::optional<std::string>(r.text(i, j)); };
    auto number = [&](int i, int j) {
      return r.is_null(i, j) ? std::nullopt : std::optional<std::int64_t>(r.int8(i, j));
    };
    for (int i = 0; i < r.rows(); ++i)
      rows.push_back({text(i, 0), r.text(i, 1), text(i, 2), r.is_null(i, 3) ? std::string() : r.text(i, 3),
                      number(i, 4), number(i, 5), number(i, 6), number(i, 7), number(i, 8), text(i, 9),
                      r.is_null(i, 10) ? std::nullopt : std::optional<TimePoint>(from_unix_usecs(r.int8(i, 10)))});
    sort_flow(rows);
    return rows;
  });
}

void PgQueues::resource_limit(std::string_view tenant, std::string_view resource, const ResourceLimits& limits) {
  session_.measure("queue.resource_limit", [&] {
    session_.run(resource_limit_sql, {text_param(tenant), text_param(resource), resource_limits_json(limits)});
  });
}

void PgQueues::breaker_configure(std::string_view tenant, std::string_view resource,
                                 const std::optional<BreakerOptions>& options) {
  session_.measure("queue.breaker_configure", [&] {
    session_.run(breaker_configure_sql, {text_param(tenant), text_param(resource),
                                         options ? std::optional<std::string>(breaker_json(*options)) : std::nullopt});
  });
}

BreakerStatus PgQueues::breaker_state(std::string_view tenant, std::string_view resource) {
  return session_.measure("queue.breaker_state", [&] {
    const PgResult r = session_.run(breaker_state_sql, {text_param(tenant), text_param(resource)});
    return BreakerStatus{r.text(0, 0), static_cast<int>(r.int8(0, 1)), static_cast<int>(r.int8(0, 2)),
                         from_unix_usecs(r.int8(0, 3))};
  });
}

bool PgQueues::inbox_accept(std::string_view tenant, std::string_view consumer, std::string_view event_id) {
  return session_.measure("inbox.accept", [&] {
    return session_.run(inbox_sql, {text_param(tenant), text_param(consumer), text_param(event_id)}).boolean(0, 0);
  });
}

}  // namespace forgeyard::detail
