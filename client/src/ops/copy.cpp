// storage copy: every row of one store into an empty store of the other backend, value for
// value (epochs, versions, message states, idempotency responses and recovery points, audit
// chains with the same seq and hashes). Each table is described once (its columns and the kind
// of each value); each backend reads a kind into one text form and writes it back from it.
//
// The PostgreSQL side is written with plain INSERTs into the forgeyard tables inside one
// transaction, as the role that runs the copy: that must be the extension's owner or a
// superuser. Application and inspection roles have no privilege on those tables (the install
// script revokes them), so they cannot use this path (docs/operations.md#moving-between-backends).
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/core.hpp"
#include "core/topic.hpp"
#include "core/workflow.hpp"
#include "forgeyard/version.hpp"
#include "instruments.hpp"
#include "ops/ops.hpp"
#include "postgres/connection.hpp"

namespace forgeyard::detail::ops {

namespace {

namespace sqlstate = fy::core::sqlstate;

// How a value travels: its text form in between is the same for both backends.
enum class Kind {
  text,     // text
  integer,  // decimal
  real,     // shortest round-trip decimal
  boolean,  // "1" / "0"
  usecs,    // microseconds since 1970 (SQLite INTEGER, PostgreSQL timestamptz)
  bytes,    // lower-case hex (SQLite BLOB, PostgreSQL bytea)
  uuid,     // dashed text (SQLite TEXT, PostgreSQL uuid)
  uuid16,   // dashed text (SQLite 16-byte BLOB, PostgreSQL uuid)
  json,     // JSON text (SQLite TEXT, PostgreSQL jsonb)
};

struct Column {
  std::string name;
  Kind kind;
};

struct Table {
  std::string name;  // the same in both stores (PostgreSQL: in schema forgeyard, or an application table)
  std::vector<Column> columns;
  bool application = false;
};

using Row = std::vector<std::optional<std::string>>;

const std::vector<Table>& forgeyard_tables() {
  using K = Kind;
  static const std::vector<Table> tables{
      {"leases",
       {{"tenant_id", K::text},
        {"resource", K::text},
        {"owner", K::text},
        {"epoch", K::integer},
        {"acquired_at", K::usecs},
        {"expires_at", K::usecs},
        {"released_at", K::usecs},
        {"reaped_at", K::usecs}}},
      {"idempotency_keys",
       {{"tenant_id", K::text},
        {"scope", K::text},
        {"key", K::text},
        {"request_digest", K::bytes},
        {"status", K::text},
        {"attempt", K::integer},
        {"recovery_point", K::text},
        {"response", K::bytes},
        {"lock_usecs", K::integer},
        {"retain_usecs", K::integer},
        {"locked_until", K::usecs},
        {"created_at", K::usecs},
        {"completed_at", K::usecs},
        {"expires_at", K::usecs}}},
      {"queues",
       {{"tenant_id", K::text},
        {"queue", K::text},
        {"max_messages", K::integer},
        {"max_bytes", K::integer},
        {"max_payload_bytes", K::integer},
        {"visibility_usecs", K::integer},
        {"max_attempts", K::integer},
        {"backoff_base_usecs", K::integer},
        {"backoff_max_usecs", K::integer},
        {"ordering", K::text},
        {"dead_letter_payload", K::text},
        {"retain_acked_usecs", K::integer},
        {"max_dead", K::integer},
        {"dead_retention_usecs", K::integer},
        {"dedup_window_usecs", K::integer},
        {"admit_emergency", K::integer},
        {"admit_security_control", K::integer},
        {"admit_realtime", K::integer},
        {"admit_interactive", K::integer},
        {"admit_background", K::integer},
        {"admit_bulk", K::integer},
        {"notify", K::boolean},
        {"created_at", K::usecs},
        {"retry_budget", K::real},
        {"retry_budget_min", K::integer},
        {"retry_budget_window_usecs", K::integer},
        {"admission_rate", K::integer},
        {"admission_per_usecs", K::integer},
        {"max_in_flight_per_key", K::integer},
        {"fairness", K::boolean},
        {"aging_usecs", K::integer}}},
      {"messages",
       {{"msg_id", K::integer},   {"tenant_id", K::text},      {"queue", K::text},        {"state", K::text},
        {"priority", K::integer}, {"partition_key", K::text},  {"is_head", K::boolean},   {"event_id", K::uuid},
        {"payload", K::bytes},    {"bytes", K::integer},       {"enqueued_at", K::usecs}, {"visible_at", K::usecs},
        {"attempt", K::integer},  {"claim_token", K::integer}, {"claimed_by", K::text},   {"last_error", K::text},
        {"error_class", K::text}, {"finished_at", K::usecs},   {"fairness_key", K::text}, {"resource", K::text},
        {"pass", K::integer}}},
      // Fair queues' keys: weights and last passes (the passes of the messages copied with them).
      {"queue_fair_keys",
       {{"tenant_id", K::text},
        {"queue", K::text},
        {"fairness_key", K::text},
        {"weight", K::integer},
        {"last_pass", K::integer}}},
      // Resources and what each allows (their shared state starts afresh on the target).
      {"flow_resources",
       {{"tenant_id", K::text},
        {"resource", K::text},
        {"rate", K::integer},
        {"per_usecs", K::integer},
        {"burst", K::integer},
        {"max_in_flight", K::integer},
        {"failure_rate", K::real},
        {"minimum_calls", K::integer},
        {"window_calls", K::integer},
        {"open_for_usecs", K::integer},
        {"half_open_calls", K::integer},
        {"updated_at", K::usecs}}},
      // Topics: event types, topics, subscriptions (a subscription is also the queue of its name,
      // copied above) and the published events that subscription messages refer to by event_id.
      {"event_types",
       {{"tenant_id", K::text},
        {"event_type", K::text},
        {"version", K::integer},
        {"retention_class", K::text},
        {"registered_at", K::usecs}}},
      {"topics",
       {{"tenant_id", K::text},
        {"topic", K::text},
        {"max_subscriptions", K::integer},
        {"retention_usecs", K::integer},
        {"dedup_window_usecs", K::integer},
        {"created_at", K::usecs}}},
      // event_types: PostgreSQL's column, {"type": {"min": v, "max": v}} (bounds left out stay
      // out); SQLite keeps a flag and one subscription_event_types row per type
      // (subscriptions_sqlite_select, subscriptions_sqlite_insert).
      {"subscriptions",
       {{"tenant_id", K::text},
        {"subscription", K::text},
        {"topic", K::text},
        {"on_full", K::text},
        {"created_at", K::usecs},
        {"event_types", K::json}}},
      {"topic_events",
       {{"tenant_id", K::text},
        {"topic", K::text},
        {"event_seq", K::integer},
        {"event_id", K::uuid},
        {"event_type", K::text},
        {"version", K::integer},
        {"partition_key", K::text},
        {"priority", K::integer},
        {"payload", K::bytes},
        {"payload_digest", K::text},
        {"published_at", K::usecs}}},
      {"queue_events",
       {{"tenant_id", K::text},
        {"queue", K::text},
        {"event_id", K::uuid},
        {"msg_id", K::integer},
        {"payload_digest", K::text},
        {"expires_at", K::usecs}}},
      {"queue_partitions",
       {{"tenant_id", K::text},
        {"queue", K::text},
        {"partition_key", K::text},
        {"pending", K::integer},
        {"heads", K::integer}}},
      {"inbox", {{"tenant_id", K::text}, {"consumer", K::text}, {"event_id", K::uuid}, {"accepted_at", K::usecs}}},
      {"audit_events",
       {{"tenant_id", K::text},
        {"seq", K::integer},
        {"event_id", K::uuid16},
        {"occurred_at", K::usecs},
        {"recorded_at", K::usecs},
        {"actor", K::text},
        {"action", K::text},
        {"resource", K::text},
        {"details", K::json},
        {"payload_digest", K::bytes},
        {"payload_ref", K::text},
        {"prev_hash", K::bytes},
        {"hash", K::bytes}}},
      {"audit_heads", {{"tenant_id", K::text}, {"seq", K::integer}, {"hash", K::bytes}}},
      {"wf_runs",
       {{"tenant_id", K::text},
        {"run_id", K::uuid},
        {"run_key", K::text},
        {"workflow", K::text},
        {"version", K::integer},
        {"input", K::json},
        {"state", K::text},
        {"priority", K::integer},
        {"msg_id", K::integer},
        {"epoch", K::integer},
        {"owner", K::text},
        {"step_deadline", K::usecs},
        {"result", K::json},
        {"error", K::text},
        {"deadline", K::usecs},
        {"parent_run_id", K::uuid},
        {"waiting_signal", K::text},
        {"wait_until", K::usecs},
        {"wait_position", K::integer},
        {"compensate_to", K::text},
        {"retention_usecs", K::integer},
        {"purge_at", K::usecs},
        {"takeovers", K::integer},
        {"taken_over_at", K::usecs},
        {"previous_owner", K::text},
        {"created_at", K::usecs},
        {"updated_at", K::usecs},
        {"finished_at", K::usecs}}},
      {"wf_journal",
       {{"tenant_id", K::text},
        {"run_id", K::uuid},
        {"position", K::integer},
        {"step", K::text},
        {"status", K::text},
        {"result", K::json},
        {"error", K::text},
        {"compensation", K::text},
        {"compensation_status", K::text},
        {"compensation_error", K::text},
        {"compensation_attempts", K::integer},
        {"compensated_at", K::usecs},
        {"wake_at", K::usecs},
        {"attempts", K::integer},
        {"epoch", K::integer},
        {"recorded_at", K::usecs}}},
      {"wf_signals",
       {{"tenant_id", K::text},
        {"run_id", K::uuid},
        {"signal_id", K::uuid},
        {"name", K::text},
        {"payload", K::json},
        {"sent_at", K::usecs},
        {"consumed_at", K::usecs},
        {"consumed_position", K::integer}}},
      {"wf_schedules",
       {{"tenant_id", K::text},
        {"schedule", K::text},
        {"workflow", K::text},
        {"version", K::integer},
        {"spec", K::text},
        {"timezone", K::text},
        {"catch_up", K::integer},
        {"input", K::json},
        {"next_fire", K::usecs},
        {"last_fire", K::usecs},
        {"fires", K::integer},
        {"skipped", K::integer},
        {"created_at", K::usecs},
        {"updated_at", K::usecs}}},
  };
  return tables;
}

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter, "storage copy refused before writing: " + why);
}

