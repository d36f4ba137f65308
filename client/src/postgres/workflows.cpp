// The Workflows capability over the forgeyard extension's SQL API (docs/sql-api.md#workflows).
#include "postgres/workflows.hpp"

#include "workflow_input.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement wf_start_sql{
    "fy_workflow_start", "SELECT forgeyard.workflow_start($1, $2, $3, $4, $5::pg_catalog.jsonb, $6::pg_catalog.jsonb)",
    6};
const PgStatement wf_claim_sql{
    "fy_workflow_claim",
    "SELECT run_id, workflow, version, epoch, state, input::pg_catalog.text"
    "  FROM forgeyard.workflow_claim($1, $2, $3::pg_catalog.text[], $4, $5::pg_catalog.interval)",
    5};
const PgStatement wf_step_sql{
    "fy_workflow_step",
    "SELECT status, result::pg_catalog.text, idempotency_key"
    "  FROM forgeyard.workflow_step($1, $2, $3, $4, $5::pg_catalog.interval, $6::pg_catalog.int4)",
    6};
const PgStatement wf_step_complete_sql{
    "fy_workflow_step_complete",
    "SELECT forgeyard.workflow_step_complete($1, $2, $3, $4, $5::pg_catalog.jsonb, $6, $7::pg_catalog.int4)", 7};
const PgStatement wf_step_fail_sql{
    "fy_workflow_step_fail", "SELECT forgeyard.workflow_step_fail($1, $2, $3, $4, $5, $6, $7::pg_catalog.int4)", 7};
const PgStatement wf_compensation_sql{"fy_workflow_compensation",
                                      "SELECT position, step, compensation, result::pg_catalog.text, idempotency_key"
                                      " FROM forgeyard.workflow_compensation($1, $2, $3)",
                                      3};
const PgStatement wf_compensation_complete_sql{"fy_workflow_compensation_complete",
                                               "SELECT forgeyard.workflow_compensation_complete($1, $2, $3, $4)", 4};
const PgStatement wf_compensation_fail_sql{"fy_workflow_compensation_fail",
                                           "SELECT forgeyard.workflow_compensation_fail($1, $2, $3, $4, $5, $6)", 6};
const PgStatement wf_complete_sql{"fy_workflow_complete",
                                  "SELECT forgeyard.workflow_complete($1, $2, $3, $4::pg_catalog.jsonb)", 4};
const PgStatement wf_fail_sql{"fy_workflow_fail", "SELECT forgeyard.workflow_fail($1, $2, $3, $4)", 4};
const PgStatement wf_park_sql{"fy_workflow_park", "SELECT forgeyard.workflow_park($1, $2, $3, $4)", 4};
const PgStatement wf_extend_sql{
    "fy_workflow_extend", "SELECT " FY_USECS("forgeyard.workflow_extend($1, $2, $3, $4::pg_catalog.interval)"), 4};
const PgStatement wf_cancel_sql{"fy_workflow_cancel", "SELECT forgeyard.workflow_cancel($1, $2, $3)", 3};
const PgStatement wf_retry_sql{"fy_workflow_retry", "SELECT forgeyard.workflow_retry($1, $2)", 2};
const PgStatement wf_status_sql{
    "fy_workflow_status",
    "SELECT state, workflow, version, result::pg_catalog.text, error, owner, epoch, " FY_USECS(
        "updated_at") " FROM forgeyard.workflow_status($1, $2)",
    2};
const PgStatement wf_journal_sql{"fy_workflow_journal",
                              "SELECT position, step, status, result::pg_catalog.text, epoch, " FY_USECS(
                                  "recorded_at") ", error, attempts, compensation, compensation_status,"
                                                 " compensation_error"
                                                 " FROM forgeyard.workflow_journal($1, $2)",
                              2};

const PgStatement wf_sleep_until_sql{
    "fy_workflow_sleep_until",
    "SELECT forgeyard.workflow_sleep($1, $2, $3, $4, 'epoch'::pg_catalog.timestamptz OPERATOR(pg_catalog.+)"
    " ($5::pg_catalog.int8 OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval), $6::pg_catalog.int4)",
    6};
const PgStatement wf_sleep_for_sql{
    "fy_workflow_sleep_for",
    "SELECT forgeyard.workflow_sleep($1, $2, $3, $4, forgeyard.now() OPERATOR(pg_catalog.+)"
    " $5::pg_catalog.interval, $6::pg_catalog.int4)",
    6};
