// Where a SQLite capability runs its work: its own BEGIN IMMEDIATE transaction per call, or
// the open transaction of a Transaction object.
#pragma once

#include <string_view>

#include <cstdint>
#include <functional>

#include "instruments.hpp"
#include "sqlite/db.hpp"

namespace forgeyard::detail {

class SqliteSession {
 public:
  virtual ~SqliteSession() = default;
  // Runs work in a write transaction. Errors from the shared core logic arrive as forgeyard::Error.
  virtual void write(const std::function<void(Db&)>& work) = 0;
  // The clock that decides expiry (StoreOptions::clock, else the system clock), in µs since 1970.
  virtual std::int64_t now_usecs() = 0;
  virtual Instruments& instruments() = 0;

  // Runs one capability call under its operation name (Instruments::measure). In a Transaction,
  // any error of the call aborts the transaction, also one the client raised before anything
  // reached the database (an invalid argument), as a server-side error does: later calls and
  // commit fail with 25P02, so no part of the unit of work can commit without the rest.
  template <class F>
  auto measure(std::string_view operation, F&& work) -> decltype(work()) {
    try {
      return instruments().measure(operation, std::forward<F>(work));
    } catch (const Error&) {
      failed();
      throw;
    }
  }

 protected:
  // Called when a call of this session failed; a Transaction remembers it.
  virtual void failed() {}
};

}  // namespace forgeyard::detail
