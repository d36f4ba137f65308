// Idempotency keys in the SQLite store: the extension's rules, decided by the same core code.
// BEGIN IMMEDIATE serializes writers, so a concurrent duplicate waits for the first to commit.
#include "core/core.hpp"
#include "error_map.hpp"
#include "sqlite/versioned_rows.hpp"

namespace forgeyard::detail {

namespace {

struct Stored {
  fy::core::IdempotencyRow row;
  std::optional<std::string> recovery_point;
  std::optional<std::string> response;
  std::int64_t lock_usecs = 0;
  std::int64_t retain_usecs = 0;
};

void check_key(const IdempotencyKey& key) {
  fy::core::check_name("tenant", true, key.tenant, fy::core::max_tenant_bytes);
  fy::core::check_name("scope", true, key.scope, fy::core::max_scope_bytes);
  fy::core::check_name("key", true, key.key, fy::core::max_idempotency_key_bytes);
}

std::optional<Stored> read_key(Db& db, const IdempotencyKey& key) {
  auto q = db.query(
      "SELECT request_digest, status = 'completed', attempt, locked_until, expires_at, recovery_point, response,"
      "       lock_usecs, retain_usecs"
      "  FROM idempotency_keys WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3");
  q.bind(1, key.tenant).bind(2, key.scope).bind(3, key.key);
  if (!q.step()) return std::nullopt;
  return Stored{{q.blob(0), q.int64(1) != 0, q.int64(2), q.int64(3), q.int64(4)},
                q.is_null(5) ? std::nullopt : std::optional<std::string>(q.text(5)),
                q.is_null(6) ? std::nullopt : std::optional<std::string>(q.blob(6)),
                q.int64(7),
                q.int64(8)};
}

Stored require_key(Db& db, const IdempotencyKey& key) {
  std::optional<Stored> stored = read_key(db, key);
  if (!stored) fy::core::throw_unknown_key(key.scope, key.key);
  return *stored;
}

}  // namespace

IdempotencyBegin SqliteIdempotency::begin(const IdempotencyKey& key, const Bytes& request_digest, Duration lock_ttl,
                                          Duration retain) {
  return session_.measure("idem.begin", [&] {
    return core_guarded([&] {
      check_key(key);
      if (request_digest.empty()) throw Error(sqlstate::invalid_parameter, "request_digest must not be empty");
      if (request_digest.size() > fy::core::max_request_digest_bytes)
        throw Error(sqlstate::string_too_long,
                    "request_digest is longer than " + std::to_string(fy::core::max_request_digest_bytes) + " bytes");
      const std::int64_t lock =
          fy::core::check_duration("lock_ttl", {0, 0, lock_ttl.count()}, fy::core::max_idempotency_lock_usecs);
      const std::int64_t keep =
          fy::core::check_duration("retain", {0, 0, retain.count()}, fy::core::max_idempotency_retention_usecs);
      if (keep < lock) throw Error(sqlstate::invalid_parameter, "retain must not be shorter than lock_ttl");
      IdempotencyBegin b;
      session_.write([&](Db& db) {
        b = IdempotencyBegin{};
        const std::int64_t now = session_.now_usecs();
        const std::optional<Stored> stored = read_key(db, key);
        // Starts a new attempt of the key: a new row, or the old one reset.
        auto start = [&](const std::optional<std::string>& recovery_point) {
          db.query("UPDATE idempotency_attempts SET last = last + 1").run();
          auto next = db.query("SELECT last FROM idempotency_attempts");  // (cheaper than RETURNING)
          next.step();
          const std::int64_t attempt = next.int64(0);
          auto q = db.query(
              "INSERT INTO idempotency_keys (tenant_id, scope, key, request_digest, status, attempt, recovery_point,"
              "   lock_usecs, retain_usecs, locked_until, created_at, expires_at)"
              " VALUES (?1, ?2, ?3, ?4, 'in_progress', ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
              " ON CONFLICT (tenant_id, scope, key) DO UPDATE SET request_digest = excluded.request_digest,"
              "   status = 'in_progress', attempt = excluded.attempt, recovery_point = excluded.recovery_point,"
              "   response = NULL, completed_at = NULL, lock_usecs = excluded.lock_usecs,"
              "   retain_usecs = excluded.retain_usecs, locked_until = excluded.locked_until,"
              "   created_at = CASE WHEN excluded.recovery_point IS NULL THEN excluded.created_at ELSE created_at END,"
              "   expires_at = excluded.expires_at");
          q.bind(1, key.tenant).bind(2, key.scope).bind(3, key.key).bind_blob(4, request_digest).bind(5, attempt);
          if (recovery_point)
            q.bind(6, *recovery_point);
          else
            q.bind_null(6);
          q.bind(7, lock).bind(8, keep).bind(9, now + lock).bind(10, now).bind(11, now + keep).run();
          b.attempt = attempt;
          b.recovery_point = recovery_point;
        };
        switch (fy::core::decide_begin(stored ? &stored->row : nullptr, request_digest, now)) {
          case fy::core::BeginAction::start:
            start(std::nullopt);
            break;
          case fy::core::BeginAction::take_over:
            start(stored->recovery_point);
            break;
          case fy::core::BeginAction::replay:
            b.status = IdempotencyBegin::Status::Replay;
            b.attempt = stored->row.attempt;
            b.recovery_point = stored->recovery_point;
            b.response = stored->response;
            break;
          case fy::core::BeginAction::in_progress:
            fy::core::throw_key_in_progress(key.key, stored->row.attempt);
          case fy::core::BeginAction::mismatch:
            fy::core::throw_key_mismatch(key.key);
        }
      });
      return b;
    });
  });
}

void SqliteIdempotency::checkpoint(const IdempotencyKey& key, std::string_view recovery_point, std::int64_t attempt) {
  session_.measure("idem.checkpoint", [&] {
    core_guarded([&] {
      check_key(key);
      if (recovery_point.size() > fy::core::max_recovery_point_bytes)
        throw Error(sqlstate::string_too_long,
                    "recovery_point is longer than " + std::to_string(fy::core::max_recovery_point_bytes) + " bytes");
      session_.write([&](Db& db) {
        const Stored stored = require_key(db, key);
        fy::core::check_attempt(stored.row, &attempt, "checkpoint");
        db.query(
              "UPDATE idempotency_keys SET recovery_point = ?4, locked_until = ?5, expires_at = max(expires_at, ?5)"
              " WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3")
            .bind(1, key.tenant)
            .bind(2, key.scope)
            .bind(3, key.key)
            .bind(4, recovery_point)
            .bind(5, session_.now_usecs() + stored.lock_usecs)
            .run();
      });
    });
  });
}

void SqliteIdempotency::complete(const IdempotencyKey& key, const std::optional<Bytes>& response,
                                 std::int64_t attempt) {
  session_.measure("idem.complete", [&] {
    core_guarded([&] {
      check_key(key);
      if (response && response->size() > fy::core::max_response_bytes)
        throw Error(sqlstate::string_too_long,
                    "response is longer than " + std::to_string(fy::core::max_response_bytes) + " bytes");
      session_.write([&](Db& db) {
        const Stored stored = require_key(db, key);
        fy::core::check_attempt(stored.row, &attempt, "complete");
        const std::int64_t now = session_.now_usecs();
        auto q = db.query(
            "UPDATE idempotency_keys SET status = 'completed', response = ?4, completed_at = ?5,"
            "   locked_until = ?5, expires_at = ?6 WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3");
        q.bind(1, key.tenant).bind(2, key.scope).bind(3, key.key);
        if (response)
          q.bind_blob(4, *response);
        else
          q.bind_null(4);
        q.bind(5, now).bind(6, now + stored.retain_usecs).run();
      });
    });
  });
}

void SqliteIdempotency::abandon(const IdempotencyKey& key, std::int64_t attempt) {
  session_.measure("idem.abandon", [&] {
    core_guarded([&] {
      check_key(key);
      session_.write([&](Db& db) {
        const Stored stored = require_key(db, key);
        fy::core::check_attempt(stored.row, &attempt, "abandon");
        db.query("DELETE FROM idempotency_keys WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3")
            .bind(1, key.tenant)
            .bind(2, key.scope)
            .bind(3, key.key)
            .run();
      });
    });
  });
}

std::optional<IdempotencyStatus> SqliteIdempotency::status(const IdempotencyKey& key, ReadClass /*read: one file*/) {
  return session_.measure("idem.status", [&] {
    return core_guarded([&] {
      check_key(key);
      std::optional<IdempotencyStatus> out;
      session_.read([&](Db& db) {
        auto q = db.query(
            "SELECT CASE WHEN expires_at <= ?4 AND (status = 'completed' OR locked_until <= ?4) THEN 'expired'"
            "       ELSE status END, attempt, recovery_point,"
            "       locked_until, expires_at FROM idempotency_keys WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3");
        q.bind(1, key.tenant).bind(2, key.scope).bind(3, key.key).bind(4, session_.now_usecs());
        if (!q.step()) return;
        out = IdempotencyStatus{q.text(0), q.int64(1),
                                q.is_null(2) ? std::nullopt : std::optional<std::string>(q.text(2)),
                                from_unix_usecs(q.int64(3)), from_unix_usecs(q.int64(4))};
      });
      return out;
    });
  });
}

int SqliteIdempotency::purge(int max_keys, std::optional<std::string> tenant) {
  return session_.measure("idem.purge", [&] {
    return core_guarded([&] {
      if (max_keys <= 0) throw Error(sqlstate::invalid_parameter, "max_keys must be positive");
      if (tenant) fy::core::check_name("tenant", true, *tenant, fy::core::max_tenant_bytes);
      int purged = 0;
      session_.write([&](Db& db) {
        auto q = db.query(
            "DELETE FROM idempotency_keys WHERE (tenant_id, scope, key) IN ("
            "  SELECT tenant_id, scope, key FROM idempotency_keys"
            "   WHERE expires_at <= ?1 AND (status = 'completed' OR locked_until <= ?1)"
            "     AND (?3 IS NULL OR tenant_id = ?3) ORDER BY expires_at LIMIT ?2)");
        q.bind(1, session_.now_usecs()).bind(2, static_cast<std::int64_t>(max_keys));
        if (tenant)
          q.bind(3, *tenant);
        else
          q.bind_null(3);
        purged = q.run();
      });
      return purged;
    });
  });
}

}  // namespace forgeyard::detail
