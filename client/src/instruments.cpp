#include "instruments.hpp"

#include <cstdlib>
#include <regex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace forgeyard::detail {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("forgeyard")) return existing;
    auto created = spdlog::stderr_color_mt("forgeyard");
    const char* level = std::getenv("FORGEYARD_LOG_LEVEL");
    created->set_level(level != nullptr ? spdlog::level::from_str(level) : spdlog::level::warn);
    return created;
  }();
  return *logger;
}

std::string redact(std::string_view conninfo) {
  std::string s(conninfo);
  // URL form: scheme://user:password@host
  static const std::regex url_password(R"(^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@?#]*):[^@/?#]*@)");
  s = std::regex_replace(s, url_password, "$1:***@");
  // Query parameter or keyword form: password=... (quoted or not)
  static const std::regex keyword_password(R"((^|[\s?&])password\s*=\s*('([^'\\]|\\.)*'|[^\s&]*))", std::regex::icase);
  return std::regex_replace(s, keyword_password, "$1password=***");
}

void Instruments::record(std::string_view operation, std::chrono::steady_clock::time_point start, const Error* error) {
  const auto usecs = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  {
    std::lock_guard lock(mutex_);
    auto it = operations_.find(operation);
    if (it == operations_.end()) it = operations_.emplace(std::string(operation), OperationStats{}).first;
    OperationStats& s = it->second;
    ++s.calls;
    if (error != nullptr) ++s.errors;
    s.total_usecs += usecs;
    if (usecs > s.max_usecs) s.max_usecs = usecs;
  }
  if (error != nullptr)
    log().debug("{} failed after {} us: {} {} {}", operation, usecs, to_string(error->kind()), error->sqlstate(),
                error->what());
  else
    log().trace("{} took {} us", operation, usecs);
}

std::map<std::string, OperationStats> Instruments::snapshot() const {
  std::lock_guard lock(mutex_);
  return {operations_.begin(), operations_.end()};
}

}  // namespace forgeyard::detail
