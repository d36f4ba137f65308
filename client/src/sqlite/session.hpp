// Where a SQLite capability runs its work: its own transaction per call (BEGIN IMMEDIATE on a
// write connection, or a deferred BEGIN on a read connection), or the open transaction of a
// Transaction object.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "session_base.hpp"
#include "sqlite/db.hpp"

namespace forgeyard::detail {

class SqliteSession : public Session {
 public:
  // Runs work in a write transaction. Errors from the shared core logic arrive as forgeyard::Error.
  virtual void write(const std::function<void(Db&)>& work) = 0;
  // Runs work that only reads. On its own: a deferred transaction on one of the store's read
  // connections (PRAGMA query_only: a write fails), one WAL snapshot, no write turn and no write
  // connection, so it never waits for writers (another process's worker included). Inside a
  // Transaction (or any held transaction): that transaction, as write does, so it sees the
  // transaction's own writes.
  virtual void read(const std::function<void(Db&)>& work) { write(work); }
  // The clock that decides expiry (StoreOptions::clock, else the system clock), in µs since 1970.
  virtual std::int64_t now_usecs() = 0;
};

// Capability code run on a connection whose transaction the caller already holds (a read
// snapshot: store stats, doctor, verify; reconcile's write): that connection, never a second one
// from a pool.
class HeldSession final : public SqliteSession {
 public:
  HeldSession(Db& db, Instruments& instruments, std::function<std::int64_t()> now)
      : db_(db), instruments_(instruments), now_(std::move(now)) {}
  void write(const std::function<void(Db&)>& work) override { work(db_); }
  std::int64_t now_usecs() override { return now_(); }
  Instruments& instruments() override { return instruments_; }

 private:
  Db& db_;
  Instruments& instruments_;
  std::function<std::int64_t()> now_;
};

}  // namespace forgeyard::detail
