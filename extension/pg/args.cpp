#include "pg/args.hpp"

namespace fy::pg {

bool arg_is_null(FunctionCallInfo fcinfo, int n) { return PG_ARGISNULL(n); }

std::optional<std::string> optional_name_arg(FunctionCallInfo fcinfo, int n, const char* argument,
                                             std::size_t max_bytes) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  text* t = guard([&] { return PG_GETARG_TEXT_PP(n); });
  std::string value(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
  core::check_name(argument, true, value, max_bytes);
  return value;
}

std::string name_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes) {
  if (PG_ARGISNULL(n)) core::check_name(argument, false, {}, max_bytes);
  return *optional_name_arg(fcinfo, n, argument, max_bytes);
}

std::int64_t int8_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n))
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return PG_GETARG_INT64(n);
}

std::optional<std::int64_t> optional_int8_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  return PG_GETARG_INT64(n);
}

std::optional<std::string> bytea_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes,
                                     bool optional, std::size_t min_bytes) {
  if (PG_ARGISNULL(n)) {
    if (optional) return std::nullopt;
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  }
  ::bytea* b = guard([&] { return PG_GETARG_BYTEA_PP(n); });
  std::string value(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
  if (value.size() < min_bytes) throw core::Error(core::sqlstate::invalid_parameter, std::string(argument) + " must not be empty");
  if (value.size() > max_bytes)
    throw core::Error(core::sqlstate::string_too_long,
                      std::string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                      "length is " + std::to_string(value.size()) + " bytes");
  return value;
}

std::optional<std::string> text_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes,
                                    bool optional) {
  if (PG_ARGISNULL(n)) {
    if (optional) return std::nullopt;
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  }
  ::text* t = guard([&] { return PG_GETARG_TEXT_PP(n); });
  std::string value(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
  if (value.size() > max_bytes)
    throw core::Error(core::sqlstate::string_too_long,
                      std::string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                      "length is " + std::to_string(value.size()) + " bytes");
  return value;
}

Oid regclass_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n))
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return PG_GETARG_OID(n);
}

Value jsonb_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n))
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return {PG_GETARG_DATUM(n), false};
}

std::int32_t int4_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n))
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return PG_GETARG_INT32(n);
}

std::int64_t duration_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int64_t max_usecs) {
  if (PG_ARGISNULL(n))
    throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  const Interval* iv = PG_GETARG_INTERVAL_P(n);
  return core::check_duration(argument, {iv->month, iv->day, iv->time}, max_usecs);
}

TableResult::TableResult(FunctionCallInfo fcinfo) {
  guard([&] { InitMaterializedSRF(fcinfo, 0); });
  rsinfo_ = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
}

void TableResult::add_row(std::initializer_list<Value> values) {
  Datum datums[16];
  bool nulls[16];
  int i = 0;
  for (const Value& v : values) {
    if (i == 16) throw core::Error(core::sqlstate::internal_error, "too many result columns");
    datums[i] = v.datum;
    nulls[i] = v.is_null;
    ++i;
  }
  ReturnSetInfo* rsinfo = rsinfo_;
  guard([&] { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, datums, nulls); });
}

Oid outer_user() { return GetOuterUserId(); }

bool is_member_of(Oid member, Oid role) {
  return guard([&] { return is_member_of_role_nosuper(member, role); });
}

}  // namespace fy::pg
