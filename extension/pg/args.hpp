// Reading arguments and returning results of SQL-callable functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "pg/spi.hpp"

namespace fy::pg {

bool arg_is_null(FunctionCallInfo fcinfo, int n);

// A required name: 22004 when NULL, 22023 when empty, 22001 over max_bytes (see core::check_name).
std::string name_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes);
// The same, but NULL is allowed and returned as nullopt (e.g. "all tenants").
std::optional<std::string> optional_name_arg(FunctionCallInfo fcinfo, int n, const char* argument,
                                             std::size_t max_bytes);
std::int64_t int8_arg(FunctionCallInfo fcinfo, int n, const char* argument);
std::optional<std::int64_t> optional_int8_arg(FunctionCallInfo fcinfo, int n);
// bytea: 22004 when NULL (unless optional), 22001 over max_bytes; `min_bytes` 1 refuses empty (22023).
std::optional<std::string> bytea_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes,
                                     bool optional = false, std::size_t min_bytes = 0);
// text of any length up to max_bytes (22001), empty allowed; nullopt when NULL and optional.
std::optional<std::string> text_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes,
                                    bool optional);
// A uuid (16 bytes), or nullopt when NULL.
std::optional<std::string> optional_uuid_arg(FunctionCallInfo fcinfo, int n);
// An interval argument as core::Duration (NULL: nullopt), and interval text parsed the same
// way; bad text is 22023 naming `argument`.
std::optional<core::Duration> optional_interval_arg(FunctionCallInfo fcinfo, int n);
core::Duration parse_interval(const std::string& text, const std::string& argument);
// `text` read by the input function of `type`, as a cast from text would, in an internal
// subtransaction. A data exception (class 22: bad syntax, out of range) becomes 22023
// "<argument> must be <what>"; any other error (a cancel, out of memory, a failed domain check)
// is re-raised unchanged. The value is allocated in the current memory context.
Datum parse_input(Oid type, const std::string& text, const std::string& argument, const char* what);
// Array arguments (NULL array: nullopt); elements may be NULL.
std::optional<std::vector<std::optional<std::string>>> bytea_array_arg(FunctionCallInfo fcinfo, int n);
std::optional<std::vector<std::optional<std::string>>> text_array_arg(FunctionCallInfo fcinfo, int n);
std::optional<std::vector<std::optional<std::string>>> uuid_array_arg(FunctionCallInfo fcinfo, int n);
std::optional<std::vector<std::optional<std::int64_t>>> int8_array_arg(FunctionCallInfo fcinfo, int n);
// timestamptz arguments (NULL: nullopt).
std::optional<TimestampTz> optional_timestamptz_arg(FunctionCallInfo fcinfo, int n);
std::optional<std::vector<std::optional<TimestampTz>>> timestamptz_array_arg(FunctionCallInfo fcinfo, int n);
// jsonb arguments as their text (jsonb's output form); NULL: nullopt.
std::optional<std::string> optional_jsonb_text_arg(FunctionCallInfo fcinfo, int n);
std::optional<std::vector<std::optional<std::string>>> jsonb_text_array_arg(FunctionCallInfo fcinfo, int n);
// A relation (regclass): 22004 when NULL.
Oid regclass_arg(FunctionCallInfo fcinfo, int n, const char* argument);
// Any oid-valued argument (oid, regtype, ...): 22004 when NULL.
Oid oid_arg(FunctionCallInfo fcinfo, int n, const char* argument);
// A boolean argument; NULL gives `if_null`.
bool bool_arg(FunctionCallInfo fcinfo, int n, bool if_null);
// An argument passed through unchanged (NULL stays NULL), e.g. an array handed on to SQL.
Value raw_arg(FunctionCallInfo fcinfo, int n);
// The raw datum of a jsonb argument: 22004 when NULL.
Value jsonb_arg(FunctionCallInfo fcinfo, int n, const char* argument);
std::int32_t int4_arg(FunctionCallInfo fcinfo, int n, const char* argument);
// A positive interval without months, at most max_usecs, in microseconds.
std::int64_t duration_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int64_t max_usecs);

// The rows of a RETURNS TABLE / SETOF function, materialized into a tuplestore.
// Create it after Spi::finish so that the values live in the function's memory context.
class TableResult {
 public:
  explicit TableResult(FunctionCallInfo fcinfo);
  void add_row(std::initializer_list<Value> values);

 private:
  ReturnSetInfo* rsinfo_;
};

// The role the caller is at the outer level (after SET ROLE), not the definer.
Oid outer_user();
// The login role of the session.
Oid session_user();
// Whether `member` is `role` or a member of it, directly or not; superusers get no shortcut.
bool is_member_of(Oid member, Oid role);

}  // namespace fy::pg
