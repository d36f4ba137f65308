// audit append | head | tail | export | verify (docs/sql-api.md, "Audit"); `audit verify --file`
// checks an exported chain without opening any store.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli.hpp"

namespace forgeyard::cli {

namespace {
struct AuditArgs {
  std::string tenant, actor, action, resource;
  std::string details, payload_digest, payload_ref, occurred_at, event_id;
  std::int64_t n = 10;
  std::int64_t from = 1;
  std::optional<std::int64_t> to;
  std::string anchor, file;
};

// SEQ:HEX, as `audit head` prints it.
std::optional<AuditHead> parse_head_anchor(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw Usage("--anchor takes SEQ:HASH");
  std::optional<Bytes> hash = from_hex(text.substr(colon + 1));
  if (!hash) throw Usage("--anchor: the hash must be hex");
  return AuditHead{parse_int(text.substr(0, colon), "--anchor seq"), *hash};
}

int print_verification(const AuditVerification& v) {
  std::cout << "ok=" << (v.ok ? "true" : "false") << "\nchecked=" << v.checked << "\n";
  if (v.first_bad_seq) std::cout << "first_bad_seq=" << *v.first_bad_seq << "\n";
  if (v.reason) std::cout << "reason=" << *v.reason << "\n";
  return v.ok ? 0 : 1;
}

// Pages of the chain from `from` to `last` (or to the end), one JSON line per event. A page may
// come back short when its events are large: stop at an empty one.
void print_events(Audit& audit, const std::string& tenant, std::int64_t from, std::optional<std::int64_t> last) {
  while (!last || from <= *last) {
    const int page_size = last ? static_cast<int>(std::min<std::int64_t>(*last - from + 1, 10000)) : 10000;
    const auto page = audit.read(tenant, from, page_size);
    if (page.empty()) break;
    for (const auto& r : page) std::cout << audit_export_line(r) << "\n";
    from = page.back().seq + 1;
  }
}
}  // namespace

void add_audit_commands(CLI::App& app, Commands& commands) {
  CLI::App* audit = app.add_subcommand("audit", "the tamper-evident audit chain");
  audit->require_subcommand(1);
  auto a = std::make_shared<AuditArgs>();

  CLI::App* append = audit->add_subcommand("append", "append an event; prints its seq and hash");
  append->add_option("TENANT", a->tenant, "the tenant (one chain per tenant)")->required();
  append->add_option("ACTOR", a->actor, "who did it")->required();
  append->add_option("ACTION", a->action, "what was done")->required();
  append->add_option("RESOURCE", a->resource, "to what")->required();
  append->add_option("--details", a->details, "small structured context, a JSON object")->type_name("JSON");
  append->add_option("--payload-digest", a->payload_digest, "digest of a payload kept elsewhere")->type_name("HEX");
  append->add_option("--payload-ref", a->payload_ref, "where that payload is")->type_name("REF");
  append->add_option("--occurred-at", a->occurred_at, "when it happened (default: when recorded)")
      ->type_name("RFC3339");
  append->add_option("--event-id", a->event_id, "makes a retry safe: the same id and contents return the first seq")
      ->type_name("UUID");
  commands.on(append, [a](Context& ctx) {
    AuditEvent e;
    e.actor = a->actor;
    e.action = a->action;
    e.resource = a->resource;
    if (!a->details.empty()) e.details = a->details;
    if (!a->payload_digest.empty()) {
      e.payload_digest = from_hex(a->payload_digest);
      if (!e.payload_digest) throw Usage("--payload-digest must be hex");
    }
    if (!a->payload_ref.empty()) e.payload_ref = a->payload_ref;
    if (!a->occurred_at.empty()) {
      e.occurred_at = parse_time(a->occurred_at);
      if (!e.occurred_at) throw Usage("--occurred-at must be an RFC 3339 timestamp");
    }
    if (!a->event_id.empty()) e.event_id = a->event_id;
    const AuditHead h = ctx.store().audit().append(a->tenant, e);
    std::cout << "seq=" << h.seq << "\nhash=" << to_hex(h.hash) << "\n";
    return 0;
  });

  CLI::App* head = audit->add_subcommand("head", "the chain's last seq and hash (keep it elsewhere)");
  head->add_option("TENANT", a->tenant, "the tenant")->required();
  commands.on(head, [a](Context& ctx) {
    const AuditHead h = ctx.store().audit().head(a->tenant, ctx.read());
    std::cout << "seq=" << h.seq << "\nhash=" << to_hex(h.hash) << "\nanchor=" << h.seq << ":" << to_hex(h.hash)
              << "\n";
    return 0;
  });

  CLI::App* tail = audit->add_subcommand("tail", "the last N events as JSON lines");
  tail->add_option("TENANT", a->tenant, "the tenant")->required();
  tail->add_option("--n", a->n, "how many, 1 to 10000")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000).description(""))
      ->type_name("N");
  commands.on(tail, [a](Context& ctx) {
    const std::int64_t last = ctx.store().audit().head(a->tenant).seq;
    if (last > 0) print_events(ctx.store().audit(), a->tenant, std::max<std::int64_t>(1, last - a->n + 1), last);
    return 0;
  });

  CLI::App* exp = audit->add_subcommand("export", "the chain as JSON lines (for audit verify --file)");
  exp->add_option("TENANT", a->tenant, "the tenant")->required();
  exp->add_option("--from", a->from, "first seq")->type_name("SEQ")->capture_default_str();
  commands.on(exp, [a](Context& ctx) {
    print_events(ctx.store().audit(), a->tenant, a->from, std::nullopt);
    std::cout.flush();
    return std::cout ? 0 : 4;
  });

  CLI::App* verify = audit->add_subcommand("verify",
                                           "recompute the chain in the store, or with --file check an exported chain "
                                           "(PATH, or - for stdin) without any store");
  CLI::Option* tenant = verify->add_option("TENANT", a->tenant, "the tenant (not with --file)");
  CLI::Option* from = verify->add_option("--from", a->from, "first seq")->type_name("SEQ")->capture_default_str();
  CLI::Option* to = verify->add_option("--to", a->to, "last seq (default: the head)")->type_name("SEQ");
  verify->add_option("--anchor", a->anchor, "a head kept elsewhere, as audit head prints it")->type_name("SEQ:HASH");
  verify->add_option("--file", a->file, "an exported chain")->type_name("PATH|-")->excludes(tenant, from, to);
  commands.on(verify, [a](Context& ctx) {
    const auto anchor = parse_head_anchor(a->anchor);
    if (!a->file.empty()) {
      if (a->file == "-") return print_verification(verify_audit_export(std::cin, anchor));
      std::ifstream in(a->file);
      if (!in) throw Usage("cannot read " + a->file);
      return print_verification(verify_audit_export(in, anchor));
    }
    if (a->tenant.empty()) throw Usage("expected: audit verify TENANT [--from SEQ] [--to SEQ] [--anchor SEQ:HASH]");
    return print_verification(ctx.store().audit().verify(a->tenant, a->from, a->to, anchor, ctx.read()));
  });
}

}  // namespace forgeyard::cli
