// Durable workflows: the rules both backends share (core/workflow.hpp).
#include "core/workflow.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/canonical_json.hpp"
#include "core/errors.hpp"
#include "core/queue_options.hpp"
#include "core/uuid.hpp"

namespace fy::core::workflow {

bool is_workflow_queue(std::string_view queue) {
  return queue.substr(0, queue_prefix.size()) == queue_prefix;
}

void refuse_reserved_queue(std::string_view queue) {
  if (is_workflow_queue(queue))
    throw Error(sqlstate::invalid_parameter, "queue names starting \"_wf.\" are reserved for workflows",
                "workflow_start creates the queue of a definition; queue_alter may change its options");
}

std::string queue_name(std::string_view workflow, std::int32_t version) {
  return std::string(queue_prefix) + std::string(workflow) + "@" + std::to_string(version);
}

void check_version(std::int32_t version) {
  if (version < 1) invalid_parameter("version must be at least 1, not " + std::to_string(version));
}

Definition parse_definition(std::string_view text) {
  const std::size_t at = text.rfind('@');
  Definition d;
  const auto bad = [&] {
    invalid_parameter("definitions must be 'workflow@version' with a version of at least 1, not '" +
                      std::string(text.substr(0, 300)) + "'");
  };
  if (at == std::string_view::npos || at == 0 || at > max_workflow_bytes) bad();
  const std::string_view digits = text.substr(at + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d.version);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || d.version < 1) bad();
  d.workflow = std::string(text.substr(0, at));
  return d;
}

std::string canonical(std::string_view json, const char* argument) {
  return canonical_json(parse_json(json, argument, max_json_depth), argument, max_json_bytes);
}

bool is_finished(std::string_view state) {
  return state == "completed" || state == "failed" || state == "cancelled" || state == "timed_out" ||
         state == "compensation_failed" || state == "parked";
}

void check_state(std::string_view state) {
  if (state.size() > 64) throw Error(sqlstate::string_too_long, "state is longer than 64 bytes");
  for (const char* s : states)
    if (state == s) return;
  invalid_parameter(
      "state must be one of pending, running, sleeping, waiting, compensating, completed, failed, "
      "cancelled, timed_out, compensation_failed, parked; not '" +
      std::string(state.substr(0, 100)) + "'");
}

bool is_retryable(std::string_view state) {
  return state == "failed" || state == "parked" || state == "compensation_failed";
}

bool ends_with_compensation(std::string_view state) {
  return state == "failed" || state == "cancelled" || state == "timed_out";
}

void check_same_step(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                     std::int32_t position) {
  if (!recorded || recorded->step == step) return;
  throw Error(sqlstate::nondeterminism,
              "workflow run " + std::string(run_id) + " called step \"" + std::string(step) + "\" at position " +
                  std::to_string(position) + ", where its journal has step \"" + recorded->step + "\"",
              "the workflow's code no longer replays its journal; park the run (workflow_park), then fix the "
              "code or retry the run (workflow_retry)");
}

std::int32_t check_position(std::int64_t position) {
  if (position < 1 || position > std::numeric_limits<std::int32_t>::max())
    throw Error(sqlstate::invalid_parameter, "position must be 1 or more", "got " + std::to_string(position));
  return static_cast<std::int32_t>(position);
}

void check_position_follows(std::int32_t position, const std::optional<std::string>& previous_status,
                            std::string_view run_id, const char* function) {
  if (position == 1 || previous_status == "done") return;
  throw Error(sqlstate::invalid_parameter,
              std::string(function) + " at position " + std::to_string(position) + " of workflow run " +
                  std::string(run_id) + ", but the step at position " + std::to_string(position - 1) + " is " +
                  (previous_status ? "not done (" + *previous_status + ")" : std::string("not recorded")),
              "count positions from 1 for the first step call of an epoch, one more per step; a step's "
              "position follows a step recorded done");
}

StepAnswer decide_step(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                       std::int32_t position, std::int64_t now) {
  if (!recorded) return StepAnswer::run;
  check_same_step(recorded, step, run_id, position);
  if (recorded->status != "done") return StepAnswer::run;
  return recorded->wake_at && *recorded->wake_at > now ? StepAnswer::run : StepAnswer::done;
}

