// Compare-and-set on tables in the SQLite store, with the extension's rules and answers.
#include "sqlite/versioned_rows.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "core/core.hpp"
#include "error_map.hpp"

namespace forgeyard::detail {

namespace {

struct Column {
  std::string type;
  bool not_null = false;
  std::optional<std::string> default_value;
  bool generated = false;
};

struct Table {
  std::string name;    // as given
  std::string quoted;  // "name"
  std::map<std::string, Column> columns;
  std::vector<std::set<std::string>> unique_keys;  // primary key and unique indexes
  bool has(const std::string& c) const { return columns.contains(c); }
};

std::string quote(const std::string& identifier) {
  std::string out = "\"";
  for (char c : identifier) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

Table read_table(Db& db, std::string_view table) {
  Table t{std::string(table), quote(std::string(table)), {}, {}};
  {
    auto q = db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1");
    q.bind(1, table);
    if (!q.step()) throw Error(sqlstate::undefined_table, "relation \"" + t.name + "\" does not exist");
  }
  std::set<std::string> primary_key;
  {
    auto q = db.query("SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?1)");
    q.bind(1, table);
    while (q.step()) {
      Column c{q.text(1), q.int64(2) != 0, q.is_null(3) ? std::nullopt : std::optional<std::string>(q.text(3)),
               q.int64(5) == 2 || q.int64(5) == 3};
      if (q.int64(4) > 0) primary_key.insert(q.text(0));
      t.columns[q.text(0)] = c;
    }
  }
  if (!primary_key.empty()) t.unique_keys.push_back(primary_key);
  std::vector<std::string> indexes;
  {
    auto q = db.query("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" AND NOT partial");
    q.bind(1, table);
    while (q.step()) indexes.push_back(q.text(0));
  }
  for (const std::string& index : indexes) {
    std::set<std::string> columns;
    bool expression = false;
    auto q = db.query("SELECT name FROM pragma_index_info(?1)");
    q.bind(1, index);
    while (q.step()) {
      if (q.is_null(0))
        expression = true;
      else
        columns.insert(q.text(0));
    }
    if (!expression) t.unique_keys.push_back(columns);
  }
  return t;
}

bool is_versioned(Db& db, const Table& t);

// Tables read from the schema, kept while the database's schema_version stays the same (any
// DDL, from any process, changes it).
std::mutex tables_mutex;
std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, Table>> tables;  // (file, table)

Table describe(Db& db, std::string_view table) {
  std::int64_t schema_version = 0;
  {
    auto q = db.query("PRAGMA schema_version");
    if (q.step()) schema_version = q.int64(0);
  }
  const auto key = std::make_pair(db.path(), std::string(table));
  {
    std::lock_guard lock(tables_mutex);
    auto it = tables.find(key);
    if (it != tables.end() && it->second.first == schema_version) return it->second.second;
  }
  Table t = read_table(db, table);
  std::lock_guard lock(tables_mutex);
  tables[key] = {schema_version, t};
  return t;
}

bool is_versioned(Db& db, const Table& t) {
  auto q = db.query("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = ?1 AND name = ?2");
  q.bind(1, t.name).bind(2, "forgeyard_versioning_update_" + t.name);
  return q.step();
}

// The same checks, in the same order and words, as extension/cas.cpp.
void check_key(const Table& t, const Fields& key) {
  if (key.empty()) throw Error(sqlstate::invalid_parameter, "key must name at least one column");
  std::set<std::string> names;
  for (const auto& [c, v] : key) {
    if (!t.has(c)) throw Error(sqlstate::invalid_parameter, "key names unknown column \"" + c + "\" of " + t.name);
    names.insert(c);
  }
  if (t.has(fy::core::tenant_column) && !names.contains(fy::core::tenant_column))
    throw Error(sqlstate::invalid_parameter, "key must include tenant_id: " + t.name + " has a tenant_id column");
  const bool unique = std::any_of(t.unique_keys.begin(), t.unique_keys.end(), [&](const std::set<std::string>& u) {
    return std::includes(names.begin(), names.end(), u.begin(), u.end());
  });
  if (!unique) {
    std::string wanted;
    for (const std::string& c : names) wanted += (wanted.empty() ? "" : ",") + c;
    throw Error(sqlstate::invalid_parameter,
                "key columns (" + wanted + ") do not contain the primary key or a unique index of " + t.name);
  }
}

void check_changes(const Table& t, const Fields& key, const Fields& changes) {
  if (changes.empty()) throw Error(sqlstate::invalid_parameter, "changes must name at least one column");
  for (const auto& [c, v] : changes) {
    auto it = t.columns.find(c);
    if (it == t.columns.end())
      throw Error(sqlstate::invalid_parameter, "changes name unknown column \"" + c + "\" of " + t.name);
    if (c == fy::core::version_column)
      throw Error(sqlstate::invalid_parameter,
                  "changes must not set entity_version: cas_update sets it to expected + 1");
    if (c == fy::core::tenant_column) throw Error(sqlstate::invalid_parameter, "changes must not set tenant_id");
    if (key.contains(c)) throw Error(sqlstate::invalid_parameter, "changes must not set key column \"" + c + "\"");
    if (it->second.generated)
      throw Error(sqlstate::invalid_parameter, "changes must not set generated column \"" + c + "\"");
  }
}

Table versioned_table(Db& db, std::string_view table) {
  Table t = describe(db, table);
  if (!t.has(fy::core::version_column))
    throw Error(sqlstate::invalid_parameter, t.name + " has no entity_version column");
  if (!is_versioned(db, t))
    throw Error(sqlstate::invalid_parameter, t.name + " is not under version control", "call enable_versioning first");
  return t;
}

void bind_value(Query& q, int index, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>)
          q.bind_null(index);
        else if constexpr (std::is_same_v<T, bool>)
          q.bind(index, static_cast<std::int64_t>(x ? 1 : 0));
        else if constexpr (std::is_same_v<T, std::int64_t>)
          q.bind(index, x);
        else if constexpr (std::is_same_v<T, double>)
          q.bind_real(index, x);
        else
          q.bind(index, std::string_view(x));
      },
      v);
}

std::string key_condition(const Fields& key) {
  std::string sql;
  for (const auto& [c, v] : key) sql += (sql.empty() ? "" : " AND ") + quote(c) + " = ?";
  return sql;
}

}  // namespace

