// Where a PostgreSQL capability sends its statements: a pooled connection per call
// (autocommit), or the connection of an open transaction.
#pragma once

#include <string_view>

#include "instruments.hpp"
#include "postgres/connection.hpp"

namespace forgeyard::detail {

class PgSession {
 public:
  virtual ~PgSession() = default;
  virtual PgResult run(const PgStatement& statement, const PgParams& params) = 0;
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

// Interval parameter text for a duration: "<n> microseconds" (no months, no DST days).
std::string interval_param(Duration d);

}  // namespace forgeyard::detail
