// Bounded clean-up steps, each safe to run from several places at once (SKIP LOCKED). Called by
// their own SQL functions and by forgeyard.maintain().
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy::maintenance {

using Tenant = std::optional<std::string>;

std::uint64_t purge_idempotency_keys(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant);
std::uint64_t purge_inbox(pg::Spi& spi, TimestampTz before, std::int32_t max_rows, const Tenant& tenant);
std::uint64_t purge_queue_events(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant);
std::uint64_t purge_acked(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant);
std::uint64_t purge_dead(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant);
// Finished workflow runs past their retention, with their journals and signals.
std::uint64_t purge_workflow_runs(pg::Spi& spi, TimestampTz now, std::int32_t max_rows, const Tenant& tenant);
// Release deltas (queue_release_deltas) folded into their release rows; how many.
std::uint64_t fold_release_deltas(pg::Spi& spi, std::int32_t max_rows, const Tenant& tenant);

}  // namespace fy::maintenance