const PgStatement wf_wait_signal_sql{
    "fy_workflow_wait_signal",
    "SELECT status, payload::pg_catalog.text FROM forgeyard.workflow_wait_signal($1, $2, "
    "$3, $4, $5, $6::pg_catalog.interval, $7::pg_catalog.int4)",
    7};
const PgStatement wf_signal_sql{
    "fy_workflow_signal", "SELECT forgeyard.workflow_signal($1, $2, $3, $4::pg_catalog.jsonb, $5::pg_catalog.uuid)", 5};
const PgStatement schedule_create_sql{"fy_schedule_create",
                                      "SELECT forgeyard.schedule_create($1, $2, $3, $4, $5, $6::pg_catalog.jsonb)", 6};
const PgStatement schedule_drop_sql{"fy_schedule_drop", "SELECT forgeyard.schedule_drop($1, $2)", 2};
const PgStatement schedule_tick_sql{"fy_schedule_tick", "SELECT forgeyard.schedule_tick($1)", 1};
const PgStatement schedule_list_sql{
    "fy_schedule_list",
    "SELECT schedule, workflow, version, spec, timezone, catch_up, input::pg_catalog.text, " FY_USECS(
        "next_fire") ", " FY_USECS("last_fire") ", fires, skipped FROM forgeyard.schedule_list($1)",
    1};
const PgStatement wf_list_sql{"fy_workflow_list",
                              "SELECT run_id, run_key, workflow, version, state, owner, epoch, error, " FY_USECS(
                                  "updated_at") " FROM forgeyard.workflow_list($1, $2, $3)",
                              3};

// A step call's position, if the caller names one (NULL: the epoch's cursor).
std::optional<std::string> position_param(std::optional<int> position) {
  return position ? std::optional(std::to_string(*position)) : std::nullopt;
}

std::optional<std::string> wf_optional_text(const PgResult& r, int row, int col) {
  if (r.is_null(row, col)) return std::nullopt;
  return r.text(row, col);
}

}  // namespace

std::string PgWorkflows::start(std::string_view tenant, std::string_view workflow, int version,
                               std::string_view run_key, std::string_view input_json,
                               const WorkflowStartOptions& options) {
  return session_.measure("workflow.start", [&] {
    const std::string input = json_param(input_json, "input");
    const std::string opts = start_options_json(options);
    return session_
        .run(wf_start_sql,
             {text_param(tenant), text_param(workflow), std::to_string(version), text_param(run_key), input, opts})
        .text(0, 0);
  });
}

std::vector<ClaimedRun> PgWorkflows::claim(std::string_view tenant, std::string_view worker,
                                           const std::vector<std::string>& definitions, int max_runs,
                                           std::optional<Duration> lease) {
  return session_.measure("workflow.claim", [&] {
    std::vector<std::optional<std::string>> defs(definitions.begin(), definitions.end());
    PgResult r =
        session_.run(wf_claim_sql, {text_param(tenant), text_param(worker), array_param(defs), std::to_string(max_runs),
                                    lease ? std::optional<std::string>(interval_param(*lease)) : std::nullopt});
    std::vector<ClaimedRun> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.text(i, 1), static_cast<int>(r.int8(i, 2)), r.int8(i, 3), r.text(i, 4),
                     *json_result(r.text(i, 5))});
    return out;
  });
}

StepAnswer PgWorkflows::step(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                             std::string_view step, std::optional<Duration> timeout, std::optional<int> position) {
  return session_.measure("workflow.step", [&] {
    PgResult r = session_.run(
        wf_step_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                      timeout ? std::optional(interval_param(*timeout)) : std::nullopt, position_param(position)});
    return StepAnswer{r.text(0, 0) == "done", json_result(wf_optional_text(r, 0, 1)), r.text(0, 2)};
  });
}

void PgWorkflows::step_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                std::string_view step, std::string_view result_json,
                                const std::optional<std::string>& compensation, std::optional<int> position) {
  session_.measure("workflow.step_complete", [&] {
    session_.run(wf_step_complete_sql,
                 {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                  json_param(result_json, "result"), compensation, position_param(position)});
  });
}

