// Queue values shared by both backends: client options to the core's, priority names.
#pragma once

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.hpp"
#include "core/flow.hpp"
#include "forgeyard/queues.hpp"

namespace forgeyard::detail {

fy::core::QueueOptions core_options(const QueueOptions& options);
// The options as the extension's queue_create takes them (durations as interval text).
std::string options_json(const QueueOptions& options);
// resource_limit's and breaker_configure's options as the extension takes them (JSON), and as
// the core checks them (the SQLite shim runs them through the same parsers).
std::string resource_limits_json(const ResourceLimits& limits);
std::string breaker_json(const BreakerOptions& options);
fy::core::flow::ResourceConfig core_resource_config(const ResourceLimits& limits,
                                                    const std::optional<BreakerOptions>& breaker);
// flow_state's order on both backends: kind, then queue (none first), then subject.
void sort_flow(std::vector<FlowLimit>& rows);
int priority_index(Priority p);
Priority priority_at(int index);  // Corruption when out of range

// The public Priority enum and the core's priority classes must stay in step, since a class
// travels as its index (claim order, the admit_percent array) and as its core name. The switch has
// no default, so an enumerator missing here is a -Wswitch warning; the checks below fail to compile
// if the order drifts or the enum has more classes than the core.
constexpr std::string_view core_priority_name(Priority p) {
  switch (p) {
    case Priority::Emergency:
      return "emergency";
    case Priority::SecurityControl:
      return "security_control";
    case Priority::Realtime:
      return "realtime";
    case Priority::Interactive:
      return "interactive";
    case Priority::Background:
      return "background";
    case Priority::Bulk:
      return "bulk";
  }
  return {};
}
constexpr bool priorities_in_step() {
  for (int i = 0; i < fy::core::priority_classes; ++i)
    if (core_priority_name(static_cast<Priority>(i)) != fy::core::priority_names[i]) return false;
  return core_priority_name(static_cast<Priority>(fy::core::priority_classes)).empty();
}
static_assert(priorities_in_step(), "forgeyard::Priority and fy::core::priority_names differ in count or order");
static_assert(std::size(QueueOptions{}.admit_percent) == fy::core::priority_classes,
              "QueueOptions::admit_percent needs one entry per priority class");

}  // namespace forgeyard::detail
