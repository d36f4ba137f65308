// Delivery fencing: what ack, nack and extend may do with a claimed message, decided from its
// stored state, its claim token and the clock, and the FY001 both backends raise otherwise
// (docs/sql-api.md#queues).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fy::core {

// The stored delivery of a message: its state ("pending", "acked" or "dead"), the token of its
// current claim (none when never claimed or after a nack) and the end of its visibility. Times
// in microseconds on the backend's own epoch, the same as `now`.
struct DeliveryRow {
  std::string state;
  std::optional<std::int64_t> claim_token;
  std::int64_t visible_at = 0;
};

enum class AckAction {
  finish,  // the current delivery: ack it
  no_op,   // already acked, dead or gone: a retry after a lost connection is safe
};

// ack. The visibility is not looked at: an ack after it ran out but before anyone claimed the
// message again is accepted. A token that is not the current claim (taken over, nacked) is FY001.
// `row` is nullptr for a message that no longer exists.
AckAction decide_ack(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token);

// nack: FY001 unless `claim_token` is the current claim of a pending message.
void check_nack(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token);

// extend: FY001 unless `claim_token` is the current claim and its visibility has not run out
// (visible_at > now): a lapsed delivery cannot be extended, as a lapsed lease cannot be renewed.
void check_extend(const DeliveryRow* row, std::int64_t msg_id, std::int64_t claim_token, std::int64_t now);

// The FY001 of the three.
[[noreturn]] void throw_stale_claim(std::int64_t msg_id, std::int64_t claim_token);

}  // namespace fy::core
