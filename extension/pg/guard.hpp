// The C++ / PostgreSQL error boundary. Nothing else in the extension catches or raises across it.
//
// Rule 1: every SQL-callable function is declared with FY_FUNCTION. Its body is ordinary C++;
//         any exception leaving it is turned into ereport(ERROR) by invoke() only after the C++
//         stack has unwound.
// Rule 2: a call into PostgreSQL that can ereport(ERROR) while C++ objects with destructors are
//         live goes through guard(). A PostgreSQL error inside it becomes a PgError exception that
//         carries the original ErrorData, and invoke() re-raises that error unchanged (SQLSTATE,
//         message, detail), so 40001, 40P01, 57014 and FY codes survive the trip.
// The lambdas given to guard() hold no C++ objects with destructors: a longjmp out of them
// skips nothing. They are noexcept (checked at compile time): a C++ exception thrown inside
// PG_TRY would leave PostgreSQL's exception stack pointing at a dead frame.
// A PostgreSQL error is never caught to carry on: it goes up to invoke(), or, to be replaced by
// an error of ours, is caught inside an internal subtransaction (parse_input in pg/args.hpp).
// scripts/check-boundary.sh checks that only extension/pg/ touches PG's raw API.
#pragma once

#include <exception>
#include <type_traits>

#include "pg/postgres.hpp"

namespace fy::pg {

// A PostgreSQL error caught by guard(), on its way up to invoke().
class PgError final : public std::exception {
 public:
  explicit PgError(ErrorData* data) noexcept : data_(data) {}
  ErrorData* data() const noexcept { return data_; }
  const char* what() const noexcept override;

 private:
  ErrorData* data_;  // copied into the memory context current when invoke() was entered
};

// Copies the error being handled out of ErrorContext, clears it and throws it as PgError, back in
// `context` (the one current at guard() entry).
[[noreturn]] void throw_pg_error(MemoryContext context);

// Runs f, which calls PostgreSQL, turning a PostgreSQL error into PgError.
template <class F>
auto guard(F&& f) -> decltype(f()) {
  static_assert(std::is_nothrow_invocable_v<F&>, "guard() takes only noexcept lambdas: [&]() noexcept { ... }");
  using R = decltype(f());
  MemoryContext context = CurrentMemoryContext;
  volatile bool failed = false;
  if constexpr (std::is_void_v<R>) {
    PG_TRY();
    { f(); }
    PG_CATCH();
    { failed = true; }
    PG_END_TRY();
    if (failed) throw_pg_error(context);
  } else {
    static_assert(std::is_trivially_copyable_v<R>, "guard() returns plain PostgreSQL values only");
    volatile R result{};
    PG_TRY();
    { result = f(); }
    PG_CATCH();
    { failed = true; }
    PG_END_TRY();
    if (failed) throw_pg_error(context);
    return result;
  }
}

// Calls impl and converts any C++ exception into a PostgreSQL ERROR after unwinding.
Datum invoke(FunctionCallInfo fcinfo, Datum (*impl)(FunctionCallInfo));

}  // namespace fy::pg

// Declares a SQL-callable C function `name` whose body is C++ run under invoke().
#define FY_FUNCTION(name)                            \
  static Datum name##_body(FunctionCallInfo fcinfo); \
  extern "C" {                                       \
  PG_FUNCTION_INFO_V1(name);                         \
  Datum name(PG_FUNCTION_ARGS) {                     \
    return ::fy::pg::invoke(fcinfo, name##_body);    \
  }                                                  \
  }                                                  \
  static Datum name##_body([[maybe_unused]] FunctionCallInfo fcinfo)
