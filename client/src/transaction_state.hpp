// What every backend's Transaction shares: open from BEGIN until one commit or rollback, and a
// destructor that rolls back what was not committed without throwing.
#pragma once

#include <functional>
#include <string_view>

#include "instruments.hpp"

namespace forgeyard::detail {

class TransactionState {
 public:
  explicit TransactionState(Instruments& instruments) : instruments_(instruments) {}

  void begin(const std::function<void()>& start) {
    instruments_.measure("tx.begin", start);
    open_ = true;
  }
  // 25000 once the transaction has ended.
  void check_open() const {
    if (!open_) throw Error(ErrorKind::InvalidArgument, "25000", "the transaction is already committed or rolled back");
  }
  // Like PostgreSQL, an error aborts the transaction: from then on every call is 25P02 and
  // commit rolls back, on both backends alike.
  void fail() noexcept { failed_ = true; }
  // Before a call: 25000 once ended, 25P02 once a call failed.
  void check_usable() const {
    check_open();
    if (failed_)
      throw Error(ErrorKind::Internal, "25P02",
                  "current transaction is aborted, commands ignored until end of transaction block");
  }
  // Ends with `commit`, or, after a failed call, with `rollback` and 25P02.
  void commit(const std::function<void()>& commit, const std::function<void()>& rollback) {
    end("tx.commit", [&] {
      if (failed_) {
        rollback();
        throw Error(ErrorKind::Internal, "25P02", "the transaction had failed and was rolled back, not committed");
      }
      commit();
    });
  }
  // Ends the transaction with `finish` (COMMIT or ROLLBACK), once.
  void end(std::string_view operation, const std::function<void()>& finish) {
    check_open();
    open_ = false;
    instruments_.measure(operation, finish);
  }
  // For destructors: rolls back if still open; a failure is logged (the connection is then
  // not reusable, and the pool closes it).
  void abandon(const std::function<void()>& rollback) noexcept {
    if (!open_) return;
    try {
      end("tx.rollback", rollback);
    } catch (const std::exception& e) {
      log().warn("rollback in transaction destructor failed: {}", e.what());
    }
  }

 private:
  Instruments& instruments_;
  bool open_ = false;
  bool failed_ = false;
};

}  // namespace forgeyard::detail
