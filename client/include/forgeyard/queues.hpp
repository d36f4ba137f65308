// Durable queues: transactional outbox, fenced claim / ack / nack / extend, bounds with
// reserved capacity per priority class, dead letters, partition order; and the consumer inbox
// (docs/sql-api.md#queues).
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "forgeyard/idempotency.hpp"
#include "forgeyard/types.hpp"

namespace forgeyard {

// Highest first. Lower classes are refused earlier as a queue fills (reserved capacity).
enum class Priority { Emergency, SecurityControl, Realtime, Interactive, Background, Bulk };
FORGEYARD_API std::string_view to_string(Priority priority) noexcept;
// InvalidArgument for an unknown name.
FORGEYARD_API Priority priority_from_string(std::string_view name);

struct QueueOptions {
  std::int64_t max_messages = 100000;
  std::int64_t max_bytes = std::int64_t{1} << 30;
  std::int64_t max_payload_bytes = std::int64_t{64} * 1024;
  Duration visibility_timeout = std::chrono::seconds(30);
  std::int64_t max_attempts = 5;
  Duration backoff_base = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::minutes(5);
  bool partition_ordered = false;  // ordering = partition
  bool keep_dead_letter_payload = false;
  Duration retain_acked = Duration::zero();
  std::int64_t max_dead = 100000;
  Duration dead_letter_retention = std::chrono::hours(24 * 7);
  Duration dedup_window = std::chrono::hours(24);
  // admit_<class>: percentage of max_messages / max_bytes up to which the class is admitted.
  std::int64_t admit_percent[6] = {100, 100, 95, 90, 80, 70};
  bool notify = false;
  // Retry budget: nacks' retries admitted per window are at most this fraction (0..1) of the
  // messages admitted in it (a sliding window), never fewer than retry_budget_min; the rest wait
  // for the window's end (no attempt charged). None: no budget.
  std::optional<double> retry_budget;
  std::int64_t retry_budget_min = 10;
  Duration retry_budget_window = std::chrono::minutes(1);
  // At most this many messages of one fairness key (OutgoingMessage::fairness_key) are ready or
  // in flight at a time; the key's others wait in order and are never read by a claim. None: no
  // limit. Not with partition_ordered (InvalidArgument).
  std::optional<std::int64_t> max_in_flight_per_key;
  // Within a class, claims interleave fairness keys by their weights (stride scheduling) instead
  // of taking the oldest first; see fairness_weight.
  bool fairness = false;
  // Priority aging: a ready message below Realtime that waited this long competes one class
  // higher per such interval, never above Realtime (Emergency and SecurityControl keep their
  // lead). Zero: none. Not with fairness.
  Duration aging = Duration::zero();
};

// `rate` per `per`, with a burst of `rate` (a bucket of `rate` tokens refilled over `per`).
struct RateLimit {
  std::int64_t rate = 0;
  Duration per = std::chrono::seconds(1);
};

// What a resource allows its messages, across every queue of the tenant (resource_limit).
struct ResourceLimits {
  std::optional<RateLimit> rate;
  std::int64_t burst = 0;  // 0: the rate
  std::optional<std::int64_t> max_in_flight;
};

// A resource's circuit breaker (breaker_configure): opens when at least minimum_calls of the last
// `window` outcomes were seen and failure_rate of them failed; stays open for open_for; then lets
// half_open_calls deliveries through, which close it if all succeed.
struct BreakerOptions {
  double failure_rate = 0.5;
  std::int64_t minimum_calls = 10;
  std::int64_t window = 100;
  Duration open_for = std::chrono::seconds(30);
  std::int64_t half_open_calls = 1;
};

struct BreakerStatus {
  std::string state;  // closed, open, half_open
  int failures = 0;
  int calls = 0;
  TimePoint changed_at;
};

// One limit of flow control, as the view forgeyard.flow_state shows it (docs/sql-api.md): of a
// queue (admission_limit, retry_budget, key_limit, fairness_weight) or of a resource
// (resource_limit, breaker; no queue).
struct FlowLimit {
  std::optional<std::string> queue;
  std::string kind;
  std::optional<std::string> subject;  // the resource, or the fairness key
  std::string limit;                   // what it allows, in words
  std::optional<std::int64_t> available, in_flight, counted, delayed, refused;
  std::optional<std::string> state;  // a breaker's: closed, open, half_open
  std::optional<TimePoint> since;
};

struct OutgoingMessage {
  Bytes payload;
  std::optional<std::string> event_id;  // a UUID: a repeat within the dedup window returns the first msg_id
  std::optional<std::string> partition_key;
  Priority priority = Priority::Interactive;
  Duration delay = Duration::zero();
  std::optional<std::string> fairness_key;  // carried with the message
  // The downstream the message will hit: its resource_limit and breaker govern the claim.
  std::optional<std::string> resource;
};

struct Delivery {
  std::int64_t msg_id = 0;
  std::optional<std::string> event_id;
  std::optional<std::string> partition_key;
  Priority priority = Priority::Interactive;
  int attempt = 0;
  std::int64_t claim_token = 0;  // the fencing token of ack / nack / extend
  Bytes payload;
  TimePoint enqueued_at;
};

// (msg_id, claim_token) of a delivery being acked.
using Ack = std::pair<std::int64_t, std::int64_t>;

enum class NackOutcome { Retry, Dead };

struct QueueStats {
  std::int64_t ready = 0, in_flight = 0, delayed = 0, dead = 0, bytes = 0;
  std::optional<Duration> oldest_ready_age;
  std::string pressure;  // normal, elevated, saturated
  // Of the ready, those held behind their key: a later message of an ordered partition, or one of
  // a key at max_in_flight_per_key. Not claimable until their key frees.
  std::int64_t waiting = 0;
  // Retries the queue's retry budget delayed in its current window (0 without a budget).
  std::int64_t retries_delayed = 0;
};

struct DeadLetter {
  std::int64_t msg_id = 0;
  std::optional<std::string> event_id;
  std::optional<std::string> partition_key;
  Priority priority = Priority::Interactive;
  int attempt = 0;
  std::string error;
  std::string error_class;  // permanent, max_attempts
  TimePoint dead_at;
  std::optional<Bytes> payload;  // only when the queue keeps dead-letter payloads
};

class FORGEYARD_API Queues {
 public:
  virtual ~Queues() = default;
  virtual void create(std::string_view tenant, std::string_view queue, const QueueOptions& options) = 0;
  virtual bool drop(std::string_view tenant, std::string_view queue) = 0;
  // Inside a Transaction: visible to consumers only after commit (the transactional outbox).
  // QueueFull (FY020), PayloadTooLarge (FY021), NotFound (unknown queue), IdempotencyMismatch
  // (the event_id was used with another payload).
  virtual std::int64_t enqueue(std::string_view tenant, std::string_view queue, const OutgoingMessage& message) = 0;
  // Several messages, all or nothing; their msg_ids in order. Each is admitted, deduplicated and
  // refused as by enqueue() (a repeated event_id, also within the list, answers the first msg_id).
  // PostgreSQL: one enqueue_batch statement per run of messages of the same class and delay, all
  // in one round trip (pipeline mode); outside a Transaction they commit together.
  virtual std::vector<std::int64_t> enqueue_many(std::string_view tenant, std::string_view queue,
                                                 const std::vector<OutgoingMessage>& messages) = 0;
  // Up to max_messages deliveries, highest class first, then oldest.
  virtual std::vector<Delivery> claim(std::string_view tenant, std::string_view queue, std::string_view consumer,
                                      int max_messages = 1, std::optional<Duration> visibility = std::nullopt) = 0;
  // StaleFence when the claim was taken over; a no-op for a message already acked or dead.
  virtual void ack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token) = 0;
  // ack() of each (msg_id, claim_token), all or nothing: StaleFence for any stale token, and then
  // none is acked. One statement on PostgreSQL (ack_batch).
  virtual void ack_many(std::string_view tenant, std::string_view queue, const std::vector<Ack>& acks) = 0;
  // A worker's steady state in one round trip: ack the last batch, claim the next.
  virtual std::vector<Delivery> ack_and_claim(std::string_view tenant, std::string_view queue,
                                              std::string_view consumer, const std::vector<Ack>& acks, int max_messages,
                                              std::optional<Duration> visibility = std::nullopt) = 0;
  virtual NackOutcome nack(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                           std::int64_t claim_token, std::string_view error, bool permanent = false) = 0;
  // StaleFence when the delivery was taken over or its visibility already ran out.
  virtual TimePoint extend(std::string_view tenant, std::string_view queue, std::int64_t msg_id,
                           std::int64_t claim_token, Duration visibility) = 0;
  virtual QueueStats stats(std::string_view tenant, std::string_view queue, ReadClass read = {}) = 0;
  virtual std::vector<DeadLetter> dead_letters(std::string_view tenant, std::string_view queue,
                                               std::int64_t after_msg_id = 0, int max_rows = 100) = 0;
  // Back into the queue (attempt 0); all that kept their payload when msg_ids is empty.
  virtual int redrive(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids = {},
                      int max_rows = 100) = 0;
  virtual int purge_dead(std::string_view tenant, std::string_view queue,
                         const std::vector<std::int64_t>& msg_ids = {}) = 0;
  // Limits producers of the queue to limit->rate enqueues per limit->per (a batch takes one per
  // message); over it enqueue fails with QueueFull whose retry_after() says when to try again.
  // nullopt removes the limit. InvalidArgument for a rate outside 1..1e9 or a bad per.
  virtual void admission_limit(std::string_view tenant, std::string_view queue, std::optional<RateLimit> limit) = 0;
  // The share of a fairness key in a fair queue (QueueOptions::fairness), relative to the other
  // keys' (1 each by default), for messages enqueued after it; nullopt resets it to 1.
  // InvalidArgument for a weight outside 1..1000 or a queue without fairness.
  virtual void fairness_weight(std::string_view tenant, std::string_view queue, std::string_view fairness_key,
                               std::optional<int> weight) = 0;
  // Sets what a resource allows (replacing its limits; all empty removes them). A message whose
  // resource refuses it stays ready and is skipped by claims, no attempt charged.
  virtual void resource_limit(std::string_view tenant, std::string_view resource, const ResourceLimits& limits) = 0;
  // Gives the resource a circuit breaker, or removes it (nullopt).
  virtual void breaker_configure(std::string_view tenant, std::string_view resource,
                                 const std::optional<BreakerOptions>& options) = 0;
  // NotFound for a resource without a breaker.
  virtual BreakerStatus breaker_state(std::string_view tenant, std::string_view resource) = 0;
  // Every limit of the tenant's flow control and what it holds now, ordered by kind, queue and
  // subject.
  virtual std::vector<FlowLimit> flow_state(std::string_view tenant) = 0;
  // Inside the consumer's transaction: true the first time an event is seen, false after.
  virtual bool inbox_accept(std::string_view tenant, std::string_view consumer, std::string_view event_id) = 0;
};

}  // namespace forgeyard
