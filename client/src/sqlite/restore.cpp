#include "sqlite/restore.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "core/canonical_json.hpp"
#include "restore_report.hpp"
#include "sqlite/audit.hpp"

namespace forgeyard::detail {

namespace {

struct FileIdentity {
  std::int64_t dev = 0;
  std::int64_t ino = 0;
};

FileIdentity file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(ErrorKind::Unavailable, sqlstate::io_error, "cannot stat " + path + ": " + std::strerror(errno));
  return {static_cast<std::int64_t>(st.st_dev), static_cast<std::int64_t>(st.st_ino)};
}

struct Recorded {
  std::string store_id;
  std::string reason;
  std::optional<std::string> path;
  std::optional<FileIdentity> file;
  std::int64_t observed_at = 0;
};

std::optional<Recorded> last_recorded(Db& db) {
  auto q =
      db.query("SELECT store_id, reason, path, dev, ino, observed_at FROM store_identity ORDER BY id DESC LIMIT 1");
  if (!q.step()) return std::nullopt;
  Recorded r;
  r.store_id = q.text(0);
  r.reason = q.text(1);
  if (!q.is_null(2)) r.path = q.text(2);
  if (!q.is_null(3) && !q.is_null(4)) r.file = FileIdentity{q.int64(3), q.int64(4)};
  r.observed_at = q.int64(5);
  return r;
}

void record(Db& db, const std::string& store_id, const char* reason, const std::string& path, std::int64_t now) {
  const FileIdentity f = file_identity(path);
  db.query("INSERT INTO store_identity (store_id, reason, path, dev, ino, observed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
      .bind(1, store_id)
      .bind(2, std::string_view(reason))
      .bind(3, path)
      .bind(4, f.dev)
      .bind(5, f.ino)
      .bind(6, now)
      .run();
}

std::int64_t raise_counter(Db& db, const char* statement, std::int64_t floor) {
  auto q = db.query(statement);
  q.bind(1, floor);
  return q.run();
}

}  // namespace

void record_new_store_identity(Db& db, const std::string& path, std::int64_t now) {
  std::optional<Recorded> last = last_recorded(db);
  if (!last || last->file) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    last = last_recorded(db);  // another process may have recorded it meanwhile
    if (last && !last->file) record(db, last->store_id, "install", path, now);
    db.exec("COMMIT");
  } catch (...) {
    db.exec("ROLLBACK");
    throw;
  }
}

RestoreStatus sqlite_restore_status(Db& db, const std::string& path) {
  RestoreStatus s;
  {
    auto q = db.query("SELECT max(observed_at) FROM store_identity WHERE reason = 'reconcile'");
    if (q.step() && !q.is_null(0)) s.last_reconciled_at = from_unix_usecs(q.int64(0));
  }
  const std::optional<Recorded> last = last_recorded(db);
  const FileIdentity now = file_identity(path);
  if (!last || !last->file) {
    s.detail = "no file identity recorded yet";
    return s;
  }
  if (last->file->dev != now.dev || last->file->ino != now.ino) {
    s.state = RestoreState::Restored;
    s.detail = "store " + last->store_id + " was recorded as " + last->path.value_or("?") + " (device " +
               std::to_string(last->file->dev) + ", inode " + std::to_string(last->file->ino) + "); " + path +
               " is device " + std::to_string(now.dev) + ", inode " + std::to_string(now.ino) +
               ": a copied or restored file";
    return s;
  }
  s.detail = "store " + last->store_id + " at " + path;
  return s;
}

