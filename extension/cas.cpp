// Compare-and-set by entity version (docs/sql-api.md#compare-and-set). These functions run
// with the caller's rights (SECURITY INVOKER): they can never change a table the caller could
// not UPDATE itself.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pg/args.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"

namespace fy {
namespace {

using core::sqlstate::invalid_parameter;

constexpr char trigger_name[] = "forgeyard_versioning";

struct Column {
  bool generated = false;
  std::string type;  // format_type: qualified where not on the pinned search path
  Oid type_oid = InvalidOid;
  std::int32_t typmod = -1;
  // Of a type that jsonb_to_record fills from a JSON scalar through the type's input function
  // alone: not a domain, array, composite, json or jsonb.
  bool plain = false;
};

// What the functions need to know of a table, read from the catalog once and kept until
// PostgreSQL invalidates the table's cache entry (ALTER, CREATE/DROP TRIGGER, DROP, ...).
struct Table {
  Oid oid = InvalidOid;
  std::string name;  // regclass text: schema-qualified unless on the search path (pg_catalog)
  std::map<std::string, Column> columns;
  std::vector<std::set<std::string>> unique_keys;  // primary key and unique indexes (no expressions, no predicates)
  bool versioned = false;
  bool has(const std::string& c) const { return columns.contains(c); }
};

// Shared pointers: an invalidation that arrives while a call runs (SPI takes locks, and lock
// acquisition processes invalidations) drops the entry, not the Table the call holds.
std::map<Oid, std::shared_ptr<const Table>> tables;

void forget_table(Oid relid) noexcept {
  if (relid == InvalidOid)
    tables.clear();
  else
    tables.erase(relid);
}

Table read_table(pg::Spi& spi, Oid rel);

std::shared_ptr<const Table> describe(pg::Spi& spi, Oid rel) {
  pg::on_relation_invalidated(forget_table);
  auto it = tables.find(rel);
  if (it != tables.end()) return it->second;
  auto table = std::make_shared<const Table>(read_table(spi, rel));
  tables[rel] = table;
  return table;
}

Table read_table(pg::Spi& spi, Oid rel) {
  static pg::Statement name_of(
      "SELECT $1::pg_catalog.regclass::pg_catalog.text, c.relkind::pg_catalog.text"
      "  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
      {OIDOID});
  static pg::Statement columns_of(
      "SELECT a.attname::pg_catalog.text, a.attgenerated OPERATOR(pg_catalog.<>) '',"
      "       pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid, a.atttypmod::pg_catalog.int8,"
      "       y.typtype OPERATOR(pg_catalog.=) ANY (ARRAY['b', 'e', 'r', 'm']::pg_catalog.\"char\"[])"
      "         AND y.typcategory OPERATOR(pg_catalog.<>) 'A'"
      "         AND y.oid OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog.json'::pg_catalog.regtype,"
      "                                                     'pg_catalog.jsonb'::pg_catalog.regtype]::pg_catalog.oid[])"
      "  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) a.atttypid"
      " WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
      {OIDOID});
  Table t;
  t.oid = rel;
  std::string kind;
  spi.run(name_of, {pg::oid_value(rel)}, [&](const pg::Row& row) {
    t.name = *row.text(1);
    kind = *row.text(2);
  });
  if (t.name.empty()) throw core::Error(core::sqlstate::undefined_object, "relation does not exist");
  if (kind == "p")  // an UPDATE moving a row between partitions re-inserts it (version != 1)
    throw core::Error(invalid_parameter, "rel must be a plain table, not a partitioned one: " + t.name,
                      "version its partitions one by one");
  if (kind != "r") throw core::Error(invalid_parameter, "rel must be a table: " + t.name);
  spi.run(columns_of, {pg::oid_value(rel)}, [&](const pg::Row& row) {
    t.columns[*row.text(1)] =
        Column{*row.boolean(2), *row.text(3), *row.oid(4), static_cast<std::int32_t>(*row.int8(5)), *row.boolean(6)};
  });
  static pg::Statement unique_columns(
      "SELECT i.indexrelid, a.attname::pg_catalog.text"
      "  FROM pg_catalog.pg_index i"
      "  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid"
      "   AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey::pg_catalog.int2[])"
      " WHERE i.indrelid OPERATOR(pg_catalog.=) $1 AND i.indisunique AND i.indpred IS NULL"
      "   AND i.indexprs IS NULL",
      {OIDOID});
  std::map<Oid, std::set<std::string>> unique_indexes;
  spi.run(unique_columns, {pg::oid_value(rel)},
          [&](const pg::Row& row) { unique_indexes[*row.oid(1)].insert(*row.text(2)); });
  for (auto& [index, columns] : unique_indexes) t.unique_keys.push_back(columns);
  static pg::Statement trigger(
      "SELECT 1 FROM pg_catalog.pg_trigger g"
      " WHERE g.tgrelid OPERATOR(pg_catalog.=) $1 AND g.tgname OPERATOR(pg_catalog.=) $2",
      {OIDOID, TEXTOID});
  t.versioned = spi.run(trigger, {pg::oid_value(rel), pg::text_value(trigger_name)}) > 0;
  return t;
}

// The members of a jsonb object argument; 22023 naming the argument when it is not an object.
std::map<std::string, pg::JsonMember> object_members(const pg::Value& json, const char* argument) {
  std::optional<std::map<std::string, pg::JsonMember>> members = pg::jsonb_object_members(json);
  if (!members) throw core::Error(invalid_parameter, std::string(argument) + " must be a JSON object");
  return std::move(*members);
}
// Their keys, sorted.
std::vector<std::string> keys_of(const std::map<std::string, pg::JsonMember>& members) {
  std::vector<std::string> keys;
  for (const auto& [key, _] : members) keys.push_back(key);
  return keys;
}
std::vector<std::string> object_keys(const pg::Value& json, const char* argument) {
  return keys_of(object_members(json, argument));
}

// The key must contain the columns of the primary key or of a unique index, and carry tenant_id
// where the table has one.
void check_key(const Table& t, const std::vector<std::string>& key) {
  if (key.empty()) throw core::Error(invalid_parameter, "key must name at least one column");
  for (const std::string& c : key)
    if (!t.has(c)) throw core::Error(invalid_parameter, "key names unknown column \"" + c + "\" of " + t.name);
  if (t.has(core::tenant_column) && std::find(key.begin(), key.end(), core::tenant_column) == key.end())
    throw core::Error(invalid_parameter, "key must include tenant_id: " + t.name + " has a tenant_id column");
  // Unique when it contains every column of the primary key or of a unique index (tenant_id
  // may come on top of a globally unique id).
  const std::set<std::string> wanted(key.begin(), key.end());
  const bool unique = std::any_of(t.unique_keys.begin(), t.unique_keys.end(), [&](const std::set<std::string>& u) {
    return std::includes(wanted.begin(), wanted.end(), u.begin(), u.end());
  });
  if (!unique) {
    std::string list;
    for (const std::string& c : key) list += (list.empty() ? "" : ",") + c;
    throw core::Error(invalid_parameter,
                      "key columns (" + list + ") do not contain the primary key or a unique index of " + t.name);
  }
}

void check_changes(const Table& t, const std::vector<std::string>& key, const std::vector<std::string>& changes) {
  if (changes.empty()) throw core::Error(invalid_parameter, "changes must name at least one column");
  for (const std::string& c : changes) {
    auto it = t.columns.find(c);
    if (it == t.columns.end())
      throw core::Error(invalid_parameter, "changes name unknown column \"" + c + "\" of " + t.name);
    if (c == core::version_column)
      throw core::Error(invalid_parameter, "changes must not set entity_version: cas_update sets it to expected + 1");
    if (c == core::tenant_column) throw core::Error(invalid_parameter, "changes must not set tenant_id");
    if (std::find(key.begin(), key.end(), c) != key.end())
      throw core::Error(invalid_parameter, "changes must not set key column \"" + c + "\"");
    if (it->second.generated)
      throw core::Error(invalid_parameter, "changes must not set generated column \"" + c + "\"");
  }
}

// The named columns of jsonb parameter $param as a record `alias`, typed as the table's columns.
// Only those columns: the table's other columns (NOT NULL domains, say) play no part.
std::string record_of(const Table& t, const std::vector<std::string>& columns, int param, const char* alias) {
  std::string list;
  for (const std::string& c : columns)
    list += (list.empty() ? "" : ", ") + pg::quote_identifier(c) + " " + t.columns.at(c).type;
  return "pg_catalog.jsonb_to_record($" + std::to_string(param) + ") AS " + alias + "(" + list + ")";
}
std::string key_condition(const std::vector<std::string>& key) {
  std::string sql;
  for (const std::string& c : key) {
    const std::string q = pg::quote_identifier(c);
    if (!sql.empty()) sql += " AND ";
    sql += "t." + q;
    sql += " OPERATOR(pg_catalog.=) k." + q;
  }
  return sql;
}

std::int64_t current_version(pg::Spi& spi, const Table& t, const std::vector<std::string>& key,
                             const pg::Value& key_json, bool* found) {
  pg::Statement& read = pg::Statement::cached(
      "SELECT t.entity_version FROM " + t.name + " t, " + record_of(t, key, 1, "k") + " WHERE " + key_condition(key),
      {JSONBOID});
  std::int64_t version = 0;
  *found = spi.run(read, {key_json}, [&](const pg::Row& row) { version = row.int8(1).value_or(0); }) > 0;
  return version;
}

// The update through jsonb_to_record: values travel as jsonb parameters and are typed by
// jsonb_to_record with the columns' own types. One kept plan per table and column set.
std::uint64_t update_through_records(pg::Spi& spi, const Table& t, const std::vector<std::string>& key,
                                     const std::vector<std::string>& changes, const pg::Value& key_json,
                                     const pg::Value& changes_json, std::int64_t expected, std::int64_t* version) {
  std::string set_list, value_list;
  for (const std::string& c : changes) {
    const std::string q = pg::quote_identifier(c);
    set_list += q + ", ";
    value_list += "c." + q + ", ";
  }
  pg::Statement& update =
      pg::Statement::cached("UPDATE " + t.name + " t SET (" + set_list + "entity_version) = (SELECT " + value_list +
                                "$3 OPERATOR(pg_catalog.+) 1 FROM " + record_of(t, changes, 2, "c") + ")" + " FROM " +
                                record_of(t, key, 1, "k") + " WHERE " + key_condition(key) +
                                " AND t.entity_version OPERATOR(pg_catalog.=) $3 RETURNING t.entity_version",
                            {JSONBOID, JSONBOID, INT8OID});
  return spi.run(update, {key_json, changes_json, pg::int8_value(expected)},
                 [&](const pg::Row& row) { *version = row.int8(1).value_or(0); });
}

// The same update with each value a parameter of its column's own type, made from the JSON
// scalar by the type's input function and typmod, as jsonb_to_record makes it: no function scans
// and no jsonb in the statement. Only where every value is a scalar and every column plain
// (Column::plain); otherwise nullopt and the update goes through the records.
struct TypedUpdate {
  std::string sql;
  std::vector<Oid> types;
  std::vector<pg::Value> args;
};
std::optional<TypedUpdate> typed_update(const Table& t, const std::vector<std::string>& key,
                                        const std::vector<std::string>& changes,
                                        const std::map<std::string, pg::JsonMember>& key_values,
                                        const std::map<std::string, pg::JsonMember>& change_values,
                                        std::int64_t expected) {
  auto usable = [&](const std::vector<std::string>& columns, const std::map<std::string, pg::JsonMember>& values) {
    return std::all_of(columns.begin(), columns.end(),
                       [&](const std::string& c) { return t.columns.at(c).plain && values.at(c).scalar; });
  };
  if (!usable(key, key_values) || !usable(changes, change_values)) return std::nullopt;
  TypedUpdate u;
  u.types.push_back(INT8OID);
  u.args.push_back(pg::int8_value(expected));
  auto parameter = [&](const std::string& c, const pg::JsonMember& v) {
    const Column& column = t.columns.at(c);
    u.types.push_back(column.type_oid);
    u.args.push_back(pg::typed_value(column.type_oid, column.typmod, v.text));
    return "$" + std::to_string(u.args.size());
  };
  u.sql = "UPDATE " + t.name + " t SET ";
  for (const std::string& c : changes)
    u.sql += pg::quote_identifier(c) + " = " + parameter(c, change_values.at(c)) + ", ";
  u.sql += "entity_version = $1 OPERATOR(pg_catalog.+) 1 WHERE ";
  for (const std::string& c : key)
    u.sql += "t." + pg::quote_identifier(c) + " OPERATOR(pg_catalog.=) " + parameter(c, key_values.at(c)) + " AND ";
  u.sql += "t.entity_version OPERATOR(pg_catalog.=) $1 RETURNING t.entity_version";
  // The kept statement is found by its text, and its parameters' types are fixed when it is
  // prepared: the text names them, so a column whose type changed gets a statement of its own.
  u.sql += " -- parameter types:";
  for (std::size_t i = 1; i < u.types.size(); ++i) u.sql += " " + std::to_string(u.types[i]);
  if (u.args.size() > static_cast<std::size_t>(pg::Statement::max_args)) return std::nullopt;
  return u;
}

std::shared_ptr<const Table> versioned_table(pg::Spi& spi, FunctionCallInfo fcinfo) {
  std::shared_ptr<const Table> table = describe(spi, pg::regclass_arg(fcinfo, 0, "rel"));
  const Table& t = *table;
  if (!t.has(core::version_column)) throw core::Error(invalid_parameter, t.name + " has no entity_version column");
  if (!t.versioned)
    throw core::Error(invalid_parameter, t.name + " is not under version control",
                      "call forgeyard.enable_versioning('" + t.name + "') first");
  return table;
}

}  // namespace
}  // namespace fy

