// Queues and the inbox in the SQLite store: the extension's rules and answers, decided by the
// same core code. Split by phase like the extension, one file each to pair with its twin there:
// queue.cpp, queue_create.cpp, queue_enqueue.cpp, queue_claim.cpp, queue_finish.cpp,
// queue_admin.cpp and inbox.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.hpp"
#include "core/flow.hpp"
#include "forgeyard/queues.hpp"
#include "sqlite/session.hpp"

namespace forgeyard::detail {

// The extension's queue rules in the SQLite store, decided by the same core code.
class SqliteQueues final : public Queues {
 public:
  explicit SqliteQueues(SqliteSession& session) : session_(session) {}
  void create(std::string_view tenant, std::string_view queue, const QueueOptions& options) override;
  bool drop(std::string_view tenant, std::string_view queue) override;
  std::int64_t enqueue(std::string_view tenant, std::string_view queue, const OutgoingMessage& message) override;
  std::vector<std::int64_t> enqueue_many(std::string_view tenant, std::string_view queue,
                                         const std::vector<OutgoingMessage>& messages) override;
  void ack_many(std::string_view tenant, std::string_view queue, const std::vector<Ack>& acks) override;
  std::vector<Delivery> claim(std::string_view tenant, std::string_view queue, std::string_view consumer,
                              int max_messages, std::optional<Duration> visibility) override;
  void ack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token) override;
  std::vector<Delivery> ack_and_claim(std::string_view tenant, std::string_view queue, std::string_view consumer,
                                      const std::vector<Ack>& acks, int max_messages,
                                      std::optional<Duration> visibility) override;
  NackOutcome nack(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token,
                   std::string_view error, bool permanent) override;
  TimePoint extend(std::string_view tenant, std::string_view queue, std::int64_t msg_id, std::int64_t claim_token,
                   Duration visibility) override;
  QueueStats stats(std::string_view tenant, std::string_view queue, ReadClass read) override;
  std::vector<DeadLetter> dead_letters(std::string_view tenant, std::string_view queue, std::int64_t after_msg_id,
                                       int max_rows) override;
  int redrive(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids,
              int max_rows) override;
  int purge_dead(std::string_view tenant, std::string_view queue, const std::vector<std::int64_t>& msg_ids) override;
  void admission_limit(std::string_view tenant, std::string_view queue, std::optional<RateLimit> limit) override;
  void fairness_weight(std::string_view tenant, std::string_view queue, std::string_view fairness_key,
                       std::optional<int> weight) override;
  std::vector<FlowLimit> flow_state(std::string_view tenant) override;
  void resource_limit(std::string_view tenant, std::string_view resource, const ResourceLimits& limits) override;
  void breaker_configure(std::string_view tenant, std::string_view resource,
                         const std::optional<BreakerOptions>& options) override;
  BreakerStatus breaker_state(std::string_view tenant, std::string_view resource) override;
  bool inbox_accept(std::string_view tenant, std::string_view consumer, std::string_view event_id) override;

 private:
  SqliteSession& session_;
};

// What the SQLite queue calls share (their twin is extension/queue.hpp).
namespace sqlite_queue {

struct Queue {
  std::string tenant, name;
  fy::core::QueueOptions options;
  fy::core::Usage used;
};

void check_queue_name(std::string_view tenant, std::string_view queue);
// The queue and its usage counters; 42704 if it does not exist (queue.cpp).
Queue load(Db& db, std::string_view tenant, std::string_view queue);
void change_usage(Db& db, const Queue& queue, std::int64_t messages, std::int64_t bytes);
// A message leaves the live queue: room back, and the next of its key (`key`: its
// core::group_key) becomes a head.
void release(Db& db, const Queue& queue, std::int64_t bytes, const std::optional<std::string>& key);
// The forms PostgreSQL's uuid input accepts (optional braces, dashes optional), canonicalized.
std::string canonical_uuid(std::string_view s);

// Room for one message of `bytes` in class `priority`, or FY020 (queue_enqueue.cpp). Counts it in
// queue.used, and in the queues row unless the caller writes a batch's total itself.
void admit(Db& db, Queue& queue, int priority, std::int64_t bytes, bool write_usage = true);
// Takes `count` tokens of the queue's admission limit (FY020 with a retry-after when it has too
// few), and decides whether a nack's retry fits the retry budget (queue_flow.cpp).
void admit_rate(Db& db, const Queue& queue, std::int64_t count, std::int64_t now);
fy::core::flow::RetryDecision admit_retry(Db& db, const Queue& queue, std::int64_t now);
// Resources (queue_flow.cpp): whether a claim may hand out a message bound to `resource` (and its
// charge, or its refusal, recorded), and how a delivery bound to it ended.
bool resource_allows(Db& db, const Queue& queue, const std::optional<std::string>& resource, bool transfer,
                     std::int64_t now);
void record_outcome(Db& db, const Queue& queue, const std::optional<std::string>& resource,
                    fy::core::flow::Outcome outcome, std::int64_t now);
// In a fair queue, the pass of a new message of class `priority` and key `fairness_key`
// (queue_flow.cpp).
std::int64_t next_pass(Db& db, const Queue& queue, int priority, const std::optional<std::string>& fairness_key);
// Flow control's limits of a tenant and what they hold at `now`, as forgeyard.flow_state shows
// them (queue_flow.cpp).
std::vector<FlowLimit> flow_rows(Db& db, std::string_view tenant, std::int64_t now);
// Counts a pending message into its key's row (`key`: its core::group_key); true if it is a head.
bool join_key(Db& db, const Queue& queue, const std::optional<std::string>& key);

// The visibility of a claim: the argument, checked, else the queue's (queue_claim.cpp).
std::int64_t visibility_usecs(const Queue& queue, std::optional<Duration> visibility);
std::vector<Delivery> claim_in(Db& db, const Queue& queue, std::string_view consumer, int max_messages,
                               std::int64_t visibility, std::int64_t now, std::vector<Delivery>* lapsed = nullptr);

// The calls on one message inside an open write, for callers that work on several tables in one
// transaction (the workflows): queue_create.cpp, queue_enqueue.cpp and queue_finish.cpp.
// create_in: false (nothing changed) if the queue exists.
bool create_in(Db& db, std::string_view tenant, std::string_view queue, const fy::core::QueueOptions& options,
               std::int64_t now);
// With `batch`, the admission is counted there and written by the caller.
std::int64_t enqueue_one(Db& db, Queue& queue, const OutgoingMessage& message, std::int64_t now,
                         fy::core::Usage* batch = nullptr);
void ack_in(Db& db, const Queue& queue, std::int64_t msg_id, std::int64_t claim_token, std::int64_t now);
// The acks of one call, in order; the messages without a key leave in one statement.
void ack_all(Db& db, const Queue& queue, const std::vector<Ack>& acks, std::int64_t now);
NackOutcome nack_in(Db& db, const Queue& queue, std::int64_t msg_id, std::int64_t claim_token, std::string_view error,
                    bool permanent, std::int64_t now);
// The new visible_at.
std::int64_t extend_in(Db& db, const Queue& queue, std::int64_t msg_id, std::int64_t claim_token,
                       std::int64_t visibility, std::int64_t now);

}  // namespace sqlite_queue
}  // namespace forgeyard::detail