std::string dashed(std::string_view hex32) {
  std::string h(hex32);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

std::string undashed(const std::string& uuid) {
  std::string h;
  for (char c : uuid)
    if (c != '-') h += c;
  return h;
}

// ---- SQLite ----------------------------------------------------------------------------

class SqliteSide {
 public:
  explicit SqliteSide(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) fail("cannot open " + path);
    sqlite3_busy_timeout(db_, 10000);
  }
  ~SqliteSide() { sqlite3_close_v2(db_); }
  SqliteSide(const SqliteSide&) = delete;
  SqliteSide& operator=(const SqliteSide&) = delete;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::Unavailable, sqlstate::io_error, what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const std::string& sql) const {
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }
  std::vector<Row> rows(const std::string& sql, const std::vector<Kind>& kinds) const {
    sqlite3_stmt* stmt = prepare(sql);
    std::vector<Row> out;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      Row row;
      for (std::size_t i = 0; i < kinds.size(); ++i) row.push_back(read(stmt, static_cast<int>(i), kinds[i]));
      out.push_back(std::move(row));
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) fail(sql);
    return out;
  }
  void insert(const std::string& sql, const std::vector<Kind>& kinds, const Row& row) const {
    sqlite3_stmt* stmt = prepare(sql);
    for (std::size_t i = 0; i < kinds.size(); ++i) bind(stmt, static_cast<int>(i) + 1, kinds[i], row[i]);
    const int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) fail(sql);
  }
  std::int64_t scalar(const std::string& sql) const {
    const auto r = rows(sql, {Kind::integer});
    return r.empty() || !r[0][0] ? 0 : std::stoll(*r[0][0]);
  }

 private:
  sqlite3_stmt* prepare(const std::string& sql) const {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) fail(sql);
    return stmt;
  }
  static std::optional<std::string> read(sqlite3_stmt* stmt, int i, Kind kind) {
    if (sqlite3_column_type(stmt, i) == SQLITE_NULL) return std::nullopt;
    switch (kind) {
      case Kind::integer:
      case Kind::usecs:
      case Kind::boolean:
        return std::to_string(sqlite3_column_int64(stmt, i));
      case Kind::real: {
        char buf[64];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, sqlite3_column_double(stmt, i));
        return std::string(buf, end);
      }
      case Kind::bytes:
      case Kind::uuid16: {
        const void* blob = sqlite3_column_blob(stmt, i);
        const std::string bytes(static_cast<const char*>(blob),
                                static_cast<std::size_t>(sqlite3_column_bytes(stmt, i)));
        const std::string hex = fy::core::to_hex(bytes);
        return kind == Kind::uuid16 ? dashed(hex) : hex;
      }
      case Kind::text:
      case Kind::uuid:
      case Kind::json:
        return std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, i)),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt, i)));
    }
    return std::nullopt;
  }
  void bind(sqlite3_stmt* stmt, int i, Kind kind, const std::optional<std::string>& v) const {
    int rc;
    if (!v) {
      rc = sqlite3_bind_null(stmt, i);
    } else {
      switch (kind) {
        case Kind::integer:
        case Kind::usecs:
        case Kind::boolean:
          rc = sqlite3_bind_int64(stmt, i, std::stoll(*v));
          break;
        case Kind::real:
          rc = sqlite3_bind_double(stmt, i, std::stod(*v));
          break;
        case Kind::bytes:
        case Kind::uuid16: {
          const auto bytes = fy::core::from_hex(kind == Kind::uuid16 ? undashed(*v) : *v);
          if (!bytes) fail("not hex: " + *v);
          rc = sqlite3_bind_blob(stmt, i, bytes->data(), static_cast<int>(bytes->size()), SQLITE_TRANSIENT);
          break;
        }
        case Kind::json: {
          // The shim stores JSON canonical (an audit event's details are hashed as stored);
          // PostgreSQL's jsonb prints it with spaces, so the text is canonicalized on the way in.
          const std::string canonical = fy::core::workflow::canonical(*v, "a copied JSON value");
          rc = sqlite3_bind_text(stmt, i, canonical.data(), static_cast<int>(canonical.size()), SQLITE_TRANSIENT);
          break;
        }
        default:
          rc = sqlite3_bind_text(stmt, i, v->data(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
      }
    }
    if (rc != SQLITE_OK) fail("bind");
  }
  sqlite3* db_ = nullptr;
};

// The subscription row (filtered when it has event types), then its types.
void subscriptions_sqlite_insert(const SqliteSide& db, const Row& row) {
  db.insert(
      "INSERT INTO subscriptions (tenant_id, subscription, topic, on_full, created_at, filtered)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6 IS NOT NULL)",
      {Kind::text, Kind::text, Kind::text, Kind::text, Kind::usecs, Kind::json}, row);
  db.insert(
      "INSERT INTO subscription_event_types (tenant_id, subscription, event_type, min_version, max_version)"
      " SELECT ?1, ?2, e.key, coalesce(json_extract(e.value, '$.min'), 1), coalesce(json_extract(e.value, '$.max'), " +
          std::to_string(fy::core::max_event_version) + ") FROM json_each(?6) e",
      {Kind::text, Kind::text, Kind::text, Kind::text, Kind::usecs, Kind::json}, row);
}

// A subscription's filter between SQLite's rows and PostgreSQL's event_types object: a bound at its
// default (1, the highest version) is left out, as subscribe leaves out a bound it was not given.
const std::string& subscriptions_sqlite_select() {
  static const std::string sql =
      "SELECT s.tenant_id, s.subscription, s.topic, s.on_full, s.created_at,"
      " CASE WHEN s.filtered THEN (SELECT json_group_object(f.event_type, json_patch("
      "   CASE WHEN f.min_version = 1 THEN '{}' ELSE json_object('min', f.min_version) END,"
      "   CASE WHEN f.max_version = " +
      std::to_string(fy::core::max_event_version) +
      " THEN '{}' ELSE json_object('max', f.max_version) END))"
      "   FROM subscription_event_types f WHERE f.tenant_id = s.tenant_id AND f.subscription = s.subscription) END"
      " FROM subscriptions s";
  return sql;
}

std::string sqlite_select(const Table& t) {
  if (t.name == "subscriptions") return subscriptions_sqlite_select();
  std::string cols;
  for (const auto& c : t.columns) cols += (cols.empty() ? "" : ", ") + quote_ident(c.name);
  return "SELECT " + cols + " FROM " + quote_ident(t.name);
}

std::string sqlite_insert(const Table& t) {
  std::string cols, params;
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    cols += (i ? ", " : "") + quote_ident(t.columns[i].name);
    params += (i ? ", ?" : "?") + std::to_string(i + 1);
  }
  return "INSERT INTO " + quote_ident(t.name) + " (" + cols + ") VALUES (" + params + ")";
}

