#pragma once

#include "forgeyard/queues.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

class PgQueues final : public Queues {
 public:
  explicit PgQueues(PgSession& session) : session_(session) {}
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
  PgSession& session_;
};

}  // namespace forgeyard::detail
