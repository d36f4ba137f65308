// What the queue functions (queue.cpp, queue_admin.cpp, maintain.cpp) share.
#pragma once

#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy::queue {

struct Queue {
  std::string tenant, name;
  pg::Value t, q;
  core::QueueOptions options;
  int slots = 1;
};

// The queue named by the first two arguments, after the tenant check; 42704 if it does not exist.
// `producing`: the call adds messages, and keeps the queue from being dropped until it commits.
Queue load(pg::Spi& spi, FunctionCallInfo fcinfo, bool producing = false);
// Takes room for one message of `bytes` in a capacity slot (FY020 when no slot admits the
// class) and returns the slot.
int admit(pg::Spi& spi, const Queue& queue, int priority, std::int64_t bytes);
// Counts a pending message into its partition (a keyed message of a partition-ordered queue);
// true if it is the head (always, for any other message).
bool join_partition(pg::Spi& spi, const Queue& queue, const std::optional<std::string>& key);
// Messages and bytes admitted and not yet released, summed over the slots.
core::Usage usage(pg::Spi& spi, const Queue& queue);
// An integer argument in 1..max (22023 otherwise, 22004 for NULL).
std::int32_t positive_int_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int32_t max);

// The claim of one priority class ($1 tenant, $2 queue, $3 class, $4 limit, $5 visible until,
// $6 consumer, $7 now): an index range scan that stops at the first message not yet visible.
extern const char claim_class_sql[];

}  // namespace fy::queue
