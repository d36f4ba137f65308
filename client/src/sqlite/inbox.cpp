// The consumer inbox in the SQLite store: exactly-once effect on top of at-least-once delivery; the
// twin of extension/inbox.cpp.
#include <string>

#include "core/core.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "sqlite/queues.hpp"

namespace forgeyard::detail {

using namespace sqlite_queue;

bool SqliteQueues::inbox_accept(std::string_view tenant, std::string_view consumer, std::string_view event_id) {
  return session_.measure("inbox.accept", [&] {
    return core_guarded([&] {
      fy::core::check_name("tenant", true, tenant, fy::core::max_tenant_bytes);
      fy::core::check_name("consumer", true, consumer, fy::core::max_consumer_bytes);
      const std::string id = canonical_uuid(event_id);
      bool first = false;
      session_.write([&](Db& db) {
        first = db.query(
                      "INSERT INTO inbox (tenant_id, consumer, event_id, accepted_at) VALUES (?1, ?2, ?3, ?4)"
                      " ON CONFLICT DO NOTHING")
                    .bind(1, tenant)
                    .bind(2, consumer)
                    .bind(3, id)
                    .bind(4, session_.now_usecs())
                    .run() > 0;
      });
      return first;
    });
  });
}

}  // namespace forgeyard::detail
