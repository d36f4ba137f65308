// Logging and per-operation latency counters, shared by both backends.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "forgeyard/error.hpp"
#include "forgeyard/store.hpp"

namespace forgeyard::detail {

// The "forgeyard" spdlog logger: the application's if it registered one, else stderr at the
// level in FORGEYARD_LOG_LEVEL (default warn).
spdlog::logger& log();

// A connection string or URL with its password replaced by "***".
std::string redact(std::string_view conninfo);

class Instruments {
 public:
  // Runs work under the operation's name: counts it, times it, logs it (never bind values).
  template <class F>
  auto measure(std::string_view operation, F&& work) -> decltype(work()) {
    const auto start = std::chrono::steady_clock::now();
    try {
      if constexpr (std::is_void_v<decltype(work())>) {
        work();
        record(operation, start, nullptr);
      } else {
        auto result = work();
        record(operation, start, nullptr);
        return result;
      }
    } catch (const Error& e) {
      record(operation, start, &e);
      throw;
    }
  }
  std::map<std::string, OperationStats> snapshot() const;

 private:
  void record(std::string_view operation, std::chrono::steady_clock::time_point start, const Error* error);
  mutable std::mutex mutex_;
  std::map<std::string, OperationStats, std::less<>> operations_;
};

}  // namespace forgeyard::detail
