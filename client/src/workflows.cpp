// The client side of workflows that both backends share: the checks and conversions of
// workflow_input.hpp, through core/workflow.hpp as the extension does.
#include <stdexcept>

#include "core/canonical_json.hpp"
#include "core/uuid.hpp"
#include "core/workflow.hpp"
#include "error_map.hpp"
#include "queue_options.hpp"
#include "workflow_input.hpp"

namespace forgeyard::detail {

std::string run_id_param(std::string_view run_id) {
  const std::optional<std::string> bytes = fy::core::parse_uuid(run_id);
  if (!bytes)
    throw Error(ErrorKind::InvalidArgument, "22P02",
                "invalid input syntax for type uuid: \"" + std::string(run_id.substr(0, 100)) + "\"");
  return fy::core::format_uuid(*bytes);
}

std::string json_param(std::string_view json, const char* argument) {
  return core_guarded([&] { return fy::core::workflow::canonical(json, argument); });
}

std::optional<std::string> json_result(const std::optional<std::string>& json) {
  if (!json) return std::nullopt;
  return core_guarded([&] { return fy::core::workflow::canonical(*json, "result"); });
}

std::string start_options_json(const WorkflowStartOptions& options) {
  std::string out = "{";
  auto add = [&](const char* key, const std::string& value) {
    if (out.size() > 1) out += ",";
    out += std::string("\"") + key + "\":\"" + value + "\"";
  };
  if (options.deadline) add("deadline", std::to_string(options.deadline->count()) + " microseconds");
  if (options.parent) add("parent", run_id_param(*options.parent));
  if (options.retention) add("retention", std::to_string(options.retention->count()) + " microseconds");
  if (options.priority != Priority::Interactive) add("priority", std::string(core_priority_name(options.priority)));
  return out + "}";
}

std::string schedule_options_json(const ScheduleOptions& options) {
  return "{\"catch_up\":" + std::to_string(options.catch_up) + ",\"input\":" + json_param(options.input, "input") +
         ",\"timezone\":" + fy::core::json_quote(options.timezone) + "}";
}

SignalWait::Status parse_wait_status(const std::string& status) {
  if (status == "received") return SignalWait::Status::Received;
  if (status == "waiting") return SignalWait::Status::Waiting;
  if (status == "timed_out") return SignalWait::Status::TimedOut;
  throw Error(ErrorKind::Internal, "XX000", "workflow_wait_signal answered \"" + status + "\"");
}

StepFailure parse_step_failure(const std::string& outcome) {
  if (outcome == "retry") return StepFailure::Retry;
  if (outcome == "failed" || outcome == "compensation_failed") return StepFailure::Failed;
  throw Error(ErrorKind::Internal, "XX000", "workflow_step_fail answered \"" + outcome + "\"");
}

}  // namespace forgeyard::detail
