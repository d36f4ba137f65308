// The audit chain in the SQLite store: the extension's rules, encoding and verifier, from the
// same core code. BEGIN IMMEDIATE serializes writers, so a tenant's appends take seq one by one.
#include "sqlite/audit.hpp"

#include <algorithm>
#include <limits>

#include "audit_event.hpp"
#include "error_map.hpp"

namespace forgeyard::detail {

namespace {

namespace core = fy::core;

struct Input {
  core::AuditEvent event;
  std::optional<std::int64_t> occurred_at;
  bool caller_event_id = false;
};

Input make_input(std::string_view tenant, const AuditEvent& event) {
  Input in{audit_input(tenant, event), std::nullopt, false};
  if (event.occurred_at) in.occurred_at = unix_usecs(*event.occurred_at);
  in.caller_event_id = !in.event.event_id.empty();
  return in;
}

std::optional<std::string> optional_text(Query& q, int column) {
  if (q.is_null(column)) return std::nullopt;
  return q.text(column);
}
std::optional<std::string> optional_blob(Query& q, int column) {
  if (q.is_null(column)) return std::nullopt;
  return q.blob(column);
}
void bind_optional_text(Query& q, int index, const std::optional<std::string>& v) {
  if (v)
    q.bind(index, *v);
  else
    q.bind_null(index);
}
void bind_optional_blob(Query& q, int index, const std::optional<std::string>& v) {
  if (v)
    q.bind_blob(index, *v);
  else
    q.bind_null(index);
}

// An event_id already in the chain: its (seq, hash) when the retry carries the same contents.
std::optional<AuditHead> replayed(Db& db, const Input& in) {
  auto q = db.query(
      "SELECT seq, hash, occurred_at, actor, action, resource, details, payload_digest, payload_ref"
      "  FROM audit_events WHERE tenant_id = ?1 AND event_id = ?2");
  q.bind(1, in.event.tenant).bind_blob(2, in.event.event_id);
  if (!q.step()) return std::nullopt;
  core::AuditEvent stored;
  stored.event_id = in.event.event_id;
  stored.seq = q.int64(0);
  stored.hash = q.blob(1);
  stored.occurred_at = q.int64(2);
  stored.actor = q.text(3);
  stored.action = q.text(4);
  stored.resource = q.text(5);
  stored.details = optional_text(q, 6);
  stored.payload_digest = optional_blob(q, 7);
  stored.payload_ref = optional_text(q, 8);
  core::AuditEvent retry = in.event;
  if (in.occurred_at) retry.occurred_at = *in.occurred_at;
  if (!core::same_contents(stored, retry, in.occurred_at.has_value())) core::throw_event_id_reused(stored);
  return AuditHead{stored.seq, stored.hash};
}

std::vector<AuditHead> append_events(Db& db, std::int64_t now, const std::string& tenant, std::vector<Input>& inputs) {
  core::check_audit_time("the clock", now);
  AuditHead head{0, core::genesis_hash()};
  {
    auto q = db.query("SELECT seq, hash FROM audit_heads WHERE tenant_id = ?1");
    q.bind(1, tenant);
    if (q.step()) head = AuditHead{q.int64(0), q.blob(1)};
  }
  std::vector<AuditHead> out;
  for (Input& in : inputs) {
    if (in.caller_event_id) {
      if (std::optional<AuditHead> earlier = replayed(db, in)) {
        out.push_back(*earlier);
        continue;
      }
    } else {
      in.event.event_id = random_uuid();
    }
    core::AuditEvent& e = in.event;
    e.seq = head.seq + 1;
    e.occurred_at = in.occurred_at.value_or(now);
    e.recorded_at = now;
    e.prev_hash = head.hash;
    e.hash = core::audit_hash(e);
    auto q = db.query(
        "INSERT INTO audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action, resource,"
        "   details, payload_digest, payload_ref, prev_hash, hash)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    q.bind(1, e.tenant).bind(2, e.seq).bind_blob(3, e.event_id).bind(4, e.occurred_at).bind(5, e.recorded_at);
    q.bind(6, e.actor).bind(7, e.action).bind(8, e.resource);
    bind_optional_text(q, 9, e.details);
    bind_optional_blob(q, 10, e.payload_digest);
    bind_optional_text(q, 11, e.payload_ref);
    q.bind_blob(12, e.prev_hash).bind_blob(13, e.hash);
    q.run();
    head = AuditHead{e.seq, e.hash};
    out.push_back(head);
  }
  auto q = db.query(
      "INSERT INTO audit_heads (tenant_id, seq, hash) VALUES (?1, ?2, ?3)"
      " ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash");
  q.bind(1, tenant).bind(2, head.seq).bind_blob(3, head.hash);
  q.run();
  return out;
}

void check_tenant_name(std::string_view tenant) {
  core::check_name("tenant", true, tenant, core::max_tenant_bytes);
}

}  // namespace

AuditHead SqliteAudit::append(std::string_view tenant, const AuditEvent& event) {
  return session_.measure("audit.append", [&] {
    std::vector<Input> inputs{make_input(tenant, event)};
    std::vector<AuditHead> heads;
    session_.write([&](Db& db) {
      heads = core_guarded([&] { return append_events(db, session_.now_usecs(), std::string(tenant), inputs); });
    });
    return heads.front();
  });
}

std::vector<AuditHead> SqliteAudit::append_batch(std::string_view tenant, const std::vector<AuditEvent>& events) {
  return session_.measure("audit.append_batch", [&] {
    core_guarded([&] { check_tenant_name(tenant); });
    if (events.size() > static_cast<std::size_t>(core::max_audit_batch))
      throw Error(sqlstate::invalid_parameter,
                  "a batch holds at most " + std::to_string(core::max_audit_batch) + " events");
    std::vector<Input> inputs;
    inputs.reserve(events.size());
    for (const AuditEvent& event : events) inputs.push_back(make_input(tenant, event));
    std::vector<AuditHead> heads;
    if (inputs.empty()) return heads;
    session_.write([&](Db& db) {
      heads = core_guarded([&] { return append_events(db, session_.now_usecs(), std::string(tenant), inputs); });
    });
    return heads;
  });
}

AuditHead SqliteAudit::head(std::string_view tenant, ReadClass /*read: one file*/) {
  return session_.measure("audit.head", [&] {
    core_guarded([&] { check_tenant_name(tenant); });
    AuditHead head{0, core::genesis_hash()};
    session_.read([&](Db& db) {
      auto q = db.query("SELECT seq, hash FROM audit_heads WHERE tenant_id = ?1");
      q.bind(1, tenant);
      if (q.step()) head = AuditHead{q.int64(0), q.blob(1)};
    });
    return head;
  });
}

namespace {

// Events from_seq .. to_seq (at most `limit`) in seq order. details is stored canonical; a value
// edited into something else is passed on as it is, so its hash cannot match.
template <class OnEvent>
void read_events(Db& db, const std::string& tenant, std::int64_t from_seq, std::int64_t to_seq, std::int64_t limit,
                 OnEvent&& on_event) {
  auto q = db.query(
      "SELECT seq, event_id, occurred_at, recorded_at, actor, action, resource, details, payload_digest, payload_ref,"
      "       prev_hash, hash"
      "  FROM audit_events WHERE tenant_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq LIMIT ?4");
  q.bind(1, tenant).bind(2, from_seq).bind(3, to_seq).bind(4, limit);
  while (q.step()) {
    core::AuditEvent e;
    e.tenant = tenant;
    e.seq = q.int64(0);
    e.event_id = q.blob(1);
    e.occurred_at = q.int64(2);
    e.recorded_at = q.int64(3);
    e.actor = q.text(4);
    e.action = q.text(5);
    e.resource = q.text(6);
    e.details = optional_text(q, 7);
    e.payload_digest = optional_blob(q, 8);
    e.payload_ref = optional_text(q, 9);
    e.prev_hash = q.blob(10);
    e.hash = q.blob(11);
    if (!on_event(e)) break;
  }
}

}  // namespace

AuditVerification SqliteAudit::verify(std::string_view tenant_view, std::int64_t from_seq,
                                      std::optional<std::int64_t> to_seq, std::optional<AuditHead> anchor,
                                      ReadClass /*read: one file*/) {
  return session_.measure("audit.verify", [&] {
    const std::string tenant(tenant_view);
    const std::optional<core::Anchor> core_anchor = to_anchor(anchor);
    core_guarded([&] {
      check_tenant_name(tenant);
      core::check_verify_range(from_seq, to_seq, core_anchor);
    });
    core::Verification result;
    session_.read([&](Db& db) {
      core::Anchor head{0, core::genesis_hash()};
      {
        auto q = db.query("SELECT seq, hash FROM audit_heads WHERE tenant_id = ?1");
        q.bind(1, tenant);
        if (q.step()) head = core::Anchor{q.int64(0), q.blob(1)};
      }
      std::optional<std::string> hash_before;
      if (from_seq > 1) {
        auto q = db.query("SELECT hash FROM audit_events WHERE tenant_id = ?1 AND seq = ?2");
        q.bind(1, tenant).bind(2, from_seq - 1);
        if (q.step()) hash_before = q.blob(0);
      }
      core::ChainVerifier verifier = core::ChainVerifier::for_range(from_seq, hash_before, head, core_anchor);
      const std::int64_t last = to_seq.value_or(std::numeric_limits<std::int64_t>::max());
      if (!verifier.bad())
        read_events(db, tenant, from_seq, last, std::numeric_limits<std::int64_t>::max(),
                    [&](const core::AuditEvent& e) { return verifier.add(e); });
      result = verifier.finish_range(to_seq, head.seq);
    });
    return to_verification(result);
  });
}

std::vector<AuditRecord> SqliteAudit::read(std::string_view tenant, std::int64_t from_seq, int max_events,
                                           ReadClass /*read_class: one file*/) {
  return session_.measure("audit.read", [&] {
    core_guarded([&] { check_tenant_name(tenant); });
    if (from_seq < 1) throw Error(sqlstate::invalid_parameter, "from_seq must be at least 1");
    if (max_events < 1 || max_events > 10000)
      throw Error(sqlstate::invalid_parameter, "max_events must be between 1 and 10000");
    std::vector<AuditRecord> out;
    session_.read([&](Db& db) {
      out.clear();
      read_events(db, std::string(tenant), from_seq, std::numeric_limits<std::int64_t>::max(), max_events,
                  [&](const core::AuditEvent& e) {
                    out.push_back(to_record(e));
                    return true;
                  });
    });
    return out;
  });
}

}  // namespace forgeyard::detail