ReconcileReport sqlite_restore_reconcile(SqliteSession& session, const std::string& path,
                                         const std::vector<AuditAnchor>& anchors) {
  check_anchors(anchors);
  ReconcileReport report;
  session.write([&](Db& db) {
    const std::int64_t now = session.now_usecs();
    const RestoreStatus before = sqlite_restore_status(db, path);
    report.restore_detected = before.state != RestoreState::Ok;

    // Every fencing value handed out from here on exceeds the clock in microseconds, hence every
    // value handed out before the restore (docs/architecture.md#fencing-across-a-restore).
    raise_counter(db, "UPDATE claim_tokens SET last = max(last, ?1)", now);
    raise_counter(db, "UPDATE idempotency_attempts SET last = max(last, ?1)", now);
    if (raise_counter(db, "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'messages'", now) == 0)
      raise_counter(db, "INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', ?1)", now);

    // Live grants end now; reap reports each once.
    report.leases_expired =
        db.query("UPDATE leases SET expires_at = ?1, reaped_at = NULL WHERE released_at IS NULL AND expires_at > ?1")
            .bind(1, now)
            .run();
    // Claimed deliveries: claimable now, under a token nobody holds (earlier tokens get FY001).
    std::vector<std::int64_t> claimed;
    {
      auto q = db.query(
          "SELECT msg_id FROM messages WHERE state = 'pending' AND claim_token IS NOT NULL AND claimed_by IS NOT NULL");
      while (q.step()) claimed.push_back(q.int64(0));
    }
    for (std::int64_t id : claimed) {
      db.query(
            "UPDATE messages SET claim_token = (SELECT last + 1 FROM claim_tokens), claimed_by = NULL,"
            " visible_at = min(visible_at, ?2) WHERE msg_id = ?1")
          .bind(1, id)
          .bind(2, now)
          .run();
      db.query("UPDATE claim_tokens SET last = last + 1").run();
    }
    report.deliveries_released = static_cast<std::int64_t>(claimed.size());
    // Locked keys: the lock ends under an attempt nobody holds; the next begin takes over.
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> locked;
    {
      auto q = db.query(
          "SELECT tenant_id, scope, key FROM idempotency_keys WHERE status = 'in_progress' AND locked_until > ?1");
      q.bind(1, now);
      while (q.step()) locked.push_back({q.text(0), {q.text(1), q.text(2)}});
    }
    for (const auto& [tenant, sk] : locked) {
      db.query("UPDATE idempotency_attempts SET last = last + 1").run();
      db.query(
            "UPDATE idempotency_keys SET attempt = (SELECT last FROM idempotency_attempts), locked_until = ?4"
            " WHERE tenant_id = ?1 AND scope = ?2 AND key = ?3")
          .bind(1, tenant)
          .bind(2, sk.first)
          .bind(3, sk.second)
          .bind(4, now)
          .run();
    }
    report.idempotency_unlocked = static_cast<std::int64_t>(locked.size());

    // Every chain, and every anchored tenant (an anchor of a chain lost entirely is a cut tail).
    HeldSession held(db, session.instruments(), [&session] { return session.now_usecs(); });  // its transaction
    SqliteAudit audit(held);
    std::map<std::string, std::optional<AuditHead>> chains;
    {
      auto q = db.query("SELECT tenant_id FROM audit_heads");
      while (q.step()) chains[q.text(0)];
    }
    for (const AuditAnchor& a : anchors) chains[a.tenant] = a.head;
    std::string failures = "[";
    for (const auto& [tenant, anchor] : chains) {
      const AuditVerification v = audit.verify(tenant, 1, std::nullopt, anchor, {});
      ++report.audit_chains_verified;
      if (v.ok) continue;
      ++report.audit_chains_failed;
      AuditChainReport chain;
      chain.tenant = tenant;
      chain.ok = false;
      chain.head_seq = audit.head(tenant, {}).seq;
      if (anchor && anchor->seq > chain.head_seq) {
        chain.cut_to = anchor->seq;
        chain.reason = "events " + std::to_string(chain.head_seq + 1) + ".." + std::to_string(anchor->seq) +
                       " were lost with the restore (head " + std::to_string(chain.head_seq) + ", anchor " +
                       std::to_string(anchor->seq) + ")";
      } else {
        chain.first_bad_seq = v.first_bad_seq;
        chain.reason = v.reason;
      }
      if (failures.size() > 1) failures += ',';
      failures += "{\"tenant\":" + fy::core::json_quote(tenant) +
                  ",\"first_bad_seq\":" + (v.first_bad_seq ? std::to_string(*v.first_bad_seq) : "null") +
                  ",\"reason\":" + fy::core::json_quote(v.reason.value_or("")) + "}";
      report.audit_chains.push_back(std::move(chain));
    }
    failures += "]";

    std::string store_id;
    {
      auto q = db.query("SELECT store_id FROM store_identity ORDER BY id DESC LIMIT 1");
      if (q.step()) store_id = q.text(0);
    }
    record(db, store_id, "reconcile", path, now);
    AuditEvent event;
    event.actor = "forgeyard";
    event.action = "storage.reconcile";
    event.resource = path;
    event.details = std::string("{\"restore_state\":\"") + to_string(before.state) +
                    "\",\"leases_expired\":" + std::to_string(report.leases_expired) +
                    ",\"deliveries_released\":" + std::to_string(report.deliveries_released) +
                    ",\"idempotency_unlocked\":" + std::to_string(report.idempotency_unlocked) +
                    ",\"audit_chains_verified\":" + std::to_string(report.audit_chains_verified) +
                    ",\"audit_chains_failed\":" + std::to_string(report.audit_chains_failed) +
                    ",\"fencing_floor\":" + std::to_string(now) + ",\"failures\":" + failures + "}";
    report.operations_audit = audit.append(operations_tenant, event);
  });
  return report;
}

}  // namespace forgeyard::detail