void SqliteVersionedRows::enable(std::string_view table) {
  session_.measure("cas.enable", [&] {
    session_.write([&](Db& db) {
      const Table t = describe(db, table);
      auto column = t.columns.find(fy::core::version_column);
      if (column == t.columns.end())
        throw Error(sqlstate::undefined_column, t.name + " has no entity_version column",
                    "add: entity_version INTEGER NOT NULL DEFAULT 1");
      std::string type = column->second.type;
      std::transform(type.begin(), type.end(), type.begin(), ::toupper);
      if ((type != "INTEGER" && type != "BIGINT") || !column->second.not_null ||
          (column->second.default_value != "1" && column->second.default_value != "'1'"))
        throw Error(sqlstate::invalid_parameter, "entity_version of " + t.name + " must be INTEGER NOT NULL DEFAULT 1");
      if (is_versioned(db, t)) return;
      db.exec(("CREATE TRIGGER " + quote("forgeyard_versioning_insert_" + t.name) + " BEFORE INSERT ON " + t.quoted +
               " WHEN NEW.entity_version IS NOT 1 BEGIN SELECT RAISE(ABORT,"
               " 'forgeyard:22023:a new row of a versioned table must start at entity_version 1'); END")
                  .c_str());
      db.exec(("CREATE TRIGGER " + quote("forgeyard_versioning_update_" + t.name) + " BEFORE UPDATE ON " + t.quoted +
               " WHEN NEW.entity_version IS NOT OLD.entity_version + 1 BEGIN SELECT RAISE(ABORT,"
               " 'forgeyard:FY002:an UPDATE must set entity_version to the expected version + 1'); END")
                  .c_str());
    });
  });
}

std::int64_t SqliteVersionedRows::update(std::string_view table, const Fields& key, std::int64_t expected,
                                         const Fields& changes) {
  return session_.measure("cas.update", [&] {
    std::int64_t version = 0;
    session_.write([&](Db& db) {
      const Table t = versioned_table(db, table);
      if (expected < 1) throw Error(sqlstate::invalid_parameter, "expected_version must be at least 1");
      check_key(t, key);
      check_changes(t, key, changes);
      std::string set_list;
      for (const auto& [c, v] : changes) set_list += quote(c) + " = ?, ";
      auto q = db.query_text("UPDATE " + t.quoted + " SET " + set_list + "entity_version = ? WHERE " +
                             key_condition(key) + " AND entity_version = ?");
      int i = 1;
      for (const auto& [c, v] : changes) bind_value(q, i++, v);
      q.bind(i++, expected + 1);
      for (const auto& [c, v] : key) bind_value(q, i++, v);
      q.bind(i++, expected);
      const int updated = q.run();
      if (updated == 1) {
        version = expected + 1;
        return;
      }
      if (updated > 1) throw Error(sqlstate::internal_error, "cas_update matched more than one row of " + t.name);
      auto read = db.query_text("SELECT entity_version FROM " + t.quoted + " WHERE " + key_condition(key));
      i = 1;
      for (const auto& [c, v] : key) bind_value(read, i++, v);
      if (!read.step()) throw Error(sqlstate::no_data_found, "no row of " + t.name + " matches the key");
      core_guarded([&] { fy::core::throw_version_conflict(t.name, expected, read.int64(0)); });
    });
    return version;
  });
}

std::optional<VersionedRow> SqliteVersionedRows::get(std::string_view table, const Fields& key,
                                                     ReadClass /*read: one file*/) {
  return session_.measure("cas.get", [&] {
    std::optional<VersionedRow> row;
    session_.read([&](Db& db) {
      const Table t = versioned_table(db, table);
      check_key(t, key);
      auto q = db.query_text("SELECT * FROM " + t.quoted + " WHERE " + key_condition(key));
      int i = 1;
      for (const auto& [c, v] : key) bind_value(q, i++, v);
      if (!q.step()) return;
      row.emplace();
      for (int c = 0; c < q.column_count(); ++c) {
        Value v;
        switch (q.column_type(c)) {
          case SQLITE_NULL:
            v = nullptr;
            break;
          case SQLITE_INTEGER:
            v = q.int64(c);
            break;
          case SQLITE_FLOAT:
            v = q.real(c);
            break;
          case SQLITE_BLOB:
            v = q.blob(c);
            break;
          default:
            v = q.text(c);
            break;
        }
        row->values[q.column_name(c)] = v;
      }
      const Value& version = row->values[fy::core::version_column];
      if (!std::holds_alternative<std::int64_t>(version))
        throw Error(ErrorKind::Corruption, sqlstate::internal_error,
                    "entity_version of " + t.name + " is not an integer");
      row->version = std::get<std::int64_t>(version);
    });
    return row;
  });
}

}  // namespace forgeyard::detail
