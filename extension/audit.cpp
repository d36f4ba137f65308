// The append-only, hash-chained audit log (docs/sql-api.md#audit). The encoding, the hash and
// the verification rules are core/audit.hpp's, shared with the SQLite shim and the client.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/audit.hpp"
#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/memory.hpp"
#include "pg/spi.hpp"
#include "pg/trigger.hpp"
#include "tenant.hpp"

namespace fy {
namespace {

// Rows are read in small pages so that a backend holds little at once (details may be 64 KiB).
constexpr int verify_page = 200;
constexpr int read_page = 100;
constexpr int max_read_events = 10000;
// audit_read stops adding rows past this many bytes of details (at least one row is returned).
constexpr std::size_t max_read_bytes = std::size_t{8} * 1024 * 1024;

[[noreturn]] void invalid(const std::string& message) {
  throw core::Error(core::sqlstate::invalid_parameter, message);
}

// The chain hashes text as UTF-8 bytes (the encoding the SQLite shim, the offline verifier and
// the test vectors use); in a database of another encoding the same event would hash otherwise.
void require_utf8() {
  if (!pg::database_is_utf8())
    throw core::Error(core::sqlstate::feature_not_supported, "the audit log needs a database with UTF8 encoding",
                      "its hashes are over UTF-8 text, so that every store and the offline verifier agree");
}

// A timestamp argument in microseconds since 1970, within the years 1..9999 (the conversion
// is checked: PostgreSQL's last timestamps lie past the int64 range of Unix microseconds).
std::int64_t finite_usecs(TimestampTz t, const char* argument) {
  if (TIMESTAMP_NOT_FINITE(t)) invalid(std::string(argument) + " must be a finite timestamp");
  std::int64_t unix_usecs = 0;
  if (__builtin_add_overflow(t, pg::unix_usecs(0), &unix_usecs)) unix_usecs = core::max_audit_time_usecs + 1;
  core::check_audit_time(argument, unix_usecs);
  return unix_usecs;
}

// One event of an append, before it has a place in the chain.
struct Input {
  core::AuditEvent event;  // without seq, recorded_at, prev_hash and hash
  std::optional<TimestampTz> occurred_at;
  bool caller_event_id = false;  // the caller named the event: a retry replays it
};

Input make_input(std::string tenant, std::optional<std::string> actor, std::optional<std::string> action,
                 std::optional<std::string> resource, const std::optional<std::string>& details_text,
                 std::optional<std::string> digest, std::optional<std::string> ref, std::optional<TimestampTz> occurred,
                 std::optional<std::string> event_id, const char* plural) {
  auto required = [&](std::optional<std::string>& v, const char* name) {
    if (!v) {
      if (plural != nullptr)
        throw core::Error(core::sqlstate::null_value, std::string(name) + "s must not contain NULL");
      core::check_name(name, false, {}, 0);
    }
    return std::move(*v);
  };
  Input in;
  in.event.tenant = std::move(tenant);
  in.event.actor = required(actor, "actor");
  in.event.action = required(action, "action");
  in.event.resource = required(resource, "resource");
  if (details_text) in.event.details = core::canonical_details(*details_text);
  in.event.payload_digest = std::move(digest);
  in.event.payload_ref = std::move(ref);
  core::check_audit_input(in.event);
  if (occurred) finite_usecs(*occurred, "occurred_at");
  in.occurred_at = occurred;
  in.caller_event_id = event_id.has_value();
  in.event.event_id = event_id ? std::move(*event_id) : pg::random_uuid();
  return in;
}

struct Head {
  std::int64_t seq = 0;
  std::string hash;
};

// The tenant's head, locked until the transaction ends: appends of one tenant queue here, so
// each takes the next seq and links to the hash before it.
Head lock_head(pg::Spi& spi, const pg::Value& tenant) {
  static pg::Statement select(
      "SELECT h.seq, h.hash FROM forgeyard.audit_heads h WHERE h.tenant_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
      {TEXTOID});
  static pg::Statement insert(
      "INSERT INTO forgeyard.audit_heads (tenant_id, seq, hash) VALUES ($1, 0, $2) ON CONFLICT DO NOTHING",
      {TEXTOID, BYTEAOID});
  std::optional<Head> head;
  auto read = [&] { spi.run(select, {tenant}, [&](const pg::Row& r) { head = Head{*r.int8(1), *r.bytea(2)}; }); };
  read();
  if (!head) {
    spi.run(insert, {tenant, pg::bytea_value(core::genesis_hash())});
    read();
  }
  if (!head) throw core::Error(core::sqlstate::internal_error, "the audit head of the tenant could not be locked");
  return *head;
}

// An event_id already in the chain: its (seq, hash) when the contents match (a retried append),
// FY011 when they differ.
std::optional<Head> replayed(pg::Spi& spi, const pg::Value& tenant, const Input& in) {
  static pg::Statement find(
      "SELECT e.seq, e.hash, e.occurred_at, e.actor, e.action, e.resource, e.details::pg_catalog.text,"
      "       e.payload_digest, e.payload_ref"
      "  FROM forgeyard.audit_events e"
      " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.event_id OPERATOR(pg_catalog.=) $2",
      {TEXTOID, UUIDOID});
  std::optional<core::AuditEvent> stored;
  spi.run(find, {tenant, pg::uuid_value(in.event.event_id)}, [&](const pg::Row& r) {
    core::AuditEvent e;
    e.seq = *r.int8(1);
    e.hash = *r.bytea(2);
    e.occurred_at = pg::unix_usecs(*r.timestamptz(3));
    e.actor = *r.text(4);
    e.action = *r.text(5);
    e.resource = *r.text(6);
    e.details = r.text(7);
    e.payload_digest = r.bytea(8);
    e.payload_ref = r.text(9);
    e.event_id = in.event.event_id;
    stored = std::move(e);
  });
  if (!stored) return std::nullopt;
  if (stored->details) stored->details = core::canonical_details(*stored->details);
  core::AuditEvent retry = in.event;
  if (in.occurred_at) retry.occurred_at = pg::unix_usecs(*in.occurred_at);
  if (!core::same_contents(*stored, retry, in.occurred_at.has_value())) core::throw_event_id_reused(*stored);
  return Head{stored->seq, stored->hash};
}

// Appends the events in order under one lock of the head; returns (seq, hash) of each. A single
// event is inserted and the head moved in one statement; a batch inserts its events and moves
// the head once at the end (a row updated per event would leave a version per event to skip).
std::vector<Head> append(pg::Spi& spi, const std::string& tenant, std::vector<Input>& inputs) {
  require_utf8();
#define FY_INSERT_EVENT                                                                                    \
  "INSERT INTO forgeyard.audit_events (tenant_id, seq, event_id, occurred_at, recorded_at, actor, action," \
  "   resource, details, payload_digest, payload_ref, prev_hash, hash)"                                    \
  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::pg_catalog.jsonb, $10, $11, $12, $13)"
#define FY_EVENT_TYPES                                                                                              \
  TEXTOID, INT8OID, UUIDOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BYTEAOID, TEXTOID, \
      BYTEAOID, BYTEAOID
  static pg::Statement insert_and_move_head(
      "WITH e AS (" FY_INSERT_EVENT
      ")"
      " UPDATE forgeyard.audit_heads SET seq = $2, hash = $13 WHERE tenant_id OPERATOR(pg_catalog.=) $1",
      {FY_EVENT_TYPES});
  static pg::Statement insert(FY_INSERT_EVENT, {FY_EVENT_TYPES});
#undef FY_INSERT_EVENT
#undef FY_EVENT_TYPES
  static pg::Statement move_head(
      "UPDATE forgeyard.audit_heads SET seq = $2, hash = $3 WHERE tenant_id OPERATOR(pg_catalog.=) $1",
      {TEXTOID, INT8OID, BYTEAOID});
  check_tenant(spi, tenant);
  if (inputs.empty()) return {};
  const pg::Value t = pg::text_value(tenant);
  Head head = lock_head(spi, t);
  // The clock is read under the head lock, so recorded_at never goes backwards along a chain.
  const TimestampTz now = pg::now();
  finite_usecs(now, "the clock (forgeyard.now())");
  const std::int64_t first_seq = head.seq + 1;
  const bool single = inputs.size() == 1;
  std::vector<Head> out;
  out.reserve(inputs.size());
  for (Input& in : inputs) {
    if (in.caller_event_id) {
      if (std::optional<Head> earlier = replayed(spi, t, in)) {
        out.push_back(*earlier);
        continue;
      }
    }
    core::AuditEvent& e = in.event;
    const TimestampTz occurred = in.occurred_at.value_or(now);
    e.seq = head.seq + 1;
    e.occurred_at = pg::unix_usecs(occurred);
    e.recorded_at = pg::unix_usecs(now);
    e.prev_hash = head.hash;
    e.hash = core::audit_hash(e);
    spi.run(single ? insert_and_move_head : insert,
            {t, pg::int8_value(e.seq), pg::uuid_value(e.event_id), pg::timestamptz_value(occurred),
             pg::timestamptz_value(now), pg::text_value(e.actor), pg::text_value(e.action), pg::text_value(e.resource),
             pg::optional_text_value(e.details), pg::optional_bytea_value(e.payload_digest),
             pg::optional_text_value(e.payload_ref), pg::bytea_value(e.prev_hash), pg::bytea_value(e.hash)});
    head = Head{e.seq, e.hash};
    out.push_back(head);
  }
  if (!single && head.seq >= first_seq) spi.run(move_head, {t, pg::int8_value(head.seq), pg::bytea_value(head.hash)});
  return out;
}

void return_heads(FunctionCallInfo fcinfo, const std::vector<Head>& heads) {
  pg::TableResult result(fcinfo);
  for (const Head& h : heads) result.add_row({pg::int8_value(h.seq), pg::bytea_value(h.hash)});
}

// audit_append and audit_append_batch after their arguments: append, then return (seq, hash) rows.
Datum append_and_return(FunctionCallInfo fcinfo, const std::string& tenant, std::vector<Input>& inputs) {
  pg::Spi spi;
  const std::vector<Head> heads = append(spi, tenant, inputs);
  spi.finish();
  return_heads(fcinfo, heads);
  return (Datum)0;
}

// An array argument's element i, or nullopt when the array is NULL.
template <class T>
std::optional<T> element(const std::optional<std::vector<std::optional<T>>>& array, std::size_t i) {
  return array ? (*array)[i] : std::nullopt;
}

}  // namespace
}  // namespace fy

