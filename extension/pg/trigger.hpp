// The row event a C++ trigger function was called for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pg/spi.hpp"

namespace fy::pg {

class TriggerCall {
 public:
  // Refuses to run unless called by the trigger manager for a row, before the event.
  explicit TriggerCall(FunctionCallInfo fcinfo);
  bool is_insert() const;
  bool is_update() const;
  // The table, schema-qualified as regclass prints it.
  std::string table() const;
  // A bigint column of the new (or, for UPDATE, the old) row; nullopt when NULL.
  std::optional<std::int64_t> new_int8(const char* column) const;
  std::optional<std::int64_t> old_int8(const char* column) const;
  // The row to store: the new row, unchanged.
  Datum keep_new_row() const;

 private:
  std::optional<std::int64_t> int8(HeapTuple tuple, const char* column) const;
  TriggerData* data_;
};

// An identifier quoted for SQL when it needs it (quote_identifier).
std::string quote_identifier(const std::string& name);
// A jsonb datum from its text (after Spi::finish, in the function's memory context).
Value jsonb_value(const std::string& text);

}  // namespace fy::pg