std::int64_t timer_delay(std::int64_t wake_at, std::int64_t now) {
  return std::clamp<std::int64_t>(wake_at - now, 0, max_queue_duration_usecs);
}

WaitAction decide_wait(const std::optional<JournalEntry>& recorded, std::string_view step, std::string_view run_id,
                       std::int32_t position, bool signal_there, const WaitState& waiting, std::int64_t now) {
  if (recorded && decide_step(recorded, step, run_id, position, now) == StepAnswer::done) return WaitAction::replay;
  if (signal_there) return WaitAction::receive;
  if (waiting.position == position && waiting.until && *waiting.until <= now) return WaitAction::time_out;
  return WaitAction::wait;
}

std::int64_t wait_end(const WaitState& waiting, std::int32_t position, std::int64_t now, std::int64_t timeout) {
  return waiting.position == position && waiting.until ? *waiting.until : now + timeout;
}

std::string signal_result(const SignalAnswer& answer) {
  return canonical("{\"status\":\"" + answer.status + "\",\"payload\":" + answer.payload.value_or("null") + "}",
                   "result");
}

SignalAnswer parse_signal_result(std::string_view json) {
  const Json value = parse_json(json, "result", max_json_depth);
  const Json* status = value.find("status");
  const Json* payload = value.find("payload");
  if (status == nullptr || status->kind != Json::Kind::string)
    throw Error(sqlstate::data_corrupted, "a signal wait's journal result has no status");
  SignalAnswer answer{status->text, std::nullopt};
  if (payload != nullptr && payload->kind != Json::Kind::null)
    answer.payload = canonical_json(*payload, "payload", max_json_bytes);
  return answer;
}

std::string sleep_result(std::string_view until_iso) {
  return "{\"until\":\"" + std::string(until_iso) + "\"}";
}

std::string idempotency_key(std::string_view run_id, std::int32_t position, std::string_view step) {
  return std::string(run_id) + ":" + std::to_string(position) + ":" + std::string(step);
}

void check_owner(const Ownership& run, std::int64_t epoch, std::string_view run_id, std::string_view as) {
  // The message is built only for an error: every journal write passes here.
  const auto which = [&] { return "workflow run " + std::string(run_id); };
  if (run.epoch != epoch)
    throw Error(
        sqlstate::stale_fence,
        which() + ": epoch " + std::to_string(epoch) + " is not the run's current epoch " + std::to_string(run.epoch),
        "another worker took the run over; stop working on it");
  if (as == "owned" ? run.state != "running" && run.state != "compensating" : run.state != as)
    throw Error(sqlstate::stale_fence,
                which() + " is " + run.state + ", not " + std::string(as) + " under epoch " + std::to_string(epoch),
                "stop working on it");
  if (!run.live)
    throw Error(sqlstate::stale_fence, which() + ": the lease of epoch " + std::to_string(epoch) + " ran out",
                "extend the lease (workflow_extend) before it runs out; the run will be handed out again");
}

void throw_cursor_lost(std::int64_t epoch, std::string_view run_id) {
  throw Error(sqlstate::stale_fence,
              "workflow run " + std::string(run_id) + ": the step cursor of epoch " + std::to_string(epoch) +
                  " is gone (a crash, a failover or a restore emptied it, or the run was taken over)",
              "stop working on the run; it is handed out again when the lease of this epoch runs out");
}

void throw_concurrent_step(std::string_view run_id) {
  throw Error(sqlstate::serialization_failure,
              "workflow run " + std::string(run_id) +
                  ": another step call of this epoch moved the step cursor while this one waited",
              "make one step call of a run at a time; retry this one");
}

std::string compensation_key(std::string_view run_id, std::int32_t position, std::string_view step) {
  return idempotency_key(run_id, position, step) + ":compensate";
}

void check_next_compensation(const std::optional<std::int32_t>& next, std::int32_t position, std::string_view run_id) {
  if (next == position) return;
  throw Error(sqlstate::invalid_parameter,
              "the next compensation of workflow run " + std::string(run_id) + " is " +
                  (next ? "at position " + std::to_string(*next) : std::string("none")) + ", not at position " +
                  std::to_string(position),
              "compensations run newest first: ask workflow_compensation for the next one");
}

