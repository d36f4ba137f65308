#include "claimers.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

namespace conformance {

ClaimersResult run_claimers(const Backend& backend, const std::string& tenant, const std::string& queue, int threads,
                            int batch, int total,
                            const std::function<void(const std::vector<forgeyard::Delivery>&)>& hold,
                            const std::function<void(const std::vector<forgeyard::Delivery>&)>& release) {
  using namespace std::chrono_literals;
  std::atomic<int> done{0};
  std::mutex failed_mutex;
  std::string failed;
  auto busy = [](const forgeyard::Error& e) { return e.kind() == forgeyard::ErrorKind::SerializationFailure; };
  std::vector<std::thread> claimers;
  for (int t = 0; t < threads; ++t)
    claimers.emplace_back([&] {
      try {
        auto own = backend.open_another(2);
        for (int idle = 0; done.load() < total && idle < 2000;) {
          std::vector<forgeyard::Delivery> got;
          try {
            got = own->queues().claim(tenant, queue, "w", batch);
          } catch (const forgeyard::Error& e) {
            if (!busy(e)) throw;
          }
          if (got.empty()) {
            ++idle;
            std::this_thread::sleep_for(1ms);
            continue;
          }
          hold(got);
          std::this_thread::sleep_for(2ms);
          release(got);
          for (const auto& d : got)
            for (;;) try {
                own->queues().ack(tenant, queue, d.msg_id, d.claim_token);
                break;
              } catch (const forgeyard::Error& e) {
                if (!busy(e)) throw;
              }
          done += static_cast<int>(got.size());
        }
      } catch (const std::exception& e) {
        const std::lock_guard lock(failed_mutex);
        failed = e.what();
        done = total;  // stop the others
      }
    });
  for (auto& t : claimers) t.join();
  return {failed, done.load()};
}

}  // namespace conformance