using namespace fy;

// audit_append(tenant, actor, action, resource, details, payload_digest, payload_ref, occurred_at, event_id)
//   -> (seq, hash)
FY_FUNCTION(fy_audit_append) {
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  auto text = [&](int n, const char* name, std::size_t max_bytes) {
    return pg::text_arg(fcinfo, n, name, max_bytes, true);
  };
  std::vector<Input> inputs;
  inputs.push_back(make_input(tenant, text(1, "actor", core::max_actor_bytes),
                              text(2, "action", core::max_action_bytes), text(3, "resource", core::max_resource_bytes),
                              pg::optional_jsonb_text_arg(fcinfo, 4),
                              pg::bytea_arg(fcinfo, 5, "payload_digest", core::max_payload_digest_bytes, true, 1),
                              text(6, "payload_ref", core::max_payload_ref_bytes),
                              pg::optional_timestamptz_arg(fcinfo, 7), pg::optional_uuid_arg(fcinfo, 8), nullptr));
  return append_and_return(fcinfo, tenant, inputs);
}

// audit_append_batch(tenant, actors, actions, resources, details, payload_digests, payload_refs,
//                    occurred_ats, event_ids) -> (seq, hash) per event, in order
FY_FUNCTION(fy_audit_append_batch) {
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const auto actors = pg::text_array_arg(fcinfo, 1);
  const auto actions = pg::text_array_arg(fcinfo, 2);
  const auto resources = pg::text_array_arg(fcinfo, 3);
  if (!actors) throw core::Error(core::sqlstate::null_value, "actors must not be NULL");
  if (!actions) throw core::Error(core::sqlstate::null_value, "actions must not be NULL");
  if (!resources) throw core::Error(core::sqlstate::null_value, "resources must not be NULL");
  const std::size_t n = actors->size();
  if (n > static_cast<std::size_t>(core::max_audit_batch))
    invalid("a batch holds at most " + std::to_string(core::max_audit_batch) + " events");
  const auto details = pg::jsonb_text_array_arg(fcinfo, 4);
  const auto digests = pg::bytea_array_arg(fcinfo, 5);
  const auto refs = pg::text_array_arg(fcinfo, 6);
  const auto occurred = pg::timestamptz_array_arg(fcinfo, 7);
  const auto event_ids = pg::uuid_array_arg(fcinfo, 8);
  auto same_length = [&](const auto& array, const char* name) {
    if (array && array->size() != n) invalid(std::string(name) + " must have as many elements as actors");
  };
  same_length(actions, "actions");
  same_length(resources, "resources");
  same_length(details, "details");
  same_length(digests, "payload_digests");
  same_length(refs, "payload_refs");
  same_length(occurred, "occurred_ats");
  same_length(event_ids, "event_ids");
  std::vector<Input> inputs;
  inputs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::optional<std::string> digest = element(digests, i);
    if (digest && digest->empty()) invalid("payload_digests must not contain an empty digest");
    inputs.push_back(make_input(tenant, (*actors)[i], (*actions)[i], (*resources)[i], element(details, i),
                                std::move(digest), element(refs, i), element(occurred, i), element(event_ids, i), "s"));
  }
  return append_and_return(fcinfo, tenant, inputs);
}

