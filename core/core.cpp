#include "core.hpp"

#include <array>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

void throw_version_conflict(const std::string& table, std::int64_t expected, std::int64_t current) {
  throw Error(sqlstate::version_conflict, "version conflict on " + table,
              "expected version " + std::to_string(expected) + ", current version " + std::to_string(current));
}

BeginAction decide_begin(const IdempotencyRow* row, std::string_view request_digest, std::int64_t now) {
  // Past its retention a key counts as unused, unless an attempt still holds a live lock on it.
  if (row == nullptr || (is_expired(row->expires_at, now) && (row->completed || is_expired(row->locked_until, now))))
    return BeginAction::start;
  if (row->request_digest != request_digest) return BeginAction::mismatch;
  if (row->completed) return BeginAction::replay;
  if (!is_expired(row->locked_until, now)) return BeginAction::in_progress;
  return BeginAction::take_over;
}

void check_attempt(const IdempotencyRow& row, const std::int64_t* attempt, const char* operation) {
  if (attempt != nullptr && *attempt != row.attempt)
    throw Error(sqlstate::stale_fence,
                std::string(operation) + " by attempt " + std::to_string(*attempt) + " refused: attempt " +
                    std::to_string(row.attempt) + " owns the key now",
                "the lock expired and another caller took the work over");
  if (row.completed)
    throw Error(sqlstate::stale_fence, std::string(operation) + " refused: the key is already completed",
                "begin again to get the stored response");
}

void throw_unknown_key(std::string_view scope, std::string_view key) {
  throw Error(sqlstate::no_data_found,
              "no idempotency key \"" + std::string(key) + "\" in scope \"" + std::string(scope) + "\"");
}

void throw_key_in_progress(std::string_view key, std::int64_t holder) {
  throw Error(sqlstate::idempotency_in_progress,
              "idempotency key \"" + std::string(key) + "\" is in progress elsewhere",
              "attempt " + std::to_string(holder) + " holds it; try again later");
}

void throw_key_mismatch(std::string_view key) {
  throw Error(sqlstate::idempotency_mismatch,
              "idempotency key \"" + std::string(key) + "\" was used with a different request",
              "the request digest differs from the one stored with the key");
}

int capacity_slots(const QueueOptions& o) {
  // Each slot's share holds at least 1024 messages and 1024 of the largest payloads, so a
  // payload of max_payload_bytes always fits an empty slot and the split refuses little early.
  std::int64_t slots = o.max_messages / 1024;
  const std::int64_t by_bytes = o.max_bytes / 1024 / o.max_payload_bytes;
  if (by_bytes < slots) slots = by_bytes;
  return static_cast<int>(slots < 1 ? 1 : slots > 8 ? 8 : slots);
}

Usage slot_budget(const QueueOptions& o, int slots, int slot) {
  auto share = [&](std::int64_t total) { return total / slots + (slot < total % slots ? 1 : 0); };
  return {share(o.max_messages), share(o.max_bytes)};
}

Usage class_limit(const QueueOptions& o, int priority, const Usage& budget) {
  const std::int64_t percent = o.admit_percent[priority];
  // Integer arithmetic: the class may use floor(budget * percent / 100) of the slot.
  const auto limit = [&](std::int64_t total) { return total / 100 * percent + total % 100 * percent / 100; };
  return {limit(budget.messages), limit(budget.bytes)};
}

bool admits(const QueueOptions& o, int priority, const Usage& used, const Usage& budget, std::int64_t bytes) {
  const Usage limit = class_limit(o, priority, budget);
  return used.messages + 1 <= limit.messages && used.bytes + bytes <= limit.bytes;
}

const char* pressure(const QueueOptions& o, const Usage& used) {
  const double m = static_cast<double>(used.messages) / static_cast<double>(o.max_messages);
  const double b = static_cast<double>(used.bytes) / static_cast<double>(o.max_bytes);
  const double fill = m > b ? m : b;
  if (fill < 0.70) return "normal";
  if (fill <= 0.90) return "elevated";
  return "saturated";
}

bool dead_after_failure(const QueueOptions& o, std::int64_t attempt, bool permanent) {
  return permanent || attempt >= o.max_attempts;
}

std::int64_t retry_delay_usecs(const QueueOptions& o, std::int64_t attempt, double unit_random) {
  return backoff_full_jitter(static_cast<int>(attempt > 1000 ? 1000 : attempt), o.backoff_base_usecs,
                             o.backoff_max_usecs, unit_random);
}

double unit_random() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

std::int64_t backoff_full_jitter(int attempt, std::int64_t base_usecs, std::int64_t cap_usecs, double unit_random) {
  if (attempt < 1) attempt = 1;
  if (base_usecs <= 0 || cap_usecs <= 0) return 0;
  std::int64_t ceiling = base_usecs;
  for (int i = 1; i < attempt && ceiling < cap_usecs; ++i) ceiling = ceiling > cap_usecs / 2 ? cap_usecs : ceiling * 2;
  if (ceiling > cap_usecs) ceiling = cap_usecs;
  if (unit_random < 0) unit_random = 0;
  if (unit_random >= 1) unit_random = 0.999999999;
  return static_cast<std::int64_t>(static_cast<double>(ceiling + 1) * unit_random);
}

}  // namespace fy::core
