#include "pg/trigger.hpp"

extern "C" {
#include "commands/trigger.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

#include "pg/spi.hpp"

namespace fy::pg {

TriggerCall::TriggerCall(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    throw core::Error(core::sqlstate::internal_error, "forgeyard.versioning_trigger() must be called as a trigger");
  data_ = reinterpret_cast<TriggerData*>(fcinfo->context);
  if (!TRIGGER_FIRED_FOR_ROW(data_->tg_event) || !TRIGGER_FIRED_BEFORE(data_->tg_event))
    throw core::Error(core::sqlstate::internal_error, "the versioning trigger must fire BEFORE, FOR EACH ROW");
}

const char* trigger_operation(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo)) throw core::Error(core::sqlstate::internal_error, "must be called as a trigger");
  const TriggerEvent event = reinterpret_cast<TriggerData*>(fcinfo->context)->tg_event;
  if (TRIGGER_FIRED_BY_UPDATE(event)) return "UPDATE";
  if (TRIGGER_FIRED_BY_DELETE(event)) return "DELETE";
  if (TRIGGER_FIRED_BY_TRUNCATE(event)) return "TRUNCATE";
  return "INSERT";
}

bool TriggerCall::is_insert() const {
  return TRIGGER_FIRED_BY_INSERT(data_->tg_event);
}
bool TriggerCall::is_update() const {
  return TRIGGER_FIRED_BY_UPDATE(data_->tg_event);
}

std::string TriggerCall::table() const {
  Relation rel = data_->tg_relation;
  const char* name = guard([&]() noexcept {
    return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
  });
  return name;
}

std::optional<std::int64_t> TriggerCall::int8(HeapTuple tuple, const char* column) const {
  TupleDesc desc = data_->tg_relation->rd_att;
  int attnum = guard([&]() noexcept { return SPI_fnumber(desc, column); });
  if (attnum <= 0) throw core::Error("42703", std::string("column \"") + column + "\" does not exist");
  bool is_null = true;
  Datum d = guard([&]() noexcept { return SPI_getbinval(tuple, desc, attnum, &is_null); });
  if (is_null) return std::nullopt;
  return DatumGetInt64(d);
}

std::optional<std::int64_t> TriggerCall::new_int8(const char* column) const {
  return int8(is_update() ? data_->tg_newtuple : data_->tg_trigtuple, column);
}

std::optional<std::int64_t> TriggerCall::old_int8(const char* column) const {
  return int8(data_->tg_trigtuple, column);
}

Datum TriggerCall::keep_new_row() const {
  return PointerGetDatum(is_update() ? data_->tg_newtuple : data_->tg_trigtuple);
}

std::string quote_identifier(const std::string& name) {
  const char* in = name.c_str();
  const char* quoted = guard([&]() noexcept { return ::quote_identifier(in); });
  return quoted;
}

Value jsonb_value(const std::string& text) {
  const char* in = text.c_str();
  Datum d = guard([&]() noexcept { return DirectFunctionCall1(jsonb_in, CStringGetDatum(in)); });
  return {d, false};
}

bool jsonb_equal(const Value& a, const Value& b) {
  return guard([&]() noexcept { return DatumGetBool(DirectFunctionCall2(jsonb_eq, a.datum, b.datum)); });
}

std::string jsonb_text(const Value& json) {
  char* text = guard([&]() noexcept {
    Jsonb* jb = DatumGetJsonbP(json.datum);
    return JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
  });
  std::string out(text);
  guard([&]() noexcept { pfree(text); });
  return out;
}

std::vector<std::pair<std::string, std::string>> jsonb_option_pairs(Spi& spi, const Value& json) {
  static Statement entries("SELECT e.key, e.value OPERATOR(pg_catalog.#>>) '{}' FROM pg_catalog.jsonb_each($1) e",
                           {JSONBOID});
  if (!jsonb_object_keys(json)) throw core::Error(core::sqlstate::invalid_parameter, "options must be a JSON object");
  std::vector<std::pair<std::string, std::string>> pairs;
  spi.run(entries, {json}, [&](const Row& r) { pairs.emplace_back(*r.text(1), r.text(2).value_or("null")); });
  return pairs;
}

std::optional<std::vector<std::string>> jsonb_object_keys(const Value& json) {
  std::optional<std::map<std::string, JsonMember>> members = jsonb_object_members(json);
  if (!members) return std::nullopt;
  std::vector<std::string> keys;
  keys.reserve(members->size());
  for (auto& [key, _] : *members) keys.push_back(key);
  return keys;
}

std::optional<std::map<std::string, JsonMember>> jsonb_object_members(const Value& json) {
  Jsonb* jb = guard([&]() noexcept { return DatumGetJsonbP(json.datum); });
  if (!JB_ROOT_IS_OBJECT(jb)) return std::nullopt;
  std::map<std::string, JsonMember> members;
  JsonbIterator* it = guard([&]() noexcept { return JsonbIteratorInit(&jb->root); });
  std::string key;
  for (;;) {
    JsonbValue v;
    JsonbIteratorToken token = guard([&]() noexcept { return JsonbIteratorNext(&it, &v, true); });
    if (token == WJB_DONE) break;
    if (token == WJB_KEY) {
      key.assign(v.val.string.val, static_cast<std::size_t>(v.val.string.len));
    } else if (token == WJB_VALUE) {
      JsonMember& m = members[key];
      switch (v.type) {
        case jbvNull:
          break;
        case jbvString:
          m.text.emplace(v.val.string.val, static_cast<std::size_t>(v.val.string.len));
          break;
        case jbvNumeric:
          m.text = guard([&]() noexcept {
            return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
          });
          break;
        case jbvBool:
          m.text = v.val.boolean ? "true" : "false";
          break;
        default:
          m.scalar = false;
      }
    }
  }
  return members;
}

namespace {
void (*relation_forget)(Oid) noexcept = nullptr;
void relation_callback(Datum, Oid relid) {
  relation_forget(relid);
}
// ALTER SCHEMA ... RENAME invalidates no relcache entry, yet it changes the schema-qualified
// names kept with the relations: forget them all (a new table could take the old name).
void namespace_callback(Datum, int, uint32) {
  relation_forget(InvalidOid);
}
}  // namespace

void on_relation_invalidated(void (*forget)(Oid relid) noexcept) {
  if (relation_forget != nullptr) return;
  relation_forget = forget;
  guard([]() noexcept {
    CacheRegisterRelcacheCallback(relation_callback, (Datum)0);
    CacheRegisterSyscacheCallback(NAMESPACEOID, namespace_callback, (Datum)0);
  });
}

}  // namespace fy::pg
