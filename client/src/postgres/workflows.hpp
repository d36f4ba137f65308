#pragma once

#include "forgeyard/workflows.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

class PgWorkflows final : public Workflows {
 public:
  explicit PgWorkflows(PgSession& session) : session_(session) {}
  std::string start(std::string_view tenant, std::string_view workflow, int version, std::string_view run_key,
                    std::string_view input_json, const WorkflowStartOptions& options) override;
  std::vector<ClaimedRun> claim(std::string_view tenant, std::string_view worker,
                                const std::vector<std::string>& definitions, int max_runs,
                                std::optional<Duration> lease) override;
  StepAnswer step(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                  std::optional<Duration> timeout, std::optional<int> position) override;
  void step_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                     std::string_view result_json, const std::optional<std::string>& compensation,
                     std::optional<int> position) override;
  StepFailure step_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                        std::string_view error, bool permanent, std::optional<int> position) override;
  void sleep_until(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                   TimePoint until, std::optional<int> position) override;
  void sleep_for(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                 Duration delay, std::optional<int> position) override;
  SignalWait wait_signal(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view step,
                         std::string_view signal, Duration timeout, std::optional<int> position) override;
  bool signal(std::string_view tenant, std::string_view run_id, std::string_view signal, std::string_view payload_json,
              const std::optional<std::string>& signal_id) override;
  std::optional<Compensation> compensation(std::string_view tenant, std::string_view run_id,
                                           std::int64_t epoch) override;
  std::string compensation_complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                                    int position) override;
  StepFailure compensation_fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch, int position,
                                std::string_view error, bool permanent) override;
  void complete(std::string_view tenant, std::string_view run_id, std::int64_t epoch,
                std::string_view result_json) override;
  void fail(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view error) override;
  void park(std::string_view tenant, std::string_view run_id, std::int64_t epoch, std::string_view reason) override;
  TimePoint extend(std::string_view tenant, std::string_view run_id, std::int64_t epoch, Duration lease) override;
  bool cancel(std::string_view tenant, std::string_view run_id, std::string_view reason) override;
  bool retry(std::string_view tenant, std::string_view run_id) override;
  RunStatus status(std::string_view tenant, std::string_view run_id, ReadClass read) override;
  std::vector<JournalEntry> journal(std::string_view tenant, std::string_view run_id, ReadClass read) override;
  void schedule_create(std::string_view tenant, std::string_view schedule, std::string_view workflow, int version,
                       std::string_view spec, const ScheduleOptions& options) override;
  bool schedule_drop(std::string_view tenant, std::string_view schedule) override;
  int schedule_tick(const std::optional<std::string>& tenant) override;
  std::vector<ScheduleInfo> schedule_list(std::string_view tenant, ReadClass read) override;
  std::vector<RunSummary> list(std::string_view tenant, const std::optional<std::string>& state, int max_runs,
                               ReadClass read) override;

 private:
  PgSession& session_;
};

}  // namespace forgeyard::detail
