// Queue values shared by both backends: client options to the core's, priority names.
#pragma once

#include <string>

#include "core/core.hpp"
#include "forgeyard/queues.hpp"

namespace forgeyard::detail {

fy::core::QueueOptions core_options(const QueueOptions& options);
// The options as the extension's queue_create takes them (durations as interval text).
std::string options_json(const QueueOptions& options);
int priority_index(Priority p);
Priority priority_at(int index);  // Corruption when out of range

}  // namespace forgeyard::detail