using namespace fy;

// The row trigger behind enable_versioning: INSERT starts at 1; UPDATE moves expected -> expected + 1.
FY_FUNCTION(fy_versioning_trigger) {
  pg::TriggerCall call(fcinfo);
  const std::optional<std::int64_t> next = call.new_int8(core::version_column);
  if (call.is_insert()) {
    if (next != 1)
      throw core::Error(invalid_parameter, "a new row of " + call.table() + " must start at entity_version 1",
                        next ? "it was inserted with " + std::to_string(*next) : "it was inserted with NULL");
    return call.keep_new_row();
  }
  const std::int64_t current = call.old_int8(core::version_column).value_or(0);
  if (!next) throw core::Error(core::sqlstate::null_value, "entity_version of " + call.table() + " must not be NULL");
  if (*next == current)
    throw core::Error(core::sqlstate::version_conflict,
                      "an UPDATE of " + call.table() + " must set entity_version to the expected version + 1",
                      "current version " + std::to_string(current) + "; the UPDATE did not change it");
  if (*next != current + 1) core::throw_version_conflict(call.table(), *next - 1, current);
  return call.keep_new_row();
}

// enable_versioning(rel): every UPDATE of rel must then move entity_version from expected to expected + 1.
FY_FUNCTION(fy_enable_versioning) {
  static pg::Statement column(
      "SELECT a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype,"
      "       a.attnotnull,"
      // DEFAULT 1, '1', 1::bigint and '1'::bigint are the same default.
      "       pg_catalog.pg_get_expr(d.adbin, d.adrelid) OPERATOR(pg_catalog.=)"
      "         ANY (ARRAY['1', '''1''::bigint', '(1)::bigint'])"
      "  FROM pg_catalog.pg_attribute a"
      "  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid OPERATOR(pg_catalog.=) a.attrelid"
      "   AND d.adnum OPERATOR(pg_catalog.=) a.attnum"
      " WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attname OPERATOR(pg_catalog.=) 'entity_version'"
      "   AND NOT a.attisdropped",
      {OIDOID});
  static pg::Statement may_update("SELECT pg_catalog.has_table_privilege($1, 'UPDATE')", {OIDOID});
  pg::Spi spi;
  const std::shared_ptr<const Table> table = describe(spi, pg::regclass_arg(fcinfo, 0, "rel"));
  const Table& t = *table;
  bool exists = false, is_bigint = false, not_null = false, default_one = false;
  spi.run(column, {pg::oid_value(t.oid)}, [&](const pg::Row& row) {
    exists = true;
    is_bigint = *row.boolean(1);
    not_null = *row.boolean(2);
    default_one = row.boolean(3).value_or(false);
  });
  if (!exists)
    throw core::Error(core::sqlstate::undefined_column, t.name + " has no entity_version column",
                      "add: entity_version bigint NOT NULL DEFAULT 1");
  if (!is_bigint || !not_null || !default_one)
    throw core::Error(invalid_parameter, "entity_version of " + t.name + " must be bigint NOT NULL DEFAULT 1");
  bool allowed = false;
  spi.run(may_update, {pg::oid_value(t.oid)}, [&](const pg::Row& row) { allowed = *row.boolean(1); });
  if (!allowed)
    throw core::Error(core::sqlstate::insufficient_privilege,
                      "permission denied: UPDATE on " + t.name + " is needed to version it");
  if (!t.versioned)
    spi.run_once("CREATE TRIGGER " + std::string(trigger_name) + " BEFORE INSERT OR UPDATE ON " + t.name +
                 " FOR EACH ROW EXECUTE FUNCTION forgeyard.versioning_trigger()");
  spi.finish();
  return (Datum)0;
}

