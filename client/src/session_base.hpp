// What both backends' sessions share: every capability call runs through measure(), and a
// session that is a Transaction learns of each failed call.
#pragma once

#include <string_view>
#include <utility>

#include "instruments.hpp"

namespace forgeyard::detail {

class Session {
 public:
  virtual ~Session() = default;
  virtual Instruments& instruments() = 0;

  // Runs one capability call under its operation name (Instruments::measure). In a Transaction,
  // any error of the call aborts the transaction, also one the client raised before anything
  // reached the database (an invalid argument), as a server-side error does: later calls and
  // commit fail with 25P02, so no part of the unit of work can commit without the rest.
  template <class F>
  auto measure(std::string_view operation, F&& work) -> decltype(work()) {
    try {
      return instruments().measure(operation, std::forward<F>(work));
    } catch (...) {
      failed();
      throw;
    }
  }

 protected:
  // Called when a call of this session failed; a Transaction remembers it.
  virtual void failed() {}
};

}  // namespace forgeyard::detail