// ---- PostgreSQL --------------------------------------------------------------------------

std::string pg_name(const Table& t) {
  return t.application ? quote_ident(t.name) : "forgeyard." + quote_ident(t.name);
}

std::string pg_select(const Table& t) {
  std::string cols;
  for (const auto& c : t.columns) {
    const std::string n = quote_ident(c.name);
    std::string e;
    switch (c.kind) {
      case Kind::usecs:
        e = "(EXTRACT(epoch FROM " + n + ") * 1000000)::pg_catalog.int8::pg_catalog.text";
        break;
      case Kind::bytes:
        e = "pg_catalog.encode(" + n + ", 'hex')";
        break;
      case Kind::boolean:
        e = "CASE WHEN " + n + " THEN '1' ELSE '0' END";
        break;
      case Kind::real:
        e = n + "::pg_catalog.float8::pg_catalog.text";  // shortest exact form (PostgreSQL 12+)
        break;
      default:
        e = n + "::pg_catalog.text";
    }
    cols += (cols.empty() ? "" : ", ") + e;
  }
  return "SELECT " + cols + " FROM " + pg_name(t);
}

std::string pg_insert(const Table& t, const std::string& extra_cols = {}, const std::string& extra_values = {}) {
  std::string cols, values;
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    const std::string p = "$" + std::to_string(i + 1);
    std::string v;
    switch (t.columns[i].kind) {
      case Kind::usecs:
        v = "'1970-01-01 00:00:00+00'::pg_catalog.timestamptz OPERATOR(pg_catalog.+) (" + p +
            "::pg_catalog.int8 OPERATOR(pg_catalog.*) '1 microsecond'::pg_catalog.interval)";
        break;
      case Kind::bytes:
        v = "pg_catalog.decode(" + p + ", 'hex')";
        break;
      case Kind::boolean:
        v = "(" + p + " OPERATOR(pg_catalog.=) '1')";
        break;
      case Kind::uuid:
      case Kind::uuid16:
        v = p + "::pg_catalog.uuid";
        break;
      case Kind::json:
        v = p + "::pg_catalog.jsonb";
        break;
      default:
        v = p;
    }
    cols += (i ? ", " : "") + quote_ident(t.columns[i].name);
    values += (i ? ", " : "") + v;
  }
  return "INSERT INTO " + pg_name(t) + " (" + cols + extra_cols + ") VALUES (" + values + extra_values + ")";
}

