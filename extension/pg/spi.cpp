#include "pg/spi.hpp"

extern "C" {
#include "commands/explain.h"
#include "executor/spi_priv.h"
#include "mb/pg_wchar.h"
#include "utils/plancache.h"
}

#include <algorithm>
#include <map>
#include <memory>

namespace fy::pg {

Value text_value(std::string_view s) {
  text* t = guard([&]() noexcept { return cstring_to_text_with_len(s.data(), static_cast<int>(s.size())); });
  return {PointerGetDatum(t), false};
}

Value typed_value(Oid type, std::int32_t typmod, const std::optional<std::string>& text) {
  if (!text) return null_value();
  const char* in = text->c_str();
  const Datum d = guard([&]() noexcept {
    Oid input = InvalidOid, ioparam = InvalidOid;
    getTypeInputInfo(type, &input, &ioparam);
    return OidInputFunctionCall(input, const_cast<char*>(in), ioparam, typmod);
  });
  return {d, false};
}

Value optional_text_value(const std::optional<std::string>& s) {
  return s ? text_value(*s) : null_value();
}

Value bytea_value(std::string_view bytes) {
  bytea* b = guard([&]() noexcept {
    bytea* out = static_cast<bytea*>(palloc(VARHDRSZ + bytes.size()));
    SET_VARSIZE(out, VARHDRSZ + bytes.size());
    memcpy(VARDATA(out), bytes.data(), bytes.size());
    return out;
  });
  return {PointerGetDatum(b), false};
}

Value uuid_value(std::string_view bytes16) {
  pg_uuid_t* u = guard([]() noexcept { return static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t))); });
  memcpy(u->data, bytes16.data(), UUID_LEN);
  return {UUIDPGetDatum(u), false};
}

std::string random_uuid() {
  unsigned char b[UUID_LEN];
  if (!pg_strong_random(b, UUID_LEN))
    throw core::Error(core::sqlstate::internal_error, "could not generate random bytes for a UUID");
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  return std::string(reinterpret_cast<const char*>(b), UUID_LEN);
}

bool database_is_utf8() {
  return GetDatabaseEncoding() == PG_UTF8;
}

Value optional_uuid_value(const std::optional<std::string>& bytes16) {
  return bytes16 ? uuid_value(*bytes16) : null_value();
}

Value interval_value(std::int64_t usecs) {
  Interval* iv = guard([]() noexcept { return static_cast<Interval*>(palloc0(sizeof(Interval))); });
  iv->time = usecs;
  return {IntervalPGetDatum(iv), false};
}

Value optional_bytea_value(const std::optional<std::string>& bytes) {
  return bytes ? bytea_value(*bytes) : null_value();
}

Statement::Statement(std::string sql, std::span<const Oid> arg_types, Planning planning)
    : sql_(std::move(sql)), nargs_(static_cast<int>(arg_types.size())), planning_(planning) {
  std::copy(arg_types.begin(), arg_types.begin() + std::min(nargs_, max_args), types_);
}

Statement& Statement::cached(const std::string& sql, std::span<const Oid> arg_types, Planning planning) {
  static std::map<std::string, std::unique_ptr<Statement>> statements;
  auto it = statements.find(sql);
  if (it == statements.end()) it = statements.emplace(sql, std::make_unique<Statement>(sql, arg_types, planning)).first;
  return *it->second;
}

SPIPlanPtr Statement::plan() {
  if (plan_ != nullptr) return plan_;
  if (nargs_ > max_args) throw core::Error(core::sqlstate::internal_error, "too many statement arguments");
  const char* sql = sql_.c_str();
  SPIPlanPtr prepared = guard([&]() noexcept {
    const MemoryContext caller = CurrentMemoryContext;
    SPIPlanPtr p =
        SPI_prepare_cursor(sql, nargs_, types_, planning_ == Planning::generic ? CURSOR_OPT_GENERIC_PLAN : 0);
    MemoryContextSwitchTo(caller);
    return p;
  });
  if (prepared == nullptr)
    throw core::Error(core::sqlstate::internal_error,
                      std::string("SPI_prepare failed: ") + SPI_result_code_string(SPI_result));
  guard([&]() noexcept { return SPI_keepplan(prepared); });
  plan_ = prepared;
  return plan_;
}

namespace {

// Whether the one generic plan of a kept statement is planned and valid.
bool generic_plan_ready(SPIPlanPtr plan) {
  if (list_length(plan->plancache_list) != 1) return true;  // (not a plan of ours: leave it to SPI)
  const CachedPlanSource* source = static_cast<CachedPlanSource*>(linitial(plan->plancache_list));
  return source->is_valid && source->gplan != nullptr && source->gplan->is_valid;
}

// Plans a Planning::generic statement's generic plan with sequential scans ruled out. Its shape
// must not depend on how big the tables were when it was planned: a plan made on an almost empty
// queue is kept until the next ANALYZE, and must stay an index scan as the queue grows.
void plan_generic(SPIPlanPtr plan) {
  guard([&]() noexcept {
    const int level = NewGUCNestLevel();
    set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    CachedPlan* cached = SPI_plan_get_cached_plan(plan);
    if (cached != nullptr) ReleaseCachedPlan(cached, CurrentResourceOwner);
    AtEOXact_GUC(true, level);
  });
}

}  // namespace

