// Where a PostgreSQL capability sends its statements: a pooled connection per call
// (autocommit), or the connection of an open transaction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "postgres/connection.hpp"
#include "session_base.hpp"

namespace forgeyard::detail {

class PgSession : public Session {
 public:
  virtual PgResult run(const PgStatement& statement, const PgParams& params) = 0;
  // Several statements in one round trip, all or nothing: outside a Transaction they commit
  // together, inside one they are part of it (PgConnection::pipeline).
  virtual std::vector<PgResult> run_all(const std::vector<PgCall>& calls) = 0;
};

// A text parameter from a view (PgParams holds strings).
inline std::string text_param(std::string_view s) {
  return std::string(s);
}

// Interval parameter text for a duration: "<n> microseconds" (no months, no DST days).
std::string interval_param(Duration d);

}  // namespace forgeyard::detail