bool keeps_error(std::string_view state) {
  return state == "compensation_failed";
}

std::string child_signal(std::string_view child_run_id) {
  return "child:" + std::string(child_run_id);
}

bool tells_parent(std::string_view state) {
  return is_finished(state) && state != "parked";
}

std::string child_payload(std::string_view state, const std::optional<std::string>& result_json,
                          const std::optional<std::string>& error) {
  // No size limit here: the child's result was taken before, and the parent gets all of it.
  const std::string result =
      result_json ? canonical_json(parse_json(*result_json, "result", max_json_depth), "result", std::size_t{1} << 40)
                  : "null";
  return "{\"error\":" + (error ? json_quote(*error) : std::string("null")) + ",\"result\":" + result +
         ",\"state\":" + json_quote(state) + "}";
}

void throw_unknown_run(std::string_view run_id, std::string_view tenant) {
  throw Error(sqlstate::undefined_object,
              "workflow run " + std::string(run_id) + " not found for tenant \"" + std::string(tenant) + "\"");
}

void check_current_step(std::int32_t cursor, const std::optional<std::string>& cursor_step, std::string_view step,
                        const char* function) {
  if (cursor >= 1 && cursor_step && *cursor_step == step) return;
  throw Error(sqlstate::invalid_parameter,
              std::string(function) + " for step \"" + std::string(step) + "\", but the run's current step is " +
                  (cursor_step ? "\"" + *cursor_step + "\"" : std::string("none")),
              "call workflow_step for the step first, under the same epoch");
}

void throw_step_recorded(std::string_view step, std::string_view run_id, std::int32_t position, bool failing) {
  throw Error(sqlstate::invalid_parameter,
              "step \"" + std::string(step) + "\" of workflow run " + std::string(run_id) + " at position " +
                  std::to_string(position) +
                  (failing ? " is recorded as done; it cannot fail" : " is recorded already, with another result"),
              "a step's recorded result never changes: replay returns it");
}

std::string step_error(std::string_view step, std::string_view error) {
  return "step \"" + std::string(step) + "\" failed: " + std::string(error);
}

std::int64_t check_step_timeout(const fy::core::Duration& timeout) {
  return fy::core::check_duration("timeout", timeout, fy::core::max_queue_duration_usecs);
}

std::string step_timeout_error(std::string_view step) {
  return "step \"" + std::string(step) + "\" ran past its timeout";
}

std::string lapsed_state(std::string_view state) {
  return state == "compensating" ? "compensation_failed" : "failed";
}

std::string lapsed_error(const std::optional<std::string>& timed_out_step) {
  return (timed_out_step ? step_timeout_error(*timed_out_step) : "the owner's lease ran out") +
         " on every attempt (the definition queue's max_attempts)";
}

std::int64_t capped_lease(std::int64_t lease, const std::optional<std::int64_t>& step_deadline, std::int64_t now) {
  return step_deadline ? std::min(lease, *step_deadline - now) : lease;
}

void set_start_option(StartOptions& options, std::string_view key, std::string_view json_type, std::string_view value) {
  const auto need_string = [&] {
    if (json_type != "string") invalid_parameter("workflow option " + std::string(key) + " must be a string");
  };
  if (key == "deadline") {
    need_string();
    options.deadline = std::string(value);
  } else if (key == "priority") {
    need_string();
    options.priority = priority_from_name("priority", value);
  } else if (key == "retention") {
    need_string();
    options.retention = std::string(value);
  } else if (key == "parent") {
    need_string();
    std::optional<std::string> parent = parse_uuid(value);
    if (!parent)
      invalid_parameter("workflow option parent must be a run id (a uuid), not '" + std::string(value) + "'");
    options.parent = std::move(parent);
  } else {
    invalid_parameter("unknown workflow option " + std::string(key.substr(0, 100)) +
                      " (the options are deadline, priority, parent and retention)");
  }
}

std::int64_t check_retention(const Duration& retention) {
  const std::int64_t usecs = check_duration("workflow option retention", retention, max_queue_retention_usecs);
  if (usecs < 1'000'000) invalid_parameter("workflow option retention must be at least 1 second");
  return usecs;
}

}  // namespace fy::core::workflow
