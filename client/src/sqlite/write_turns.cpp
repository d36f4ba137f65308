// Writers of one SQLite file take turns (write_turns.hpp).
#include "sqlite/write_turns.hpp"

#include <sqlite3.h>

#include <filesystem>
#include <map>

#include "error_map.hpp"

namespace forgeyard::detail {

std::shared_ptr<WriteTurns> WriteTurns::of(const std::string& path) {
  static std::mutex registry_mutex;
  static std::map<std::string, std::weak_ptr<WriteTurns>> registry;
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard lock(registry_mutex);
  std::weak_ptr<WriteTurns>& entry = registry[key];
  std::shared_ptr<WriteTurns> turns = entry.lock();
  if (!turns) {
    turns = std::make_shared<WriteTurns>();
    entry = turns;
  }
  return turns;
}

bool WriteTurns::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!held_ && waiters_.empty()) {
    held_ = true;
    return true;
  }
  const auto me = waiters_.insert(waiters_.end(), false);
  const bool handed = handed_.wait_for(lock, timeout, [&] { return *me; });
  waiters_.erase(me);  // handed: the turn is ours (held_ stayed true); not: out of the line
  return handed;
}

void WriteTurns::give_back() {
  std::lock_guard lock(mutex_);
  for (bool& waiter : waiters_)
    if (!waiter) {
      waiter = true;  // handed over: held_ stays true
      handed_.notify_all();
      return;
    }
  held_ = false;
}

WriteTurn::WriteTurn(WriteTurns& turns, std::chrono::milliseconds timeout) : turns_(turns) {
  if (!turns_.take(timeout))
    throw sqlite_error(SQLITE_BUSY, "database is locked (this process's other writers of the file held it)");
  held_ = true;
}

void WriteTurn::release() noexcept {
  if (held_) turns_.give_back();
  held_ = false;
}

}  // namespace forgeyard::detail
