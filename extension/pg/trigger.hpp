// Triggers, jsonb and relation-cache hooks for the compare-and-set functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// "INSERT", "UPDATE", "DELETE" or "TRUNCATE": the event a trigger function was called for
// (internal error when not called as a trigger).
const char* trigger_operation(FunctionCallInfo fcinfo);

// An identifier quoted for SQL when it needs it (quote_identifier).
std::string quote_identifier(const std::string& name);
// A jsonb datum from its text (after Spi::finish, in the function's memory context).
Value jsonb_value(const std::string& text);
// The top-level keys of a jsonb object, sorted; nullopt when the value is not an object.
std::optional<std::vector<std::string>> jsonb_object_keys(const Value& json);
// An options object's members as (key, value text) pairs: numbers, booleans and strings as their
// text, null as "null"; 22023 "options must be a JSON object" unless an object.
std::vector<std::pair<std::string, std::string>> jsonb_option_pairs(Spi& spi, const Value& json);
// Whether two jsonb values are equal (jsonb's = operator).
bool jsonb_equal(const Value& a, const Value& b);
// A jsonb value's text, as jsonb_out prints it.
std::string jsonb_text(const Value& json);
// A top-level member of a jsonb object: a scalar's text as jsonb_to_record reads it for a column
// of a scalar type (a string's characters, a number's numeric text, true or false; nullopt for
// null), or not a scalar (an object or an array).
struct JsonMember {
  bool scalar = true;
  std::optional<std::string> text;
};
// The members of a jsonb object by key; nullopt when the value is not an object.
std::optional<std::map<std::string, JsonMember>> jsonb_object_members(const Value& json);
// Calls `forget(relid)` whenever PostgreSQL invalidates a relation's cache entry (InvalidOid:
// all of them). `forget` runs inside PostgreSQL's invalidation processing: it must not throw.
void on_relation_invalidated(void (*forget)(Oid relid) noexcept);

}  // namespace fy::pg
