// VersionedRows and Idempotency over the forgeyard extension's SQL API.
#include "postgres/versioned_rows.hpp"

#include "json.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement enable_versioning_sql{"fy_enable_versioning",
                                        "SELECT forgeyard.enable_versioning($1::pg_catalog.regclass)", 1};
const PgStatement cas_update_sql{
    "fy_cas_update",
    "SELECT forgeyard.cas_update($1::pg_catalog.regclass, $2::pg_catalog.jsonb, $3, $4::pg_catalog.jsonb)", 4};
const PgStatement cas_get_sql{"fy_cas_get",
                              "SELECT g.entity_version, e.key, pg_catalog.jsonb_typeof(e.value),"
                              "       e.value OPERATOR(pg_catalog.#>>) '{}'"
                              "  FROM forgeyard.cas_get($1::pg_catalog.regclass, $2::pg_catalog.jsonb) g"
                              "  LEFT JOIN LATERAL pg_catalog.jsonb_each(g.\"row\") e ON true",
                              2};
const PgStatement idem_begin_sql{
    "fy_idem_begin",
    "SELECT status, recovery_point, response, attempt FROM forgeyard.idem_begin($1, $2, $3,"
    " $4::pg_catalog.bytea, $5::pg_catalog.interval, $6::pg_catalog.interval)",
    6};
const PgStatement idem_checkpoint_sql{"fy_idem_checkpoint", "SELECT forgeyard.idem_checkpoint($1, $2, $3, $4, $5)", 5};
const PgStatement idem_complete_sql{"fy_idem_complete",
                                    "SELECT forgeyard.idem_complete($1, $2, $3, $4::pg_catalog.bytea, $5)", 5};
const PgStatement idem_abandon_sql{"fy_idem_abandon", "SELECT forgeyard.idem_abandon($1, $2, $3, $4)", 4};
const PgStatement idem_status_sql{"fy_idem_status",
                                  "SELECT status, attempt, recovery_point, " FY_USECS("locked_until") ", " FY_USECS(
                                      "expires_at") " FROM forgeyard.idem_status($1, $2, $3)",
                                  3};
const PgStatement purge_sql{"fy_idem_purge", "SELECT forgeyard.idem_purge($1, $2)", 2};

}  // namespace

void PgVersionedRows::enable(std::string_view table) {
  session_.measure("cas.enable", [&] { session_.run(enable_versioning_sql, {text_param(table)}); });
}

std::int64_t PgVersionedRows::update(std::string_view table, const Fields& key, std::int64_t expected,
                                     const Fields& changes) {
  return session_.measure("cas.update", [&] {
    return session_.run(cas_update_sql, {text_param(table), to_json(key), std::to_string(expected), to_json(changes)})
        .int8(0, 0);
  });
}

std::optional<VersionedRow> PgVersionedRows::get(std::string_view table, const Fields& key, ReadClass read) {
  return session_.measure("cas.get", [&]() -> std::optional<VersionedRow> {
    PgResult r = session_.read(cas_get_sql, {text_param(table), to_json(key)}, read);
    if (r.rows() == 0) return std::nullopt;
    VersionedRow row;
    row.version = r.int8(0, 0);
    for (int i = 0; i < r.rows(); ++i) {
      if (r.is_null(i, 1)) continue;
      row.values[r.text(i, 1)] = value_from_json(r.text(i, 2), r.is_null(i, 3) ? "" : r.text(i, 3));
    }
    return row;
  });
}

IdempotencyBegin PgIdempotency::begin(const IdempotencyKey& key, const Bytes& request_digest, Duration lock_ttl,
                                      Duration retain) {
  return session_.measure("idem.begin", [&] {
    PgResult r = session_.run(idem_begin_sql, {key.tenant, key.scope, key.key, bytea_param(request_digest),
                                               interval_param(lock_ttl), interval_param(retain)});
    IdempotencyBegin b;
    const std::string status = r.text(0, 0);
    if (status == "replay")
      b.status = IdempotencyBegin::Status::Replay;
    else if (status != "started")
      throw Error(ErrorKind::Corruption, "XX000", "invalid idempotency status: " + status);
    if (!r.is_null(0, 1)) b.recovery_point = r.text(0, 1);
    if (!r.is_null(0, 2)) b.response = r.bytea(0, 2);
    b.attempt = r.int8(0, 3);
    return b;
  });
}

void PgIdempotency::checkpoint(const IdempotencyKey& key, std::string_view recovery_point, std::int64_t attempt) {
  session_.measure("idem.checkpoint", [&] {
    session_.run(idem_checkpoint_sql,
                 {key.tenant, key.scope, key.key, text_param(recovery_point), std::to_string(attempt)});
  });
}

void PgIdempotency::complete(const IdempotencyKey& key, const std::optional<Bytes>& response, std::int64_t attempt) {
  session_.measure("idem.complete", [&] {
    session_.run(idem_complete_sql, {key.tenant, key.scope, key.key,
                                     response ? std::optional<std::string>(bytea_param(*response)) : std::nullopt,
                                     std::to_string(attempt)});
  });
}

void PgIdempotency::abandon(const IdempotencyKey& key, std::int64_t attempt) {
  session_.measure("idem.abandon", [&] {
    session_.run(idem_abandon_sql, {key.tenant, key.scope, key.key, std::to_string(attempt)});
  });
}

std::optional<IdempotencyStatus> PgIdempotency::status(const IdempotencyKey& key, ReadClass read) {
  return session_.measure("idem.status", [&]() -> std::optional<IdempotencyStatus> {
    PgResult r = session_.read(idem_status_sql, {key.tenant, key.scope, key.key}, read);
    if (r.rows() == 0) return std::nullopt;
    IdempotencyStatus s;
    s.status = r.text(0, 0);
    s.attempt = r.int8(0, 1);
    if (!r.is_null(0, 2)) s.recovery_point = r.text(0, 2);
    s.locked_until = from_unix_usecs(r.int8(0, 3));
    s.expires_at = from_unix_usecs(r.int8(0, 4));
    return s;
  });
}

int PgIdempotency::purge(int max_keys, std::optional<std::string> tenant) {
  return session_.measure("idem.purge", [&] {
    return static_cast<int>(session_.run(purge_sql, {std::to_string(max_keys), tenant}).int8(0, 0));
  });
}

}  // namespace forgeyard::detail
