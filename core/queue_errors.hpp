// The errors of the queue functions that both backends raise, with one text each, so the two
// cannot drift (the conformance suite compares these messages on every backend).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/queue_options.hpp"

namespace fy::core {

// 42704: the tenant has no queue of this name.
[[noreturn]] void throw_unknown_queue(std::string_view tenant, std::string_view queue);
// FY020: no capacity left for the class (its admit_<class> share of max_messages / max_bytes).
[[noreturn]] void throw_queue_full(std::string_view queue, const QueueOptions& options, int priority);
// FY021: the payload is over max_payload_bytes.
[[noreturn]] void throw_payload_too_large(std::string_view queue, const QueueOptions& options, std::int64_t bytes);
// 22023: a partition-ordered queue takes only keyed messages.
[[noreturn]] void throw_partition_key_required(std::string_view queue);
// FY011: the event_id is within the dedup window with another payload (message `first` has it).
[[noreturn]] void throw_event_id_mismatch(std::int64_t first);
// 22023: a dead letter whose payload was dropped cannot go back into the queue.
[[noreturn]] void throw_not_redrivable(std::int64_t msg_id);

}  // namespace fy::core
