// Where a PostgreSQL capability sends its statements: a pooled connection per call
// (autocommit), or the connection of an open transaction.
#pragma once

#include "instruments.hpp"
#include "postgres/connection.hpp"

namespace forgeyard::detail {

class PgSession {
 public:
  virtual ~PgSession() = default;
  virtual PgResult run(const PgStatement& statement, const PgParams& params) = 0;
  virtual Instruments& instruments() = 0;
};

// Interval parameter text for a duration: "<n> microseconds" (no months, no DST days).
std::string interval_param(Duration d);

}  // namespace forgeyard::detail
