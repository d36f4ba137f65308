// Where a PostgreSQL capability sends its statements: a pooled connection per call
// (autocommit), or the connection of an open transaction.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "pool.hpp"
#include "postgres/connection.hpp"
#include "session_base.hpp"

namespace forgeyard::detail {

using PgPool = Pool<PgConnection>;

// One statement on a pooled connection, alone; with a test clock, inside BEGIN/COMMIT after
// `before` (which sets it). A refused statement leaves the connection reusable. The pooled
// session's calls run through it, on the primary or on a replica.
PgResult exec_autocommit(PgPool& pool, const PgStatement& statement, const PgParams& params,
                         const std::function<void(PgConnection&)>& before);

class PgSession : public Session {
 public:
  virtual PgResult run(const PgStatement& statement, const PgParams& params) = 0;
  // Several statements in one round trip, all or nothing: outside a Transaction they commit
  // together, inside one they are part of it (PgConnection::pipeline).
  virtual std::vector<PgResult> run_all(const std::vector<PgCall>& calls) = 0;
  // A statement that only reads: an eventual class may send it to a replica (the pooled session
  // with StoreOptions::replicas). Inside a Transaction, and by default, it runs as run() does.
  virtual PgResult read(const PgStatement& statement, const PgParams& params, const ReadClass& read_class) {
    (void)read_class;
    return run(statement, params);
  }
};

// A session whose every statement is a read of one class (for calls that run several reads, like
// Store::stats).
class PgReadSession final : public PgSession {
 public:
  PgReadSession(PgSession& inner, ReadClass read_class) : inner_(inner), class_(read_class) {}
  PgResult run(const PgStatement& statement, const PgParams& params) override {
    return inner_.read(statement, params, class_);
  }
  std::vector<PgResult> run_all(const std::vector<PgCall>& calls) override { return inner_.run_all(calls); }
  Instruments& instruments() override { return inner_.instruments(); }

 private:
  PgSession& inner_;
  ReadClass class_;
};

// A text parameter from a view (PgParams holds strings).
inline std::string text_param(std::string_view s) {
  return std::string(s);
}

// Interval parameter text for a duration: "<n> microseconds" (no months, no DST days).
std::string interval_param(Duration d);

}  // namespace forgeyard::detail