// audit_head(tenant) -> (seq, hash); (0, genesis) for an empty chain
FY_FUNCTION(fy_audit_head) {
  require_utf8();
  static pg::Statement select(
      "SELECT h.seq, h.hash FROM forgeyard.audit_heads h WHERE h.tenant_id OPERATOR(pg_catalog.=) $1", {TEXTOID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  pg::Spi spi;
  check_tenant(spi, tenant);
  Head head{0, core::genesis_hash()};
  spi.run(select, {pg::text_value(tenant)}, [&](const pg::Row& r) { head = Head{*r.int8(1), *r.bytea(2)}; });
  spi.finish();
  return_heads(fcinfo, {head});
  return (Datum)0;
}

namespace {

// Reads events from_seq .. to_seq (at most `limit`) in seq order. details comes back canonical;
// a stored value that is no longer a JSON object keeps its text, so its hash cannot match.
template <class OnEvent>
std::uint64_t read_events(pg::Spi& spi, const std::string& tenant, std::int64_t from_seq, std::int64_t to_seq,
                          int limit, OnEvent&& on_event) {
  static pg::Statement page(
      "SELECT e.seq, e.event_id, e.occurred_at, e.recorded_at, e.actor, e.action, e.resource,"
      "       e.details::pg_catalog.text, e.payload_digest, e.payload_ref, e.prev_hash, e.hash"
      "  FROM forgeyard.audit_events e"
      " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.seq OPERATOR(pg_catalog.>=) $2"
      "   AND e.seq OPERATOR(pg_catalog.<=) $3"
      " ORDER BY e.seq LIMIT $4",
      {TEXTOID, INT8OID, INT8OID, INT4OID});
  return spi.run(page,
                 {pg::text_value(tenant), pg::int8_value(from_seq), pg::int8_value(to_seq), pg::int4_value(limit)},
                 [&](const pg::Row& r) {
                   core::AuditEvent e;
                   e.tenant = tenant;
                   e.seq = *r.int8(1);
                   e.event_id = *r.uuid(2);
                   e.occurred_at = pg::unix_usecs(*r.timestamptz(3));
                   e.recorded_at = pg::unix_usecs(*r.timestamptz(4));
                   e.actor = *r.text(5);
                   e.action = *r.text(6);
                   e.resource = *r.text(7);
                   e.details = r.text(8);
                   if (e.details) {
                     try {
                       e.details = core::canonical_details(*e.details);
                     } catch (const core::Error&) {
                       // not an object any more: hashed as stored, which cannot match
                     }
                   }
                   e.payload_digest = r.bytea(9);
                   e.payload_ref = r.text(10);
                   e.prev_hash = *r.bytea(11);
                   e.hash = *r.bytea(12);
                   on_event(std::move(e), *r.timestamptz(3), *r.timestamptz(4));
                 });
}

}  // namespace

// audit_verify(tenant, from_seq, to_seq, anchor_seq, anchor_hash) -> (ok, checked, first_bad_seq, reason)
FY_FUNCTION(fy_audit_verify) {
  require_utf8();
  static pg::Statement head_of(
      "SELECT h.seq, h.hash FROM forgeyard.audit_heads h WHERE h.tenant_id OPERATOR(pg_catalog.=) $1", {TEXTOID});
  static pg::Statement hash_at(
      "SELECT e.hash FROM forgeyard.audit_events e"
      " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1 AND e.seq OPERATOR(pg_catalog.=) $2",
      {TEXTOID, INT8OID});
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::int64_t from_seq = pg::int8_arg(fcinfo, 1, "from_seq");
  const std::optional<std::int64_t> to_seq = pg::optional_int8_arg(fcinfo, 2);
  const std::optional<std::int64_t> anchor_seq = pg::optional_int8_arg(fcinfo, 3);
  const std::optional<std::string> anchor_hash = pg::bytea_arg(fcinfo, 4, "anchor_hash", 1 << 10, true);
  if (anchor_seq.has_value() != anchor_hash.has_value()) invalid("anchor_seq and anchor_hash must be given together");
  std::optional<core::Anchor> anchor;
  if (anchor_seq) anchor = core::Anchor{*anchor_seq, *anchor_hash};
  core::check_verify_range(from_seq, to_seq, anchor);

  pg::Spi spi;
  check_tenant(spi, tenant);
  const pg::Value t = pg::text_value(tenant);
  core::Anchor head{0, core::genesis_hash()};
  spi.run(head_of, {t}, [&](const pg::Row& r) { head = core::Anchor{*r.int8(1), *r.bytea(2)}; });
  std::optional<std::string> hash_before;
  if (from_seq > 1)
    spi.run(hash_at, {t, pg::int8_value(from_seq - 1)}, [&](const pg::Row& r) { hash_before = *r.bytea(1); });
  core::ChainVerifier verifier = core::ChainVerifier::for_range(from_seq, hash_before, head, anchor);
  const std::int64_t last = to_seq.value_or(std::numeric_limits<std::int64_t>::max());
  std::int64_t next = from_seq;
  std::vector<core::AuditEvent> events;
  {
    // What reading a page allocates goes with the page: memory does not grow with the chain.
    pg::ScratchContext scratch;
    while (!verifier.bad() && next <= last) {
      scratch.reset();
      events.clear();
      auto keep = [&](core::AuditEvent&& e, TimestampTz, TimestampTz) { events.push_back(std::move(e)); };
      const std::uint64_t n = read_events(spi, tenant, next, last, verify_page, keep);
      for (const core::AuditEvent& e : events)
        if (!verifier.add(e)) break;
      if (n < static_cast<std::uint64_t>(verify_page)) break;
      next = events.back().seq + 1;
    }
  }
  const core::Verification result = verifier.finish_range(to_seq, head.seq);
  spi.finish();
  pg::TableResult out(fcinfo);
  out.add_row({pg::bool_value(result.ok), pg::int8_value(result.checked),
               result.first_bad_seq ? pg::int8_value(*result.first_bad_seq) : pg::null_value(),
               pg::optional_text_value(result.reason)});
  return (Datum)0;
}

// audit_read(tenant, from_seq, max_events) -> events in seq order
FY_FUNCTION(fy_audit_read) {
  require_utf8();
  const std::string tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  const std::int64_t from_seq = pg::int8_arg(fcinfo, 1, "from_seq");
  const std::int32_t max_events = pg::int4_arg(fcinfo, 2, "max_events");
  if (from_seq < 1) invalid("from_seq must be at least 1");
  if (max_events < 1 || max_events > max_read_events)
    invalid("max_events must be between 1 and " + std::to_string(max_read_events));
  struct Read {
    core::AuditEvent e;
    TimestampTz occurred, recorded;
  };
  std::vector<Read> rows;
  std::size_t bytes = 0;
  pg::Spi spi;
  check_tenant(spi, tenant);
  {
    // One page at a time in a scratch context (the rows are kept as C++ values), and one row
    // at a time below: the tuplestore keeps its own copy of each row.
    pg::ScratchContext scratch;
    for (std::int64_t next = from_seq; static_cast<int>(rows.size()) < max_events && bytes < max_read_bytes;) {
      scratch.reset();
      const int want = std::min(read_page, max_events - static_cast<int>(rows.size()));
      const std::uint64_t n = read_events(spi, tenant, next, std::numeric_limits<std::int64_t>::max(), want,
                                          [&](core::AuditEvent&& e, TimestampTz occurred, TimestampTz recorded) {
                                            if (bytes >= max_read_bytes) return;
                                            bytes += e.details ? e.details->size() : 0;
                                            rows.push_back({std::move(e), occurred, recorded});
                                          });
      if (n < static_cast<std::uint64_t>(want) || rows.empty()) break;
      next = rows.back().e.seq + 1;
    }
  }
  spi.finish();
  pg::TableResult out(fcinfo);
  pg::ScratchContext scratch;
  for (const Read& r : rows) {
    scratch.reset();
    const pg::Value details = r.e.details ? pg::jsonb_value(*r.e.details) : pg::null_value();
    out.add_row({pg::int8_value(r.e.seq), pg::uuid_value(r.e.event_id), pg::timestamptz_value(r.occurred),
                 pg::timestamptz_value(r.recorded), pg::text_value(r.e.actor), pg::text_value(r.e.action),
                 pg::text_value(r.e.resource), details, pg::optional_bytea_value(r.e.payload_digest),
                 pg::optional_text_value(r.e.payload_ref), pg::bytea_value(r.e.prev_hash), pg::bytea_value(r.e.hash)});
  }
  return (Datum)0;
}

// audit_hash(tenant, seq, event_id, occurred_at, recorded_at, actor, action, resource, details,
//            payload_digest, payload_ref, prev_hash) -> bytea
FY_FUNCTION(fy_audit_hash) {
  require_utf8();
  core::AuditEvent e;
  e.tenant = pg::name_arg(fcinfo, 0, "tenant", core::max_tenant_bytes);
  e.seq = pg::int8_arg(fcinfo, 1, "seq");
  if (e.seq < 1) invalid("seq must be at least 1");
  const std::optional<std::string> id = pg::optional_uuid_arg(fcinfo, 2);
  if (!id) throw core::Error(core::sqlstate::null_value, "event_id must not be NULL");
  e.event_id = *id;
  const std::optional<TimestampTz> occurred = pg::optional_timestamptz_arg(fcinfo, 3);
  const std::optional<TimestampTz> recorded = pg::optional_timestamptz_arg(fcinfo, 4);
  if (!occurred) throw core::Error(core::sqlstate::null_value, "occurred_at must not be NULL");
  if (!recorded) throw core::Error(core::sqlstate::null_value, "recorded_at must not be NULL");
  e.occurred_at = finite_usecs(*occurred, "occurred_at");
  e.recorded_at = finite_usecs(*recorded, "recorded_at");
  e.actor = pg::name_arg(fcinfo, 5, "actor", core::max_actor_bytes);
  e.action = pg::name_arg(fcinfo, 6, "action", core::max_action_bytes);
  e.resource = pg::name_arg(fcinfo, 7, "resource", core::max_resource_bytes);
  if (std::optional<std::string> d = pg::optional_jsonb_text_arg(fcinfo, 8)) e.details = core::canonical_details(*d);
  e.payload_digest = pg::bytea_arg(fcinfo, 9, "payload_digest", core::max_payload_digest_bytes, true, 1);
  e.payload_ref = pg::text_arg(fcinfo, 10, "payload_ref", core::max_payload_ref_bytes, true);
  const std::optional<std::string> prev = pg::bytea_arg(fcinfo, 11, "prev_hash", 1 << 10, false);
  if (prev->size() != core::hash_bytes) invalid("prev_hash must be 32 bytes");
  e.prev_hash = *prev;
  core::check_audit_input(e);
  const std::string hash = core::audit_hash(e);
  return pg::bytea_value(hash).datum;
}

// audit_canonical_details(details jsonb) -> text
FY_FUNCTION(fy_audit_canonical_details) {
  require_utf8();
  const std::optional<std::string> d = pg::optional_jsonb_text_arg(fcinfo, 0);
  if (!d) throw core::Error(core::sqlstate::null_value, "details must not be NULL");
  return pg::text_value(core::canonical_details(*d)).datum;
}

// Trigger on audit_events: the log is append-only for every role.
FY_FUNCTION(fy_audit_append_only) {
  const char* operation = pg::trigger_operation(fcinfo);
  throw core::Error(core::sqlstate::append_only,
                    std::string("forgeyard.audit_events is append-only: ") + operation + " is not allowed",
                    "audit events are never changed or removed; append a correcting event instead");
}
