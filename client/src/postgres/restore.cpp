#include "postgres/restore.hpp"

#include "restore_report.hpp"

namespace forgeyard::detail {

namespace {

const PgStatement status_sql{
    "fy_restore_status", "SELECT state, detail, " FY_USECS("last_reconciled_at") " FROM forgeyard.restore_status()", 0};
const PgStatement reconcile_sql{"fy_restore_reconcile",
                                "SELECT r.kind, r.tenant, r.count, r.detail,"
                                "       CASE WHEN r.kind IN ('audit_tail_cut', 'audit_chain_failed')"
                                "            THEN (SELECT a.seq FROM forgeyard.audit_head(r.tenant) a) END"
                                "  FROM forgeyard.restore_reconcile($1::pg_catalog.jsonb) r",
                                1};

}  // namespace

RestoreStatus pg_restore_status(PgSession& session) {
  return session.measure("storage.restore_status", [&] {
    PgResult r = session.run(status_sql, {});
    RestoreStatus s;
    s.state = parse_restore_state(r.text(0, 0));
    s.detail = r.text(0, 1);
    if (!r.is_null(0, 2)) s.last_reconciled_at = from_unix_usecs(r.int8(0, 2));
    return s;
  });
}

ReconcileReport pg_restore_reconcile(PgSession& session, const std::vector<AuditAnchor>& anchors) {
  return session.measure("storage.reconcile", [&] {
    check_anchors(anchors);
    PgResult r = session.run(reconcile_sql, {anchors_json(anchors)});
    ReconcileReport report;
    for (int i = 0; i < r.rows(); ++i) {
      const std::string kind = r.text(i, 0);
      const std::int64_t count = r.is_null(i, 2) ? 0 : r.int8(i, 2);
      if (kind == "restore_detected") {
        report.restore_detected = count != 0;
      } else if (kind == "leases_expired") {
        report.leases_expired = count;
      } else if (kind == "deliveries_released") {
        report.deliveries_released = count;
      } else if (kind == "idempotency_unlocked") {
        report.idempotency_unlocked = count;
      } else if (kind == "audit_chains_verified") {
        report.audit_chains_verified = count;
      } else if (kind == "audit_chains_failed") {
        report.audit_chains_failed = count;
      } else if (kind == "operations_audit") {
        report.operations_audit.seq = count;
        report.operations_audit.hash = from_hex(r.text(i, 3)).value_or(std::string());
      } else if (kind == "audit_tail_cut" || kind == "audit_chain_failed") {
        AuditChainReport chain;
        chain.tenant = r.text(i, 1);
        chain.ok = false;
        chain.head_seq = r.is_null(i, 4) ? 0 : r.int8(i, 4);
        chain.reason = r.text(i, 3);
        if (kind == "audit_tail_cut")
          chain.cut_to = count;
        else
          chain.first_bad_seq = count;
        report.audit_chains.push_back(std::move(chain));
      }
    }
    return report;
  });
}

}  // namespace forgeyard::detail