StepFailure PgWorkflows::step_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                   std::string_view step, std::string_view error, bool permanent,
                                   std::optional<int> position) {
  return session_.measure("workflow.step_fail", [&] {
    return parse_step_failure(
        session_
            .run(wf_step_fail_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                                    text_param(error), permanent ? "t" : "f", position_param(position)})
            .text(0, 0));
  });
}

std::optional<Compensation> PgWorkflows::compensation(std::string_view tenant, std::string_view run_id,
                                                      std::int64_t epoch) {
  return session_.measure("workflow.compensation", [&]() -> std::optional<Compensation> {
    PgResult r = session_.run(wf_compensation_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch)});
    if (r.rows() == 0) return std::nullopt;
    return Compensation{static_cast<int>(r.int8(0, 0)), r.text(0, 1), r.text(0, 2),
                        json_result(wf_optional_text(r, 0, 3)), r.text(0, 4)};
  });
}

std::string PgWorkflows::compensation_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                               int position) {
  return session_.measure("workflow.compensation_complete", [&] {
    return session_
        .run(wf_compensation_complete_sql,
             {text_param(tenant), run_id_param(run_id), std::to_string(epoch), std::to_string(position)})
        .text(0, 0);
  });
}

StepFailure PgWorkflows::compensation_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                           int position, std::string_view error, bool permanent) {
  return session_.measure("workflow.compensation_fail", [&] {
    return parse_step_failure(
        session_
            .run(wf_compensation_fail_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch),
                                            std::to_string(position), text_param(error), permanent ? "t" : "f"})
            .text(0, 0));
  });
}

void PgWorkflows::sleep_until(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                              std::string_view step, TimePoint until, std::optional<int> position) {
  session_.measure("workflow.sleep", [&] {
    session_.run(wf_sleep_until_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                                      std::to_string(unix_usecs(until)), position_param(position)});
  });
}

void PgWorkflows::sleep_for(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                            Duration delay, std::optional<int> position) {
  session_.measure("workflow.sleep", [&] {
    session_.run(wf_sleep_for_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                                    interval_param(delay), position_param(position)});
  });
}

SignalWait PgWorkflows::wait_signal(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                    std::string_view step, std::string_view signal, Duration timeout,
                                    std::optional<int> position) {
  return session_.measure("workflow.wait_signal", [&] {
    PgResult r = session_.run(wf_wait_signal_sql,
                              {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(step),
                               text_param(signal), interval_param(timeout), position_param(position)});
    return SignalWait{parse_wait_status(r.text(0, 0)), json_result(wf_optional_text(r, 0, 1))};
  });
}

bool PgWorkflows::signal(std::string_view tenant, std::string_view run_id, std::string_view signal,
                         std::string_view payload_json, const std::optional<std::string>& signal_id) {
  return session_.measure("workflow.signal", [&] {
    return session_
        .run(wf_signal_sql,
             {text_param(tenant), run_id_param(run_id), text_param(signal), json_param(payload_json, "payload"),
              signal_id ? std::optional<std::string>(run_id_param(*signal_id)) : std::nullopt})
        .boolean(0, 0);
  });
}

void PgWorkflows::complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                           std::string_view result_json) {
  session_.measure("workflow.complete", [&] {
    session_.run(wf_complete_sql,
                 {text_param(tenant), run_id_param(run_id), std::to_string(epoch), json_param(result_json, "result")});
  });
}

void PgWorkflows::fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view error) {
  session_.measure("workflow.fail", [&] {
    session_.run(wf_fail_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(error)});
  });
}

void PgWorkflows::park(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view reason) {
  session_.measure("workflow.park", [&] {
    session_.run(wf_park_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch), text_param(reason)});
  });
}

TimePoint PgWorkflows::extend(std::string_view tenant, std::string_view run_id, std::int64_t epoch, Duration lease) {
  return session_.measure("workflow.extend", [&] {
    return from_unix_usecs(session_
                               .run(wf_extend_sql, {text_param(tenant), run_id_param(run_id), std::to_string(epoch),
                                                    interval_param(lease)})
                               .int8(0, 0));
  });
}

bool PgWorkflows::cancel(std::string_view tenant, std::string_view run_id, std::string_view reason) {
  return session_.measure("workflow.cancel", [&] {
    return session_.run(wf_cancel_sql, {text_param(tenant), run_id_param(run_id), text_param(reason)}).boolean(0, 0);
  });
}

