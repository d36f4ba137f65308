// Workflow schedules (extension/schedule.cpp): the tick that schedule_tick and maintain() run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy::schedule {

// Starts the runs of every due schedule (of `tenant`, or all), at most 1000 schedules a call,
// each once however many tickers run at once; returns the runs started.
std::int64_t tick(pg::Spi& spi, const std::optional<std::string>& tenant, TimestampTz now);

}  // namespace fy::schedule
