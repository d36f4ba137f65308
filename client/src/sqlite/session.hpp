// Where a SQLite capability runs its work: its own BEGIN IMMEDIATE transaction per call, or
// the open transaction of a Transaction object.
#pragma once

#include <cstdint>
#include <functional>

#include "session_base.hpp"
#include "sqlite/db.hpp"

namespace forgeyard::detail {

class SqliteSession : public Session {
 public:
  // Runs work in a write transaction. Errors from the shared core logic arrive as forgeyard::Error.
  virtual void write(const std::function<void(Db&)>& work) = 0;
  // Runs work that only reads. On its own: a deferred transaction, one WAL snapshot, no write
  // turn, so it never waits for writers (another process's worker included). Inside a
  // Transaction (or any held transaction): that transaction, as write does.
  virtual void read(const std::function<void(Db&)>& work) { write(work); }
  // The clock that decides expiry (StoreOptions::clock, else the system clock), in µs since 1970.
  virtual std::int64_t now_usecs() = 0;
};

}  // namespace forgeyard::detail