// disable_versioning(rel): drops the trigger again (the column and its values stay).
FY_FUNCTION(fy_disable_versioning) {
  pg::Spi spi;
  const std::shared_ptr<const Table> table = describe(spi, pg::regclass_arg(fcinfo, 0, "rel"));
  const Table& t = *table;
  const bool was = t.versioned;
  if (was) spi.run_once("DROP TRIGGER " + std::string(trigger_name) + " ON " + t.name);
  spi.finish();
  return BoolGetDatum(was);
}

// cas_update(rel, key, expected_version, changes) -> the new version; FY002 on conflict, P0002 if no row.
FY_FUNCTION(fy_cas_update) {
  pg::Spi spi;
  const std::shared_ptr<const Table> table = versioned_table(spi, fcinfo);
  const Table& t = *table;
  const pg::Value key_json = pg::jsonb_arg(fcinfo, 1, "key");
  const std::int64_t expected = pg::int8_arg(fcinfo, 2, "expected_version");
  const pg::Value changes_json = pg::jsonb_arg(fcinfo, 3, "changes");
  if (expected < 1) throw core::Error(invalid_parameter, "expected_version must be at least 1");
  const std::map<std::string, pg::JsonMember> key_values = object_members(key_json, "key");
  const std::map<std::string, pg::JsonMember> change_values = object_members(changes_json, "changes");
  const std::vector<std::string> key = keys_of(key_values), changes = keys_of(change_values);
  check_key(t, key);
  check_changes(t, key, changes);

  std::int64_t version = 0;
  std::uint64_t updated = 0;
  if (const std::optional<TypedUpdate> typed = typed_update(t, key, changes, key_values, change_values, expected)) {
    pg::Statement& update = pg::Statement::cached(typed->sql, typed->types);
    updated = spi.run(update, typed->args, [&](const pg::Row& row) { version = row.int8(1).value_or(0); });
  } else {
    updated = update_through_records(spi, t, key, changes, key_json, changes_json, expected, &version);
  }
  if (updated > 1)
    throw core::Error(core::sqlstate::internal_error, "cas_update matched more than one row of " + t.name);
  if (updated == 0) {
    bool found = false;
    const std::int64_t current = current_version(spi, t, key, key_json, &found);
    if (!found) throw core::Error(core::sqlstate::no_data_found, "no row of " + t.name + " matches the key");
    core::throw_version_conflict(t.name, expected, current);
  }
  spi.finish();
  return Int64GetDatum(version);
}

// cas_get(rel, key) -> (row jsonb, entity_version); no row when the key matches none.
FY_FUNCTION(fy_cas_get) {
  pg::Spi spi;
  const std::shared_ptr<const Table> table = versioned_table(spi, fcinfo);
  const Table& t = *table;
  const pg::Value key_json = pg::jsonb_arg(fcinfo, 1, "key");
  const std::vector<std::string> key = object_keys(key_json, "key");
  check_key(t, key);
  // t.*, not t: a column named "t" would make the bare alias ambiguous (42702).
  pg::Statement& read =
      pg::Statement::cached("SELECT pg_catalog.to_jsonb(t.*)::pg_catalog.text, t.entity_version FROM " + t.name +
                                " t, " + record_of(t, key, 1, "k") + " WHERE " + key_condition(key),
                            {JSONBOID});
  std::optional<std::string> row_json;
  std::int64_t version = 0;
  spi.run(read, {key_json}, [&](const pg::Row& row) {
    row_json = row.text(1);
    version = row.int8(2).value_or(0);
  });
  spi.finish();
  pg::TableResult out(fcinfo);
  if (row_json) out.add_row({pg::jsonb_value(*row_json), pg::int8_value(version)});
  return (Datum)0;
}