std::vector<Row> pg_rows(PgConnection& conn, const std::string& sql, std::size_t columns) {
  const PgStatement s{"", sql.c_str(), 0};
  PgResult r = conn.exec(s, {});
  std::vector<Row> out;
  for (int i = 0; i < r.rows(); ++i) {
    Row row;
    for (std::size_t c = 0; c < columns; ++c)
      row.push_back(r.is_null(i, static_cast<int>(c)) ? std::nullopt
                                                      : std::optional<std::string>(r.text(i, static_cast<int>(c))));
    out.push_back(std::move(row));
  }
  return out;
}

void pg_run(PgConnection& conn, const std::string& sql, const PgParams& params = {}) {
  const PgStatement s{"", sql.c_str(), static_cast<int>(params.size())};
  conn.exec(s, params);
}

std::int64_t pg_scalar(PgConnection& conn, const std::string& sql) {
  const auto r = pg_rows(conn, sql, 1);
  return r.empty() || !r[0][0] ? 0 : std::stoll(*r[0][0]);
}

// ---- application tables --------------------------------------------------------------------

struct AppColumn {
  std::string name;
  Kind kind;
  bool not_null;
  int pk;  // position in the primary key, 0 if not in it
};

struct AppTable {
  std::string name;
  std::vector<AppColumn> columns;
  Table as_table() const {
    Table t{name, {}, true};
    for (const auto& c : columns) t.columns.push_back({c.name, c.kind});
    return t;
  }
};

