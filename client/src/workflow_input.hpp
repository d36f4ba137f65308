// What both backends' workflow calls check first, in one place (client/src/workflows.cpp): the
// run id's spelling, JSON in its canonical form, the options of a start.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "forgeyard/workflows.hpp"

namespace forgeyard::detail {

// The run id as PostgreSQL prints a uuid; InvalidArgument (22P02, PostgreSQL's words) otherwise.
std::string run_id_param(std::string_view run_id);
// Checked JSON (InvalidArgument 22023 naming `argument`) in its canonical text.
std::string json_param(std::string_view json, const char* argument);
// JSON read back from a backend, in the same canonical text.
std::optional<std::string> json_result(const std::optional<std::string>& json);
// The options of workflow_start as the extension's options object (canonical JSON).
std::string start_options_json(const WorkflowStartOptions& options);
// The options of schedule_create as the extension's options object.
std::string schedule_options_json(const ScheduleOptions& options);
StepFailure parse_step_failure(const std::string& outcome);
SignalWait::Status parse_wait_status(const std::string& status);

}  // namespace forgeyard::detail
