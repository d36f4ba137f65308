// storage reconcile and storage restore-status: restore safety (docs/operations.md#backup-and-restore).
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

namespace {

// TENANT=SEQ:HASH (the tenant may contain '='; the last one separates).
AuditAnchor parse_tenant_anchor(const std::string& text) {
  const auto eq = text.rfind('=');
  const auto colon = text.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos)
    throw Usage("--anchor must be TENANT=SEQ:HASH (audit head prints SEQ and HASH), not " + text);
  const auto hash = from_hex(text.substr(colon + 1));
  if (!hash) throw Usage("--anchor " + text + ": the hash must be hex digits");
  return {text.substr(0, eq), {parse_int(text.substr(eq + 1, colon - eq - 1), "--anchor SEQ"), *hash}};
}

}  // namespace

void add_restore_commands(CLI::App& app, Commands& commands) {
  CLI::App* storage = app.get_subcommand("storage");

  struct Reconcile {
    std::vector<std::string> anchors;
    bool json = false;
  };
  auto r = std::make_shared<Reconcile>();
  CLI::App* reconcile = storage->add_subcommand(
      "reconcile", "after any restore or copy: end restored leases, claims and locks, raise fencing values");
  add_repeated(*reconcile, "--anchor", r->anchors, "an audit head kept elsewhere, to report a cut tail (repeat)",
               "TENANT=SEQ:HASH");
  reconcile->add_flag("--json", r->json, "one JSON object instead of key=value lines");
  commands.on(reconcile, [r](Context& ctx) {
    std::vector<AuditAnchor> anchors;
    for (const std::string& a : r->anchors) anchors.push_back(parse_tenant_anchor(a));
    const ReconcileReport rep = ctx.store().restore_reconcile(anchors);
    if (r->json) {
      std::cout << "{\"restore_detected\":" << (rep.restore_detected ? "true" : "false")
                << ",\"leases_expired\":" << rep.leases_expired
                << ",\"deliveries_released\":" << rep.deliveries_released
                << ",\"idempotency_unlocked\":" << rep.idempotency_unlocked
                << ",\"audit_chains_verified\":" << rep.audit_chains_verified
                << ",\"audit_chains_failed\":" << rep.audit_chains_failed << ",\"audit_chains\":[";
      for (std::size_t i = 0; i < rep.audit_chains.size(); ++i) {
        const AuditChainReport& c = rep.audit_chains[i];
        std::cout << (i ? "," : "") << "{\"tenant\":" << json_string(c.tenant) << ",\"head_seq\":" << c.head_seq
                  << ",\"cut_to\":" << (c.cut_to ? std::to_string(*c.cut_to) : "null")
                  << ",\"first_bad_seq\":" << (c.first_bad_seq ? std::to_string(*c.first_bad_seq) : "null")
                  << ",\"reason\":" << (c.reason ? json_string(*c.reason) : "null") << "}";
      }
      std::cout << "],\"operations_audit\":{\"tenant\":" << json_string(operations_tenant)
                << ",\"seq\":" << rep.operations_audit.seq << ",\"hash\":\"" << to_hex(rep.operations_audit.hash)
                << "\"}}\n";
    } else {
      std::cout << "restore_detected=" << (rep.restore_detected ? "true" : "false")
                << "\nleases_expired=" << rep.leases_expired << "\ndeliveries_released=" << rep.deliveries_released
                << "\nidempotency_unlocked=" << rep.idempotency_unlocked
                << "\naudit_chains_verified=" << rep.audit_chains_verified
                << "\naudit_chains_failed=" << rep.audit_chains_failed << "\n";
      for (const AuditChainReport& c : rep.audit_chains) {
        std::cout << "audit_chain_failed=" << c.tenant << " head_seq=" << c.head_seq;
        if (c.cut_to) std::cout << " cut_to=" << *c.cut_to;
        if (c.first_bad_seq) std::cout << " first_bad_seq=" << *c.first_bad_seq;
        std::cout << " reason=" << c.reason.value_or("") << "\n";
      }
      std::cout << "operations_audit=" << operations_tenant << " seq=" << rep.operations_audit.seq
                << " hash=" << to_hex(rep.operations_audit.hash) << "\n";
    }
    return rep.audit_chains_failed > 0 ? exit_no : exit_done;
  });

  auto as_json = std::make_shared<bool>(false);
  CLI::App* status = storage->add_subcommand("restore-status", "was the store restored or copied, not reconciled?");
  status->add_flag("--json", *as_json, "one JSON object instead of key=value lines");
  commands.on(status, [as_json](Context& ctx) {
    const RestoreStatus s = ctx.store().restore_status();
    const std::string reconciled = s.last_reconciled_at ? iso(*s.last_reconciled_at) : "";
    if (*as_json) {
      std::cout << "{\"state\":\"" << to_string(s.state)
                << "\",\"needs_reconcile\":" << (s.needs_reconcile() ? "true" : "false")
                << ",\"detail\":" << json_string(s.detail)
                << ",\"last_reconciled_at\":" << (reconciled.empty() ? "null" : json_string(reconciled)) << "}\n";
    } else {
      std::cout << "state=" << to_string(s.state) << "\nneeds_reconcile=" << (s.needs_reconcile() ? "true" : "false")
                << "\ndetail=" << s.detail << "\nlast_reconciled_at=" << reconciled << "\n";
    }
    return s.state == RestoreState::Ok ? exit_done : exit_no;
  });
}

}  // namespace forgeyard::cli
