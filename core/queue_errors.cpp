#include "core/queue_errors.hpp"

#include <string>

#include "core/errors.hpp"

namespace fy::core {

void throw_unknown_queue(std::string_view tenant, std::string_view queue) {
  throw Error(sqlstate::undefined_object,
              "queue \"" + std::string(queue) + "\" does not exist for tenant \"" + std::string(tenant) + "\"");
}

void throw_queue_full(std::string_view queue, const QueueOptions& options, int priority) {
  throw Error(sqlstate::queue_full,
              "queue \"" + std::string(queue) + "\" is full for priority class " + priority_names[priority],
              "class " + std::string(priority_names[priority]) + " is admitted up to " +
                  std::to_string(options.admit_percent[priority]) + "% of max_messages and max_bytes");
}

void throw_payload_too_large(std::string_view queue, const QueueOptions& options, std::int64_t bytes) {
  throw Error(
      sqlstate::payload_too_large,
      "payload of " + std::to_string(bytes) + " bytes is over the limit of queue \"" + std::string(queue) + "\"",
      "max_payload_bytes is " + std::to_string(options.max_payload_bytes) +
          "; store the bytes elsewhere and send a reference");
}

void throw_partition_key_required(std::string_view queue) {
  throw Error(sqlstate::invalid_parameter,
              "partition_key is required: queue \"" + std::string(queue) + "\" is partition-ordered");
}

void throw_event_id_mismatch(std::int64_t first) {
  throw Error(sqlstate::idempotency_mismatch, "event_id was enqueued before with a different payload",
              "message " + std::to_string(first) + " carries this event_id");
}

void throw_not_redrivable(std::int64_t msg_id) {
  throw Error(sqlstate::invalid_parameter,
              "dead letter " + std::to_string(msg_id) + " cannot be redriven: its payload was dropped",
              "the queue has dead_letter_payload = drop");
}

}  // namespace fy::core
