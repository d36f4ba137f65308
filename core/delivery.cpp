#include "core/delivery.hpp"

#include "core/errors.hpp"

namespace fy::core {

namespace {
bool is_current(const DeliveryRow* row, std::int64_t claim_token) {
  return row != nullptr && row->state == "pending" && row->claim_token == claim_token;
}
}  // namespace

AckAction decide_ack(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token) {
  if (row == nullptr || row->state != "pending") return AckAction::no_op;
  if (row->claim_token != claim_token) throw_stale_claim(msg_id, claim_token);
  return AckAction::finish;
}

void check_nack(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token) {
  if (!is_current(row, claim_token)) throw_stale_claim(msg_id, claim_token);
}

void check_extend(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token, std::int64_t now) {
  if (!is_current(row, claim_token) || row->visible_at <= now) throw_stale_claim(msg_id, claim_token);
}

void throw_stale_claim(std::int64_t msg_id, std::int64_t claim_token) {
  throw Error(sqlstate::stale_fence,
              "claim token " + std::to_string(claim_token) + " is not the current delivery of message " +
                  std::to_string(msg_id),
              "the visibility ran out and the message was claimed again, or it was nacked; stop work on it");
}

}  // namespace fy::core
