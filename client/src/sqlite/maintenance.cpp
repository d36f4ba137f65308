#include "sqlite/maintenance.hpp"

#include "core/core.hpp"

namespace forgeyard::detail {

std::map<std::string, std::int64_t> purge_expired(Db& db, std::int64_t now, int max_rows,
                                                  const std::optional<std::string>& tenant) {
  constexpr std::int64_t inbox_retention = 7 * fy::core::usecs_per_day;
  // Each task: (name, DELETE with ?1 = now, ?2 = limit, ?3 = tenant or NULL).
  const std::pair<const char*, const char*> tasks[] = {
      {"idempotency_keys",
       "DELETE FROM idempotency_keys WHERE (tenant_id, scope, key) IN (SELECT tenant_id, scope, key"
       " FROM idempotency_keys WHERE expires_at <= ?1 AND (status = 'completed' OR locked_until <= ?1)"
       " AND (?3 IS NULL OR tenant_id = ?3) ORDER BY expires_at LIMIT ?2)"},
      {"queue_events",
       "DELETE FROM queue_events WHERE (tenant_id, queue, event_id) IN (SELECT tenant_id, queue, event_id"
       " FROM queue_events WHERE expires_at <= ?1 AND (?3 IS NULL OR tenant_id = ?3) ORDER BY expires_at LIMIT ?2)"},
      {"acked_messages",
       "DELETE FROM messages WHERE msg_id IN (SELECT m.msg_id FROM messages m JOIN queues q"
       " ON q.tenant_id = m.tenant_id AND q.queue = m.queue WHERE m.state = 'acked'"
       " AND m.finished_at <= ?1 - q.retain_acked_usecs AND (?3 IS NULL OR m.tenant_id = ?3) LIMIT ?2)"},
      {"dead_letters",
       "DELETE FROM messages WHERE msg_id IN (SELECT msg_id FROM (SELECT m.msg_id, m.finished_at,"
       " q.dead_retention_usecs, q.max_dead, row_number() OVER (PARTITION BY m.tenant_id, m.queue"
       " ORDER BY m.msg_id DESC) AS newest FROM messages m JOIN queues q ON q.tenant_id = m.tenant_id"
       " AND q.queue = m.queue WHERE m.state = 'dead' AND (?3 IS NULL OR m.tenant_id = ?3))"
       " WHERE newest > max_dead OR finished_at <= ?1 - dead_retention_usecs LIMIT ?2)"},
  };
  std::map<std::string, std::int64_t> done;
  for (const auto& [name, sql] : tasks) {
    auto q = db.query(sql);
    q.bind(1, now).bind(2, static_cast<std::int64_t>(max_rows));
    if (tenant)
      q.bind(3, *tenant);
    else
      q.bind_null(3);
    done[name] = q.run();
  }
  auto inbox = db.query(
      "DELETE FROM inbox WHERE (tenant_id, consumer, event_id) IN (SELECT tenant_id, consumer,"
      " event_id FROM inbox WHERE accepted_at < ?1 AND (?3 IS NULL OR tenant_id = ?3)"
      " ORDER BY accepted_at LIMIT ?2)");
  inbox.bind(1, now - inbox_retention).bind(2, static_cast<std::int64_t>(max_rows));
  if (tenant)
    inbox.bind(3, *tenant);
  else
    inbox.bind_null(3);
  done["inbox"] = inbox.run();
  return done;
}

}  // namespace forgeyard::detail
