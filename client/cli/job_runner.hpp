// `forgeyard queue work`: the local job runner. It is run_worker (client/src/worker.cpp) with a
// handler that forks and execs a shell command per message (docs/architecture.md, "The CLI job
// runner").
#pragma once

#include <string>

#include "forgeyard/forgeyard.hpp"

namespace forgeyard::cli {

// Runs `command` with /bin/sh -c, the payload on its stdin and the delivery in FORGEYARD_TENANT,
// FORGEYARD_QUEUE, FORGEYARD_MSG_ID, FORGEYARD_ATTEMPT, FORGEYARD_PRIORITY,
// FORGEYARD_PARTITION_KEY and FORGEYARD_EVENT_ID. Returns its exit status (128 + signal if killed).
int run_command(const std::string& command, const Delivery& d, const std::string& tenant, const std::string& queue);

// Claims and runs `command` per message until SIGINT or SIGTERM (or, with stop_when_idle, until
// the queue is empty): exit 0 acks, exit 100 dead-letters, anything else retries.
WorkerStats run_jobs(Queues& queues, const WorkerOptions& options, const std::string& command);

}  // namespace forgeyard::cli