Kind sqlite_app_kind(const std::string& table, const std::string& column, std::string type) {
  for (auto& ch : type) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (type == "INTEGER" || type == "INT" || type == "BIGINT") return Kind::integer;
  if (type == "TEXT") return Kind::text;
  if (type == "REAL" || type == "DOUBLE") return Kind::real;
  if (type == "BLOB") return Kind::bytes;
  refuse("column " + column + " of table " + table + " has type \"" + type +
         "\", which has no PostgreSQL type here (INTEGER, TEXT, REAL and BLOB do)");
}

Kind pg_app_kind(const std::string& table, const std::string& column, const std::string& type) {
  if (type == "bigint" || type == "integer" || type == "smallint") return Kind::integer;
  if (type == "text" || type.starts_with("character varying")) return Kind::text;
  if (type == "double precision" || type == "real") return Kind::real;
  if (type == "bytea") return Kind::bytes;
  refuse(
      "column " + column + " of table " + table + " has type " + type +
      ", which has no SQLite type here (bigint, integer, smallint, text, varchar, double precision, real and bytea do)");
}

std::string pg_type(Kind k) {
  switch (k) {
    case Kind::integer:
      return "bigint";
    case Kind::real:
      return "double precision";
    case Kind::bytes:
      return "bytea";
    default:
      return "text";
  }
}

std::string sqlite_type(Kind k) {
  switch (k) {
    case Kind::integer:
      return "INTEGER";
    case Kind::real:
      return "REAL";
    case Kind::bytes:
      return "BLOB";
    default:
      return "TEXT";
  }
}

std::string create_table_sql(const AppTable& t, bool postgres) {
  std::string sql = "CREATE TABLE " + quote_ident(t.name) + " (";
  std::vector<std::pair<int, std::string>> pk;
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    const auto& c = t.columns[i];
    sql += (i ? ", " : "") + quote_ident(c.name) + " " + (postgres ? pg_type(c.kind) : sqlite_type(c.kind)) +
           (c.not_null || c.pk > 0 ? " NOT NULL" : "") + (c.name == "entity_version" ? " DEFAULT 1" : "");
    if (c.pk > 0) pk.emplace_back(c.pk, c.name);
  }
  std::sort(pk.begin(), pk.end());
  if (!pk.empty()) {
    sql += ", PRIMARY KEY (";
    for (std::size_t i = 0; i < pk.size(); ++i) sql += (i ? ", " : "") + quote_ident(pk[i].second);
    sql += ")";
  }
  return sql + ")";
}

