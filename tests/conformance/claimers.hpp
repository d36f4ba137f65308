// Concurrent claimers for the limit tests (flow_test.cpp, flow_keys_test.cpp): real threads, each
// with its own store, claiming, holding and acking until a queue's messages are all done.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend.hpp"

namespace conformance {

struct ClaimersResult {
  std::string error;  // the first error a claimer met ("" if none)
  int done = 0;       // messages acked
};

// `threads` claimers take up to `batch` messages a call from tenant/queue until `total` were acked
// (or a claimer found nothing 2,000 times). After each claim `hold` sees the deliveries, then the
// claimer waits 2 ms, calls `release` and acks them. A busy SQLite writer (SerializationFailure)
// is tried again.
ClaimersResult run_claimers(const Backend& backend, const std::string& tenant, const std::string& queue, int threads,
                            int batch, int total,
                            const std::function<void(const std::vector<forgeyard::Delivery>&)>& hold,
                            const std::function<void(const std::vector<forgeyard::Delivery>&)>& release);

}  // namespace conformance
