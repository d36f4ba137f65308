#include "pg/args.hpp"

extern "C" {
#include "utils/jsonb.h"
#include "utils/resowner.h"
}

namespace fy::pg {

bool arg_is_null(FunctionCallInfo fcinfo, int n) {
  return PG_ARGISNULL(n);
}

std::optional<std::string> optional_name_arg(FunctionCallInfo fcinfo, int n, const char* argument,
                                             std::size_t max_bytes) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  text* t = guard([&]() noexcept { return PG_GETARG_TEXT_PP(n); });
  std::string value(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
  core::check_name(argument, true, value, max_bytes);
  return value;
}

std::string name_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::size_t max_bytes) {
  if (PG_ARGISNULL(n)) core::check_name(argument, false, {}, max_bytes);
  return *optional_name_arg(fcinfo, n, argument, max_bytes);
}

std::int64_t int8_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n)) throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
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
  ::bytea* b = guard([&]() noexcept { return PG_GETARG_BYTEA_PP(n); });
  std::string value(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
  if (value.size() < min_bytes)
    throw core::Error(core::sqlstate::invalid_parameter, std::string(argument) + " must not be empty");
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
  ::text* t = guard([&]() noexcept { return PG_GETARG_TEXT_PP(n); });
  std::string value(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
  if (value.size() > max_bytes)
    throw core::Error(core::sqlstate::string_too_long,
                      std::string(argument) + " is longer than " + std::to_string(max_bytes) + " bytes",
                      "length is " + std::to_string(value.size()) + " bytes");
  return value;
}

std::optional<std::string> optional_uuid_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  const pg_uuid_t* u = PG_GETARG_UUID_P(n);
  return std::string(reinterpret_cast<const char*>(u->data), UUID_LEN);
}

std::optional<core::Duration> optional_interval_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  const Interval* iv = PG_GETARG_INTERVAL_P(n);
  return core::Duration{iv->month, iv->day, iv->time};
}

Datum parse_input(Oid type, const std::string& text, const std::string& argument, const char* what) {
  const char* in = text.c_str();
  const MemoryContext context = CurrentMemoryContext;
  const ResourceOwner owner = CurrentResourceOwner;
  volatile Datum value = 0;
  volatile bool bad_input = false;
  // PL/pgSQL's EXCEPTION block, step by step (pl_exec.c, exec_stmt_block): only the rollback of
  // a subtransaction makes it safe to go on after a PostgreSQL error.
  guard([&]() noexcept {
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(context);  // the value outlives the subtransaction
    PG_TRY();
    {
      Oid input = InvalidOid;
      Oid ioparam = InvalidOid;
      getTypeInputInfo(type, &input, &ioparam);
      value = OidInputFunctionCall(input, const_cast<char*>(in), ioparam, -1);
      ReleaseCurrentSubTransaction();
      MemoryContextSwitchTo(context);
      CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
      MemoryContextSwitchTo(context);
      ErrorData* error = CopyErrorData();
      FlushErrorState();
      RollbackAndReleaseCurrentSubTransaction();
      MemoryContextSwitchTo(context);
      CurrentResourceOwner = owner;
      if (ERRCODE_TO_CATEGORY(error->sqlerrcode) != ERRCODE_DATA_EXCEPTION) ReThrowError(error);
      FreeErrorData(error);
      bad_input = true;
    }
    PG_END_TRY();
  });
  if (bad_input)
    throw core::Error(core::sqlstate::invalid_parameter, argument + " must be " + what, "got \"" + text + "\"");
  return value;
}

core::Duration parse_interval(const std::string& text, const std::string& argument) {
  const Interval* iv = DatumGetIntervalP(parse_input(INTERVALOID, text, argument, "an interval"));
  return core::Duration{iv->month, iv->day, iv->time};
}

namespace {
// The elements of a one-dimensional array argument, each converted by `element`.
template <class T, class F>
std::optional<std::vector<std::optional<T>>> array_arg(FunctionCallInfo fcinfo, int n, Oid type, F&& element) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  ArrayType* array = guard([&]() noexcept { return PG_GETARG_ARRAYTYPE_P(n); });
  Datum* values = nullptr;
  bool* nulls = nullptr;
  int count = 0;
  guard([&]() noexcept {
    int16 len;
    bool byval;
    char align;
    get_typlenbyvalalign(type, &len, &byval, &align);
    deconstruct_array(array, type, len, byval, align, &values, &nulls, &count);
  });
  std::vector<std::optional<T>> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) out.push_back(nulls[i] ? std::nullopt : std::optional<T>(element(values[i])));
  return out;
}

std::string varlena_bytes(Datum d) {
  varlena* v =
      guard([&]() noexcept { return pg_detoast_datum_packed(reinterpret_cast<varlena*>(DatumGetPointer(d))); });
  return std::string(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
}
}  // namespace

