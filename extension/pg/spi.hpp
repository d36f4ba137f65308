// The one SPI helper: statements prepared once per backend and kept, rows read into C++ values
// before SPI_finish, every call that can raise routed through guard().
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "pg/guard.hpp"

namespace fy::pg {

// A datum plus its null flag, in the current memory context.
struct Value {
  Datum datum = 0;
  bool is_null = true;
};
Value text_value(std::string_view s);
Value optional_text_value(const std::optional<std::string>& s);
inline Value int8_value(std::int64_t v) {
  return {Int64GetDatum(v), false};
}
inline Value int2_value(std::int16_t v) {
  return {Int16GetDatum(v), false};
}
inline Value int4_value(std::int32_t v) {
  return {Int32GetDatum(v), false};
}
inline Value bool_value(bool v) {
  return {BoolGetDatum(v), false};
}
inline Value timestamptz_value(TimestampTz v) {
  return {TimestampTzGetDatum(v), false};
}
inline Value oid_value(Oid v) {
  return {ObjectIdGetDatum(v), false};
}
inline Value null_value() {
  return {};
}
inline Value float8_value(double v) {
  return {Float8GetDatum(v), false};
}
Value optional_float8_value(const std::optional<double>& v);
Value bytea_value(std::string_view bytes);
// A uuid from its 16 bytes.
Value uuid_value(std::string_view bytes16);
Value optional_uuid_value(const std::optional<std::string>& bytes16);
// 16 bytes of a new random (version 4) UUID, from pg_strong_random.
std::string random_uuid();
// Whether the current database stores text as UTF-8.
bool database_is_utf8();
Value interval_value(std::int64_t usecs);
// A value of `type` (with its typmod) from its text, through the type's input function, as
// jsonb_to_record and COPY make one; NULL for nullopt.
Value typed_value(Oid type, std::int32_t typmod, const std::optional<std::string>& text);
Value optional_bytea_value(const std::optional<std::string>& bytes);

// How a kept statement is planned: PostgreSQL's plan cache choosing between custom and generic
// plans, or always the one generic plan (planned once per backend, never again per call; only for
// statements whose generic plan is the right one whatever the arguments: the hot paths).
enum class Planning { chosen, generic };

// A schema-qualified statement, prepared on first use and kept for the life of the backend.
class Statement {
 public:
  Statement(std::string sql, std::span<const Oid> arg_types, Planning planning = Planning::chosen);
  Statement(std::string sql, std::initializer_list<Oid> arg_types, Planning planning = Planning::chosen)
      : Statement(std::move(sql), std::span<const Oid>(arg_types.begin(), arg_types.size()), planning) {}
  SPIPlanPtr plan();
  int arg_count() const { return nargs_; }
  bool generic() const { return planning_ == Planning::generic; }
  // EXPLAIN (COSTS OFF) of the plan calls run: for a Planning::generic statement, its one
  // generic plan (for the plan-shape tests and forgeyard.claim_plan).
  std::string explain();

  // A statement built at run time (from catalog names), kept per distinct SQL text.
  static Statement& cached(const std::string& sql, std::span<const Oid> arg_types,
                           Planning planning = Planning::chosen);
  static Statement& cached(const std::string& sql, std::initializer_list<Oid> arg_types,
                           Planning planning = Planning::chosen) {
    return cached(sql, std::span<const Oid>(arg_types.begin(), arg_types.size()), planning);
  }

  static constexpr int max_args = 32;

 private:
  std::string sql_;
  Oid types_[max_args];
  int nargs_;
  Planning planning_;
  SPIPlanPtr plan_ = nullptr;
};

// One row of a result, read while the SPI connection is open.
class Row {
 public:
  Row(HeapTuple tuple, TupleDesc desc) : tuple_(tuple), desc_(desc) {}
  bool is_null(int column) const;
  std::optional<std::string> text(int column) const;
  std::optional<std::int64_t> int8(int column) const;
  std::optional<bool> boolean(int column) const;
  std::optional<double> float8(int column) const;
  std::optional<Oid> oid(int column) const;
  std::optional<std::string> bytea(int column) const;
  std::optional<std::string> uuid(int column) const;  // 16 bytes
  std::optional<TimestampTz> timestamptz(int column) const;

 private:
  Datum datum(int column, bool* is_null) const;
  HeapTuple tuple_;
  TupleDesc desc_;
};

// The SPI connection of one SQL-callable function body. On error paths it is left open on
// purpose: transaction (or subtransaction) abort closes it, as it does for PL/pgSQL.
// Running a statement leaves the caller in the memory context it was in (SPI itself would
// switch to its procedure context), so a pg::ScratchContext holds what on_row allocates.
// A ScratchContext made after the Spi must end before finish(), which deletes its parent.
class Spi {
 public:
  Spi() = default;
  Spi(const Spi&) = delete;
  Spi& operator=(const Spi&) = delete;

  // Runs the statement; calls on_row(const Row&) for each returned row; returns rows processed.
  // on_row must not run SPI itself: that would replace the rows being read.
  template <class OnRow>
  std::uint64_t run(Statement& statement, std::initializer_list<Value> args, OnRow&& on_row) {
    return run(statement, std::span<const Value>(args.begin(), args.size()), std::forward<OnRow>(on_row));
  }
  template <class OnRow>
  std::uint64_t run(Statement& statement, std::span<const Value> args, OnRow&& on_row) {
    std::uint64_t n = execute(statement, args);
    for (std::uint64_t i = 0; i < n && SPI_tuptable != nullptr; ++i)
      on_row(Row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc));
    release_rows();
    return n;
  }
  std::uint64_t run(Statement& statement, std::initializer_list<Value> args) {
    const std::uint64_t n = execute(statement, std::span<const Value>(args.begin(), args.size()));
    release_rows();
    return n;
  }
  // Connects now (statements connect on first use): for what needs SPI without a statement.
  void connect();
  // Runs SQL text once, unprepared (for statements that are not worth a kept plan).
  std::uint64_t run_once(const std::string& sql);
  void finish();

 private:
  std::uint64_t execute(Statement& statement, std::span<const Value> args);
  // Frees the rows just read (they were copied out), so a loop of statements holds one result.
  void release_rows();
  bool open_ = false;
};

}  // namespace fy::pg