std::vector<AppTable> sqlite_app_tables(const SqliteSide& db) {
  std::vector<AppTable> out;
  const auto names = db.rows(
      "SELECT tbl_name FROM sqlite_schema WHERE type = 'trigger' AND name = 'forgeyard_versioning_update_' || tbl_name"
      " ORDER BY tbl_name",
      {Kind::text});
  for (const auto& n : names) {
    AppTable t{*n[0], {}};
    for (const auto& c :
         db.rows("SELECT name, type, \"notnull\", pk FROM pragma_table_info(" + std::string("'") + t.name + "')",
                 {Kind::text, Kind::text, Kind::integer, Kind::integer}))
      t.columns.push_back({*c[0], sqlite_app_kind(t.name, *c[0], c[1].value_or("")), *c[2] != "0", std::stoi(*c[3])});
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<AppTable> pg_app_tables(PgConnection& conn) {
  std::vector<AppTable> out;
  const auto rels = pg_rows(conn,
                            "SELECT c.oid::pg_catalog.text, c.relname, n.nspname FROM pg_catalog.pg_trigger g"
                            " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) g.tgrelid"
                            " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
                            " WHERE g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning' ORDER BY c.relname",
                            3);
  for (const auto& r : rels) {
    if (*r[2] != "public") refuse("versioned table " + *r[2] + "." + *r[1] + " is not in schema public");
    AppTable t{*r[1], {}};
    const auto cols = pg_rows(
        conn,
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN '1' ELSE '0' END,"
        " coalesce((SELECT k.n FROM pg_catalog.pg_index i, pg_catalog.unnest(i.indkey) WITH ORDINALITY k(att, n)"
        "  WHERE i.indrelid OPERATOR(pg_catalog.=) a.attrelid AND i.indisprimary AND k.att OPERATOR(pg_catalog.=) a.attnum), 0)"
        " FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) " +
            *r[0] + "::pg_catalog.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        4);
    for (const auto& c : cols)
      t.columns.push_back({*c[0], pg_app_kind(t.name, *c[0], *c[1]), *c[2] == "1", std::stoi(*c[3])});
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<std::string> sqlite_path_of(const std::string& url) {
  if (url.starts_with("sqlite://") && url.size() > 9 && url[9] == '/') return url.substr(9);
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) return std::nullopt;
  refuse("storage copy needs sqlite:///path or postgresql://... on each side, not " + redact(url));
}

void require_empty_pg(PgConnection& conn, const std::string& url) {
  const std::string installed = pg_installed_version(conn);
  if (installed.empty()) refuse("forgeyard is not installed in " + redact(url) + " (forgeyard storage install)");
  if (installed != std::string(version()))
    refuse("the target's forgeyard is " + installed + ", this forgeyard is " + std::string(version()) +
           " (forgeyard storage install, or ALTER EXTENSION forgeyard UPDATE)");
  const auto used = pg_rows(conn,
                            "SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_catalog.pg_class c"
                            " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
                            " WHERE c.relkind IN ('r', 'p')"
                            "   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'forgeyard', 'forgeyard_pl')"
                            " AND n.nspname NOT LIKE 'pg\\_%' LIMIT 5",
                            1);
  if (!used.empty()) refuse("the target is not empty: it has table " + *used[0][0]);
  for (const auto& t : forgeyard_tables())
    if (!pg_rows(conn, "SELECT 1 FROM forgeyard." + quote_ident(t.name) + " LIMIT 1", 1).empty())
      refuse("the target is not empty: forgeyard." + t.name + " has rows");
}

void require_empty_sqlite(const SqliteSide& db, const std::string& path) {
  const auto tables =
      db.rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", {Kind::text});
  const auto ours = sqlite_forgeyard_tables();
  for (const auto& t : tables) {
    const std::string& name = *t[0];
    if (!ours.contains(name)) refuse("the target " + path + " is not empty: it has table " + name);
    if (std::find(data_tables().begin(), data_tables().end(), name) == data_tables().end()) continue;
    if (!db.rows("SELECT 1 FROM " + quote_ident(name) + " LIMIT 1", {Kind::integer}).empty())
      refuse("the target " + path + " is not empty: " + name + " has rows");
  }
}

std::vector<Kind> kinds_of(const Table& t) {
  std::vector<Kind> k;
  for (const auto& c : t.columns) k.push_back(c.kind);
  return k;
}

CopyResult sqlite_to_postgres(const std::string& from, const std::string& to, const ProgressFn& progress) {
  // Both ends open and checked before anything is written.
  open("sqlite://" + from).reset();  // brings the source's schema to this version first
  SqliteSide src(from);
  PgConnection dst(to, false);
  require_empty_pg(dst, to);
  src.exec("PRAGMA query_only = 1");  // the source is only read
  src.exec("BEGIN");                  // one read snapshot: writers of the source go on meanwhile
  const auto apps = sqlite_app_tables(src);
  CopyResult result;
  dst.command("BEGIN");
  try {
    for (const auto& t : forgeyard_tables()) {
      const auto rows = src.rows(sqlite_select(t), kinds_of(t));
      std::string sql;
      if (t.name == "queues")
        sql = pg_insert(t, ", slots", ", 1");
      else if (t.name == "messages")
        sql = pg_insert(t, ", slot", ", 0");
      else
        sql = pg_insert(t);
      for (const auto& row : rows) {
        PgParams params(row.begin(), row.end());
        pg_run(dst, sql, params);
      }
      result.rows[t.name] = static_cast<std::int64_t>(rows.size());
      if (progress && !rows.empty()) progress("copied " + std::to_string(rows.size()) + " rows of " + t.name);
    }
    // One capacity slot per queue holding what the SQLite counters hold; nothing released yet.
    for (const auto& q : src.rows("SELECT tenant_id, queue, used_messages, used_bytes FROM queues",
                                  {Kind::text, Kind::text, Kind::integer, Kind::integer})) {
      pg_run(dst,
             "INSERT INTO forgeyard.queue_slots (tenant_id, queue, slot, admitted_messages, admitted_bytes)"
             " VALUES ($1, $2, 0, $3, $4)",
             {q[0], q[1], q[2], q[3]});
      pg_run(dst, "INSERT INTO forgeyard.queue_releases (tenant_id, queue, slot) VALUES ($1, $2, 0)", {q[0], q[1]});
    }
    // An admission limit is one full bucket (the copied queues have one capacity slot); each
    // resource starts with a full bucket, nothing in flight and a closed breaker.
    pg_run(dst,
           "INSERT INTO forgeyard.queue_admission (tenant_id, queue, slot, tokens, per_usecs)"
           " SELECT tenant_id, queue, 0, admission_rate, admission_per_usecs FROM forgeyard.queues"
           " WHERE admission_rate IS NOT NULL",
           {});
    pg_run(dst,
           "INSERT INTO forgeyard.flow_resource_state (tenant_id, resource, changed_at)"
           " SELECT tenant_id, resource, updated_at FROM forgeyard.flow_resources",
           {});
    // The counters: nothing issued in the source is issued again by the target.
    const std::int64_t last_msg = std::max(src.scalar("SELECT max(msg_id) FROM messages"),
                                           src.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'messages'"));
    const std::int64_t last_token =
        std::max(src.scalar("SELECT last FROM claim_tokens"), src.scalar("SELECT max(claim_token) FROM messages"));
    const std::int64_t last_attempt = std::max(src.scalar("SELECT last FROM idempotency_attempts"),
                                               src.scalar("SELECT max(attempt) FROM idempotency_keys"));
    const std::int64_t last_event = std::max(src.scalar("SELECT max(event_seq) FROM topic_events"),
                                             src.scalar("SELECT seq FROM sqlite_sequence WHERE name = 'topic_events'"));
    for (const auto& [sequence, last] :
         std::vector<std::pair<std::string, std::int64_t>>{{"forgeyard.message_ids", last_msg},
                                                           {"forgeyard.claim_tokens", last_token},
                                                           {"forgeyard.idempotency_attempts", last_attempt},
                                                           {"forgeyard.topic_event_seqs", last_event}})
      if (last > 0)
        pg_run(dst,
               "SELECT pg_catalog.setval($1::pg_catalog.regclass, GREATEST($2::pg_catalog.int8,"
               " (SELECT last_value FROM " +
                   sequence + ")))",
               {sequence, std::to_string(last)});
    for (const auto& app : apps) {
      pg_run(dst, create_table_sql(app, true));
      const Table t = app.as_table();
      const auto rows = src.rows(sqlite_select(t), kinds_of(t));
      const std::string sql = pg_insert(t);
      for (const auto& row : rows) pg_run(dst, sql, PgParams(row.begin(), row.end()));
      pg_run(dst, "SELECT forgeyard.enable_versioning($1::pg_catalog.regclass)", {quote_ident(app.name)});
      result.rows[app.name] = static_cast<std::int64_t>(rows.size());
      result.application_tables.push_back(app.name);
    }
    dst.commit();
  } catch (...) {
    if (!dst.reusable()) {
      try {
        dst.command("ROLLBACK");
      } catch (const Error&) {
      }
    }
    throw;
  }
  src.exec("COMMIT");
  return result;
}

CopyResult postgres_to_sqlite(const std::string& from, const std::string& to, const ProgressFn& progress) {
  PgConnection src(from, false);
  if (pg_installed_version(src) != std::string(version()))
    refuse("the source needs forgeyard " + std::string(version()) + " (either edition)");
  src.command("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
  // The counts' tables locked before the transaction's snapshot is taken (LOCK TABLE takes none):
  // maintain() cannot truncate a segment of them until the copy ends. TRUNCATE is not MVCC safe,
  // and a slot row older than a fold would otherwise be read without the folded admission row.
  src.command("LOCK TABLE forgeyard.queue_release_deltas, forgeyard.queue_admit_deltas IN ACCESS SHARE MODE");
  const auto apps = pg_app_tables(src);
  open("sqlite://" + to).reset();  // creates the target file and its schema
  SqliteSide dst(to);
  require_empty_sqlite(dst, to);
  for (const auto& app : apps)
    if (!dst.rows("SELECT 1 FROM sqlite_schema WHERE name = '" + app.name + "'", {Kind::integer}).empty())
      refuse("the target already has a table " + app.name);
  CopyResult result;
  dst.exec("BEGIN IMMEDIATE");
  try {
    for (const auto& t : forgeyard_tables()) {
      const auto rows = pg_rows(src, pg_select(t), t.columns.size());
      const std::string sql = sqlite_insert(t);
      const auto kinds = kinds_of(t);
      for (const auto& row : rows)
        if (t.name == "subscriptions")
          subscriptions_sqlite_insert(dst, row);
        else
          dst.insert(sql, kinds, row);
      result.rows[t.name] = static_cast<std::int64_t>(rows.size());
      if (progress && !rows.empty()) progress("copied " + std::to_string(rows.size()) + " rows of " + t.name);
    }
    for (
        const auto& q : pg_rows(
            src,
            "SELECT q.tenant_id, q.queue,"
            " (coalesce((SELECT sum(admitted_messages) FROM forgeyard.queue_slots s WHERE s.tenant_id = q.tenant_id AND s.queue = q.queue), 0)"
            " + coalesce((SELECT sum(g.admitted_messages) FROM forgeyard.queue_admit_deltas g JOIN forgeyard.queue_slots s ON s.tenant_id = g.tenant_id AND s.queue = g.queue AND s.slot = g.slot AND s.admit_gen = g.gen WHERE g.tenant_id = q.tenant_id AND g.queue = q.queue), 0)"
            " - coalesce((SELECT sum(released_messages) FROM forgeyard.queue_releases r WHERE r.tenant_id = q.tenant_id AND r.queue = q.queue), 0)"
            " - coalesce((SELECT sum(released_messages) FROM forgeyard.queue_release_deltas d WHERE d.tenant_id = q.tenant_id AND d.queue = q.queue), 0))::pg_catalog.text,"
            " (coalesce((SELECT sum(admitted_bytes) FROM forgeyard.queue_slots s WHERE s.tenant_id = q.tenant_id AND s.queue = q.queue), 0)"
            " + coalesce((SELECT sum(g.admitted_bytes) FROM forgeyard.queue_admit_deltas g JOIN forgeyard.queue_slots s ON s.tenant_id = g.tenant_id AND s.queue = g.queue AND s.slot = g.slot AND s.admit_gen = g.gen WHERE g.tenant_id = q.tenant_id AND g.queue = q.queue), 0)"
            " - coalesce((SELECT sum(released_bytes) FROM forgeyard.queue_releases r WHERE r.tenant_id = q.tenant_id AND r.queue = q.queue), 0)"
            " - coalesce((SELECT sum(released_bytes) FROM forgeyard.queue_release_deltas d WHERE d.tenant_id = q.tenant_id AND d.queue = q.queue), 0))::pg_catalog.text"
            " FROM forgeyard.queues q",
            4))
      dst.insert(
          "UPDATE queues SET used_messages = ?3, used_bytes = ?4, admitted_total = ?3 WHERE tenant_id = ?1 AND queue = ?2",
          {Kind::text, Kind::text, Kind::integer, Kind::integer}, q);
    dst.exec(
        "INSERT INTO flow_resource_state (tenant_id, resource, changed_at)"
        " SELECT tenant_id, resource, updated_at FROM flow_resources");
    auto last = [&](const char* sequence) {
      return pg_scalar(src, std::string("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ") + sequence);
    };
    const std::int64_t last_msg =
        std::max(last("forgeyard.message_ids"), pg_scalar(src, "SELECT max(msg_id) FROM forgeyard.messages"));
    const std::int64_t last_event = std::max(last("forgeyard.topic_event_seqs"),
                                             pg_scalar(src, "SELECT max(event_seq) FROM forgeyard.topic_events"));
    for (const auto& [table, last_id] :
         std::vector<std::pair<std::string, std::int64_t>>{{"messages", last_msg}, {"topic_events", last_event}}) {
      dst.insert("DELETE FROM sqlite_sequence WHERE name = ?1", {Kind::text}, {table});
      if (last_id > 0)
        dst.insert("INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)", {Kind::text, Kind::integer},
                   {table, std::to_string(last_id)});
    }
    dst.insert("UPDATE claim_tokens SET last = max(last, ?1)", {Kind::integer},
               {std::to_string(last("forgeyard.claim_tokens"))});
    dst.insert("UPDATE idempotency_attempts SET last = max(last, ?1)", {Kind::integer},
               {std::to_string(last("forgeyard.idempotency_attempts"))});
    for (const auto& app : apps) {
      dst.exec(create_table_sql(app, false));
      const Table t = app.as_table();
      const auto rows = pg_rows(src, pg_select(t), t.columns.size());
      const std::string sql = sqlite_insert(t);
      const auto kinds = kinds_of(t);
      for (const auto& row : rows) dst.insert(sql, kinds, row);
      result.rows[app.name] = static_cast<std::int64_t>(rows.size());
      result.application_tables.push_back(app.name);
    }
    dst.exec("COMMIT");
  } catch (...) {
    try {
      dst.exec("ROLLBACK");
    } catch (const Error&) {
    }
    throw;
  }
  src.command("COMMIT");
  // Versioning of the copied application tables, through the shim's own triggers.
  auto store = open("sqlite://" + to);
  for (const auto& app : apps) store->versioned_rows().enable(app.name);
  return result;
}

}  // namespace

CopyResult copy_between(const std::string& from, const std::string& to, const ProgressFn& progress) {
  const auto from_sqlite = sqlite_path_of(from);
  const auto to_sqlite = sqlite_path_of(to);
  if (from_sqlite.has_value() == to_sqlite.has_value())
    refuse("storage copy moves between backends (SQLite and PostgreSQL); within one, use backup and restore");
  CopyResult result =
      from_sqlite ? sqlite_to_postgres(*from_sqlite, to, progress) : postgres_to_sqlite(from, *to_sqlite, progress);
  auto target = open(to);
  result.reconciled = reconcile_restored(*target);
  target.reset();
  result.verify = verify_store(to, true);
  return result;
}

}  // namespace forgeyard::detail::ops