std::string Statement::explain() {
  SPIPlanPtr p = plan();
  if (planning_ == Planning::generic && !generic_plan_ready(p)) plan_generic(p);
  char* text = guard([&]() noexcept {
    CachedPlan* cached = SPI_plan_get_cached_plan(p);
    ExplainState* es = NewExplainState();
    es->costs = false;
    es->format = EXPLAIN_FORMAT_TEXT;
    ExplainBeginOutput(es);
    ListCell* lc;
    foreach (lc, cached->stmt_list) {
      PlannedStmt* stmt = lfirst_node(PlannedStmt, lc);
      ExplainOnePlan(stmt, nullptr, es, "", nullptr, nullptr, nullptr, nullptr);
    }
    ExplainEndOutput(es);
    ReleaseCachedPlan(cached, CurrentResourceOwner);
    return es->str->data;
  });
  return std::string(text);
}

Datum Row::datum(int column, bool* is_null) const {
  return guard([&]() noexcept { return SPI_getbinval(tuple_, desc_, column, is_null); });
}

bool Row::is_null(int column) const {
  bool null = true;
  datum(column, &null);
  return null;
}

std::optional<std::string> Row::text(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  char* s = guard([&]() noexcept { return text_to_cstring(reinterpret_cast<::text*>(DatumGetPointer(d))); });
  return std::string(s);
}

std::optional<std::int64_t> Row::int8(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  return DatumGetInt64(d);
}

std::optional<bool> Row::boolean(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  return DatumGetBool(d);
}

std::optional<double> Row::float8(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  return DatumGetFloat8(d);
}

Value optional_float8_value(const std::optional<double>& v) {
  return v ? float8_value(*v) : null_value();
}

std::optional<Oid> Row::oid(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  return DatumGetObjectId(d);
}

std::optional<std::string> Row::bytea(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  ::bytea* b = guard([&]() noexcept {
    return reinterpret_cast<::bytea*>(pg_detoast_datum_packed(reinterpret_cast<varlena*>(DatumGetPointer(d))));
  });
  return std::string(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
}

std::optional<std::string> Row::uuid(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  const pg_uuid_t* u = DatumGetUUIDP(d);
  return std::string(reinterpret_cast<const char*>(u->data), UUID_LEN);
}

std::optional<TimestampTz> Row::timestamptz(int column) const {
  bool null = true;
  Datum d = datum(column, &null);
  if (null) return std::nullopt;
  return DatumGetTimestampTz(d);
}

// Connected on the first statement: a call that runs none (the hot paths below SPI, see
// pg/table_access.hpp) never connects. The caller stays in its memory context.
void Spi::connect() {
  if (open_) return;
  int rc = guard([]() noexcept {
    const MemoryContext caller = CurrentMemoryContext;
    const int r = SPI_connect();
    MemoryContextSwitchTo(caller);
    return r;
  });
  if (rc != SPI_OK_CONNECT)
    throw core::Error(core::sqlstate::internal_error, std::string("SPI_connect failed: ") + SPI_result_code_string(rc));
  open_ = true;
}

void Spi::release_rows() {
  SPITupleTable* rows = SPI_tuptable;
  if (rows == nullptr) return;
  guard([&]() noexcept { SPI_freetuptable(rows); });
  SPI_tuptable = nullptr;
}

std::uint64_t Spi::execute(Statement& statement, std::span<const Value> args) {
  const int n = statement.arg_count();
  if (static_cast<int>(args.size()) != n)
    throw core::Error(core::sqlstate::internal_error, "statement argument count mismatch");
  connect();
  SPIPlanPtr plan = statement.plan();  // refuses more than max_args arguments
  // (invalidations were accepted at the start of the call: see pg/table_cache.hpp)
  if (statement.generic() && !generic_plan_ready(plan)) plan_generic(plan);
  Datum values[Statement::max_args];
  char nulls[Statement::max_args];
  int i = 0;
  for (const Value& v : args) {
    values[i] = v.datum;
    nulls[i] = v.is_null ? 'n' : ' ';
    ++i;
  }
  int rc = guard([&]() noexcept {
    const MemoryContext caller = CurrentMemoryContext;  // SPI returns in its own context
    const int r = SPI_execute_plan(plan, values, nulls, false, 0);
    MemoryContextSwitchTo(caller);
    return r;
  });
  if (rc < 0)
    throw core::Error(core::sqlstate::internal_error,
                      std::string("SPI_execute_plan failed: ") + SPI_result_code_string(rc));
  return SPI_processed;
}

std::uint64_t Spi::run_once(const std::string& sql) {
  connect();
  const char* text = sql.c_str();
  int rc = guard([&]() noexcept {
    const MemoryContext caller = CurrentMemoryContext;
    const int r = SPI_execute(text, false, 0);
    MemoryContextSwitchTo(caller);
    return r;
  });
  // Transaction control and COPY to or from the client cannot run inside a function: 0A000, as
  // PL/pgSQL's EXECUTE answers them (the PL/pgSQL edition's twin of this path).
  if (rc == SPI_ERROR_TRANSACTION || rc == SPI_ERROR_COPY)
    throw core::Error(core::sqlstate::feature_not_supported,
                      std::string("cannot run this statement inside a function: ") + SPI_result_code_string(rc));
  if (rc < 0)
    throw core::Error(core::sqlstate::internal_error, std::string("SPI_execute failed: ") + SPI_result_code_string(rc));
  return SPI_processed;
}

void Spi::finish() {
  if (!open_) return;
  open_ = false;
  // SPI_finish returns to the context current at SPI_connect, which (connected on the first
  // statement) may be a scratch context already deleted: stay in the caller's instead.
  guard([]() noexcept {
    const MemoryContext caller = CurrentMemoryContext;
    SPI_finish();
    MemoryContextSwitchTo(caller);
  });
}

}  // namespace fy::pg