bool PgWorkflows::retry(std::string_view tenant, std::string_view run_id) {
  return session_.measure("workflow.retry", [&] {
    return session_.run(wf_retry_sql, {text_param(tenant), run_id_param(run_id)}).boolean(0, 0);
  });
}

RunStatus PgWorkflows::status(std::string_view tenant, std::string_view run_id, ReadClass read) {
  return session_.measure("workflow.status", [&] {
    PgResult r = session_.read(wf_status_sql, {text_param(tenant), run_id_param(run_id)}, read);
    return RunStatus{r.text(0, 0),
                     r.text(0, 1),
                     static_cast<int>(r.int8(0, 2)),
                     json_result(wf_optional_text(r, 0, 3)),
                     wf_optional_text(r, 0, 4),
                     wf_optional_text(r, 0, 5),
                     r.int8(0, 6),
                     from_unix_usecs(r.int8(0, 7))};
  });
}

std::vector<JournalEntry> PgWorkflows::journal(std::string_view tenant, std::string_view run_id, ReadClass read) {
  return session_.measure("workflow.journal", [&] {
    PgResult r = session_.read(wf_journal_sql, {text_param(tenant), run_id_param(run_id)}, read);
    std::vector<JournalEntry> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({static_cast<int>(r.int8(i, 0)), r.text(i, 1), r.text(i, 2), json_result(wf_optional_text(r, i, 3)),
                     r.int8(i, 4), from_unix_usecs(r.int8(i, 5)), wf_optional_text(r, i, 6),
                     static_cast<int>(r.int8(i, 7)), wf_optional_text(r, i, 8), wf_optional_text(r, i, 9),
                     wf_optional_text(r, i, 10)});
    return out;
  });
}

std::vector<RunSummary> PgWorkflows::list(std::string_view tenant, const std::optional<std::string>& state,
                                          int max_runs, ReadClass read) {
  return session_.measure("workflow.list", [&] {
    PgResult r = session_.read(wf_list_sql, {text_param(tenant), state, std::to_string(max_runs)}, read);
    std::vector<RunSummary> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.text(i, 1), r.text(i, 2), static_cast<int>(r.int8(i, 3)), r.text(i, 4),
                     wf_optional_text(r, i, 5), r.int8(i, 6), wf_optional_text(r, i, 7),
                     from_unix_usecs(r.int8(i, 8))});
    return out;
  });
}

void PgWorkflows::schedule_create(std::string_view tenant, std::string_view schedule, std::string_view workflow,
                                  int version, std::string_view spec, const ScheduleOptions& options) {
  session_.measure("workflow.schedule_create", [&] {
    session_.run(schedule_create_sql, {text_param(tenant), text_param(schedule), text_param(workflow),
                                       std::to_string(version), text_param(spec), schedule_options_json(options)});
  });
}

bool PgWorkflows::schedule_drop(std::string_view tenant, std::string_view schedule) {
  return session_.measure("workflow.schedule_drop", [&] {
    return session_.run(schedule_drop_sql, {text_param(tenant), text_param(schedule)}).boolean(0, 0);
  });
}

int PgWorkflows::schedule_tick(const std::optional<std::string>& tenant) {
  return session_.measure("workflow.schedule_tick",
                          [&] { return static_cast<int>(session_.run(schedule_tick_sql, {tenant}).int8(0, 0)); });
}

std::vector<ScheduleInfo> PgWorkflows::schedule_list(std::string_view tenant, ReadClass read) {
  return session_.measure("workflow.schedule_list", [&] {
    PgResult r = session_.read(schedule_list_sql, {text_param(tenant)}, read);
    std::vector<ScheduleInfo> out;
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({r.text(i, 0), r.text(i, 1), static_cast<int>(r.int8(i, 2)), r.text(i, 3), r.text(i, 4),
                     static_cast<int>(r.int8(i, 5)), *json_result(r.text(i, 6)), from_unix_usecs(r.int8(i, 7)),
                     r.is_null(i, 8) ? std::nullopt : std::optional<TimePoint>(from_unix_usecs(r.int8(i, 8))),
                     r.int8(i, 9), r.int8(i, 10)});
    return out;
  });
}

}  // namespace forgeyard::detail