std::optional<std::vector<std::optional<std::string>>> bytea_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<std::string>(fcinfo, n, BYTEAOID, varlena_bytes);
}

std::optional<std::vector<std::optional<std::string>>> text_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<std::string>(fcinfo, n, TEXTOID, varlena_bytes);
}

std::optional<std::vector<std::optional<std::string>>> uuid_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<std::string>(fcinfo, n, UUIDOID, [](Datum d) {
    return std::string(reinterpret_cast<const char*>(DatumGetUUIDP(d)->data), UUID_LEN);
  });
}

std::optional<std::vector<std::optional<std::int64_t>>> int8_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<std::int64_t>(fcinfo, n, INT8OID, [](Datum d) { return DatumGetInt64(d); });
}

std::optional<TimestampTz> optional_timestamptz_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  return PG_GETARG_TIMESTAMPTZ(n);
}

std::optional<std::vector<std::optional<TimestampTz>>> timestamptz_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<TimestampTz>(fcinfo, n, TIMESTAMPTZOID, [](Datum d) { return DatumGetTimestampTz(d); });
}

namespace {
std::string jsonb_text(Datum d) {
  char* s = guard([&]() noexcept {
    Jsonb* jb = DatumGetJsonbP(d);
    return JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
  });
  return s;
}
}  // namespace

std::optional<std::string> optional_jsonb_text_arg(FunctionCallInfo fcinfo, int n) {
  if (PG_ARGISNULL(n)) return std::nullopt;
  return jsonb_text(PG_GETARG_DATUM(n));
}

std::optional<std::vector<std::optional<std::string>>> jsonb_text_array_arg(FunctionCallInfo fcinfo, int n) {
  return array_arg<std::string>(fcinfo, n, JSONBOID, jsonb_text);
}

Oid regclass_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n)) throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return PG_GETARG_OID(n);
}

Oid oid_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  return regclass_arg(fcinfo, n, argument);
}

bool bool_arg(FunctionCallInfo fcinfo, int n, bool if_null) {
  return PG_ARGISNULL(n) ? if_null : PG_GETARG_BOOL(n);
}

Value raw_arg(FunctionCallInfo fcinfo, int n) {
  return PG_ARGISNULL(n) ? null_value() : Value{PG_GETARG_DATUM(n), false};
}

Value jsonb_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n)) throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return {PG_GETARG_DATUM(n), false};
}

std::int32_t int4_arg(FunctionCallInfo fcinfo, int n, const char* argument) {
  if (PG_ARGISNULL(n)) throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  return PG_GETARG_INT32(n);
}

std::int64_t duration_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int64_t max_usecs) {
  if (PG_ARGISNULL(n)) throw core::Error(core::sqlstate::null_value, std::string(argument) + " must not be NULL");
  const Interval* iv = PG_GETARG_INTERVAL_P(n);
  return core::check_duration(argument, {iv->month, iv->day, iv->time}, max_usecs);
}

TableResult::TableResult(FunctionCallInfo fcinfo) {
  rsinfo_ = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  guard([&]() noexcept {
    // The executor's own description of the row (a function scan, or a set-returning call in
    // the select list) when it has one of several columns: the same as the function's result
    // type, without building that again from pg_proc for every call.
    if (rsinfo_ != nullptr && IsA(rsinfo_, ReturnSetInfo) && rsinfo_->expectedDesc != nullptr &&
        rsinfo_->expectedDesc->natts > 1) {
      InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
      return;
    }
    Oid type = InvalidOid;
    if (get_call_result_type(fcinfo, &type, nullptr) != TYPEFUNC_SCALAR) {
      InitMaterializedSRF(fcinfo, 0);
      return;
    }
    // A one-column RETURNS TABLE is a set of scalars, which InitMaterializedSRF refuses.
    if (rsinfo_ == nullptr || !IsA(rsinfo_, ReturnSetInfo) || (rsinfo_->allowedModes & SFRM_Materialize) == 0)
      ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                      errmsg("set-valued function called in context that cannot accept a set")));
    MemoryContext old = MemoryContextSwitchTo(rsinfo_->econtext->ecxt_per_query_memory);
    TupleDesc desc = CreateTemplateTupleDesc(1);
    TupleDescInitEntry(desc, 1, "value", type, -1, 0);
    rsinfo_->returnMode = SFRM_Materialize;
    rsinfo_->setResult = tuplestore_begin_heap((rsinfo_->allowedModes & SFRM_Materialize_Random) != 0, false, work_mem);
    rsinfo_->setDesc = desc;
    MemoryContextSwitchTo(old);
  });
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
  guard([&]() noexcept { tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, datums, nulls); });
}

Oid outer_user() {
  return GetOuterUserId();
}

Oid session_user() {
  return GetSessionUserId();
}

bool is_member_of(Oid member, Oid role) {
  return guard([&]() noexcept { return is_member_of_role_nosuper(member, role); });
}

}  // namespace fy::pg
