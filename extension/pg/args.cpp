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
