// Consuming: claim, one statement over the priority classes, and the dead-lettering of deliveries
// that lapsed on every attempt (docs/sql-api.md#queues).
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pg/args.hpp"
#include "pg/clock.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"
#include "pg/table_cache.hpp"
#include "queue.hpp"
#include "tenant.hpp"

namespace fy::queue {

// The claim: one statement. Per class, highest first, an index range scan of messages_claim that
// stops at the first message not yet visible, skipping rows other claimers hold; the classes are
// the branches of one Append under the limit, so an empty class costs one index descent and a
// class after the limit is filled is never read. The limit is part of the statement text (one
// kept plan per limit asked for), so the generic plan, planned once per backend, is the index
// scan whatever the depth: never a scan or sort of the queue, never planned again per call. The
// rows picked (and locked) are updated by their tuple ids: a nested loop over a Tid Scan, whatever
// the table size was when the plan was made (a row we locked cannot move under us).
std::string claim_sql(int limit, bool flow) {
  const std::string n = std::to_string(limit);
  // (From 0.7.0 on, messages_claim holds the messages without a fair queue's pass only.)
  // (From 0.10.0 on, it holds the heads without a listing in a ready lane only.)
  const std::string no_pass =
      std::string(flow ? " AND c.pass IS NULL" : "") + (lanes_schema() ? " AND c.ready_pos IS NULL" : "");
  std::string picks;
  for (int p = 0; p < core::priority_classes; ++p) {
    if (p > 0) picks += " UNION ALL ";
    picks +=
        "SELECT * FROM (SELECT c.ctid FROM forgeyard.messages c"
        "  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2"
        "    AND c.priority OPERATOR(pg_catalog.=) " +
        std::to_string(p) + "::pg_catalog.int2 AND c.state OPERATOR(pg_catalog.=) 'pending' AND c.is_head" + no_pass +
        "    AND c.visible_at OPERATOR(pg_catalog.<=) $5"
        "  ORDER BY c.visible_at, c.msg_id LIMIT " +
        n + " FOR UPDATE SKIP LOCKED) c" + std::to_string(p);
  }
  return "WITH picked AS (" + picks + " LIMIT " + n +
         ")"
         " UPDATE forgeyard.messages m SET claim_token = pg_catalog.nextval('forgeyard.claim_tokens'),"
         "   attempt = m.attempt OPERATOR(pg_catalog.+) 1, visible_at = $3, claimed_by = $4"
         "  FROM picked WHERE m.ctid OPERATOR(pg_catalog.=) picked.ctid"
         " RETURNING m.msg_id, m.event_id, m.partition_key, m.priority, m.attempt, m.claim_token,"
         // A subscription's message has no payload of its own: it is its topic event's (topic_claim.cpp).
         "   COALESCE(m.payload, (SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e"
         "      ON e.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND e.topic OPERATOR(pg_catalog.=) s.topic"
         "     WHERE s.tenant_id OPERATOR(pg_catalog.=) m.tenant_id AND s.subscription OPERATOR(pg_catalog.=) m.queue"
         "       AND e.event_id OPERATOR(pg_catalog.=) m.event_id)),"
         "   m.enqueued_at, m.slot, m.bytes";
}

pg::Statement& claim_statement(int limit) {
  return pg::Statement::cached(claim_sql(limit, flow_schema()),
                               {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID}, pg::Planning::generic);
}

namespace {

// The columns of forgeyard.messages that the claim reads and writes.
struct MessageColumns {
  int msg_id, tenant_id, queue, state, priority, partition_key, is_head, event_id, payload, bytes, slot, enqueued_at,
      visible_at, attempt, claim_token, claimed_by;
  explicit MessageColumns(const pg::Table& m)
      : msg_id(m.column("msg_id")),
        tenant_id(m.column("tenant_id")),
        queue(m.column("queue")),
        state(m.column("state")),
        priority(m.column("priority")),
        partition_key(m.column("partition_key")),
        is_head(m.column("is_head")),
        event_id(m.column("event_id")),
        payload(m.column("payload")),
        bytes(m.column("bytes")),
        slot(m.column("slot")),
        enqueued_at(m.column("enqueued_at")),
        visible_at(m.column("visible_at")),
        attempt(m.column("attempt")),
        claim_token(m.column("claim_token")),
        claimed_by(m.column("claimed_by")) {}
};

// The subscription's topic event payload of a message that has none of its own (topic_claim.cpp).
std::optional<std::string> event_payload(pg::Spi& spi, const Queue& queue, const std::string& event_id) {
  static pg::Statement read(
      "SELECT e.payload FROM forgeyard.subscriptions s JOIN forgeyard.topic_events e"
      "   ON e.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND e.topic OPERATOR(pg_catalog.=) s.topic"
      " WHERE s.tenant_id OPERATOR(pg_catalog.=) $1 AND s.subscription OPERATOR(pg_catalog.=) $2"
      "   AND e.event_id OPERATOR(pg_catalog.=) $3",
      {TEXTOID, TEXTOID, UUIDOID});
  std::optional<std::string> payload;
  spi.run(read, {queue.t, queue.q, pg::uuid_value(event_id)}, [&](const pg::Row& r) { payload = r.bytea(1); });
  return payload;
}

// The candidates of a claim (queue_lanes.cpp) in the order they are tried: by the class each
// has aged into (queue option aging; its own class without it), then by age. Within a class the
// older message is never in a lower aged class, so the first max_messages of that order are among
// them.
std::vector<Candidate> ordered_candidates(pg::Spi& spi, const Queue& queue, int want, int due_want, TimestampTz now,
                                          LaneReads& reads, const FirstCandidates* first = nullptr) {
  std::vector<Candidate> out = candidates(spi, queue, want, due_want, now, &reads, first == nullptr);
  if (first != nullptr) out.insert(out.end(), first->lanes.begin(), first->lanes.end());
  if (queue.options.aging_usecs > 0)
    for (Candidate& c : out) c.aged = core::aged_class(c.priority, now - c.visible_at, queue.options.aging_usecs);
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.aged != b.aged) return a.aged < b.aged;
    return a.visible_at != b.visible_at ? a.visible_at < b.visible_at : a.msg_id < b.msg_id;
  });
  return out;
}

}  // namespace

// The claim below SPI (pg/table_access.hpp), the same work as claim_sql(): per class, highest
// first, the visible heads of messages_claim in (visible_at, msg_id) order, each row locked FOR
// UPDATE SKIP LOCKED (a newer version followed is re-checked against the scan's conditions, as
// EvalPlanQual would) and updated at once with its claim token. The classes after the limit is
// filled are never opened.
std::vector<Claimed> claim(pg::Spi& spi, const Queue& queue, const std::string& consumer, int max_messages,
                           std::int64_t visibility, TimestampTz now, std::vector<Claimed>* lapsed_out,
                           const FirstCandidates* first) {
  // A delivery that lapsed once too often (its consumer died or hung every time) is not handed
  // out again: it is dead-lettered like a nack after max_attempts.
  static pg::Statement dead(
      "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, is_head = false,"
      "   last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
      "   payload = CASE WHEN $3 THEN payload END"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, BOOLOID});
  static pg::Statement dead_listed(
      "UPDATE forgeyard.messages SET state = 'dead', claim_token = NULL, finished_at = $2, is_head = false,"
      "   ready_pos = NULL, last_error = 'the visibility ran out on every attempt', error_class = 'max_attempts',"
      "   payload = CASE WHEN $3 THEN payload END"
      " WHERE msg_id OPERATOR(pg_catalog.=) $1",
      {INT8OID, TIMESTAMPTZOID, BOOLOID});
  std::vector<Claimed> out;
  std::vector<std::int64_t> doomed;
  Releases lapsed;
  // The tenant's resources, read before the direct access (it runs SQL); none configured: the
  // claim never looks at a message's resource.
  const ResourceConfigs& configs = resource_configs(spi, queue);
  const bool fair = queue.options.fairness;
  // A few more candidates per lane and class than asked for (each one read costs a message
  // lookup); see the loop below for when more are read.
  // (ack_and_claim read its lanes before its acks: `first`, and where those reads got to.)
  constexpr int few_more = claim_extra_candidates, most_more = 1 << 27;
  LaneReads reads = first != nullptr ? first->reads : LaneReads{};
  const std::vector<Candidate> tried =
      fair ? std::vector<Candidate>{}
           : ordered_candidates(spi, queue, max_messages + few_more, max_messages + few_more, now, reads, first);
  pg::Access access;
  pg::Table m(access, pg::OwnTable::messages);
  const MessageColumns c(m);
  const int resource_col = configs.empty() ? 0 : m.column("resource");
  const int resource_part_col = configs.empty() ? 0 : m.column("resource_part");
  // What a lapsed delivery is counted under in queue_partitions (core::group_key).
  const int key_col = queue.options.max_in_flight_per_key > 0 ? m.column("fairness_key") : c.partition_key;
  const pg::Value until = pg::timestamptz_value(now + visibility);
  const pg::Value claimed_by = pg::text_value(consumer);
  // Does the newest version of a locked row still qualify for class p?
  auto still_ready = [&](int p) {
    return m.text_equals(c.state, "pending") && m.boolean(c.is_head) && m.int2(c.priority) == p &&
           m.timestamptz(c.visible_at) <= now && m.text_equals(c.tenant_id, queue.tenant) &&
           m.text_equals(c.queue, queue.name);
  };
  // ... and is it still listed where the candidate was found (its lane's position, or none)?
  const int ready_col = lanes_schema() ? m.column("ready_pos") : 0;
  auto still_listed = [&](const Candidate& a) {
    if (!still_ready(a.priority)) return false;
    if (ready_col == 0) return true;
    return a.pos > 0 ? !m.is_null(ready_col) && m.int8(ready_col) == a.pos : m.is_null(ready_col);
  };
  // The resources this claim met, per part of their state (flow_resources.parts): each part's
  // row locked at its first use, decided on in memory, written once after the scan.
  struct Part {
    bool tried = false;  // its lock was tried (a part another claim holds is not tried again)
    bool found = false;
    bool locked = false;
    core::flow::ResourceConfig config;  // its share of the resource's limits
    core::flow::ResourceState state;
    std::int64_t refused = 0;
    bool changed = false;
  };
  struct Held {
    std::vector<Part> parts;
    int start = 0;  // the part tried first: per claim in turn, so that claimers spread over them
  };
  std::map<std::string, Held, std::less<>> held;
  static unsigned rotation = static_cast<unsigned>(MyProcPid);
  bool holding = false;           // a resource row is locked by this claim
  const Part* in_slot = nullptr;  // the part whose locked row is in the table's slot
  int admitted_part = -1;         // the part the message just admitted is newly counted in
  // Opened before the scan (opening a relation takes in invalidations).
  std::optional<pg::Table> resources, outcome_deltas;
  if (resource_col != 0) resources.emplace(access, pg::OwnTable::flow_resource_state);
  if (resource_col != 0 && pg::has_table(pg::CachedTable::flow_outcome_deltas))
    outcome_deltas.emplace(access, pg::OwnTable::flow_outcome_deltas);
  // A part locked: its state read, with the outcomes recorded while others held it folded in.
  auto lock_part = [&](const std::string& resource, Part& part, int i, pg::Wait wait) {
    part.tried = true;
    in_slot = nullptr;
    part.found = find_resource_part(*resources, queue.t, resource, i);
    if (!part.found) return;  // made a moment ago, not yet visible
    part.locked = resources->lock(pg::LockMode::no_key_update, wait) != pg::Locked::skipped;
    if (!part.locked) return;
    holding = true;
    in_slot = &part;
    held_rows().took(held_key(queue.tenant, resource, HeldRow::resource_part, i));
    part.state = resource_state_of(*resources);
    if (outcome_deltas && fold_outcomes(*outcome_deltas, queue.t, resource, i, configs.find(resource)->second.parts,
                                        part.config, part.state, now))
      part.changed = true;
  };
  auto admit = [&](Part& part, int i, bool transfer) {
    part.changed = true;
    if (core::flow::admit_delivery(part.config, part.state, now, transfer) != core::flow::Refusal::none) return false;
    if (!transfer) admitted_part = i;
    return true;
  };
  // Whether the message in m's slot may be handed out now, as far as its resource goes: the first
  // part that admits it, from the claim's starting part on.
  auto resource_allows = [&](bool transfer) {
    admitted_part = -1;
    const std::optional<std::string> resource = m.text(resource_col);
    if (!resource) return true;
    const auto config = configs.find(*resource);
    if (config == configs.end()) return true;
    const int n = config->second.parts;
    auto [it, first] = held.try_emplace(*resource);
    Held& h = it->second;
    if (first) {
      h.parts.resize(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) h.parts[i].config = core::flow::part_config(config->second, i);
      h.start = n > 1 ? static_cast<int>(rotation++ % static_cast<unsigned>(n)) : 0;
    }
    Part* refusing = nullptr;
    bool any_found = false;
    for (int k = 0; k < n; ++k) {
      const int i = (h.start + k) % n;
      Part& part = h.parts[i];
      // Parts are taken without waiting: one another claim holds is passed over.
      if (!part.tried) lock_part(*resource, part, i, pg::Wait::skip);
      any_found = any_found || part.found;
      if (!part.locked) continue;
      if (admit(part, i, transfer)) return true;
      if (refusing == nullptr) refusing = &part;
    }
    if (!any_found) return true;  // configured a moment ago, its state not yet visible: not limited
    if (refusing == nullptr && !holding &&
        held_rows().may_wait(held_key(queue.tenant, *resource, HeldRow::resource_part, h.start))) {
      // Every part is held by others and this claim holds no resource row: the starting part is
      // waited for (a row is held only while a claim, ack or nack of it commits; skipping would hand out
      // nothing while its work is ready), if its transaction may wait for it (held_rows()). A
      // claim that holds a row waits for none, so no two claims wait for each other.
      Part& part = h.parts[h.start];
      if (part.found) lock_part(*resource, part, h.start, pg::Wait::block);
      if (part.locked && admit(part, h.start, transfer)) return true;
      if (part.locked) refusing = &part;
    }
    if (refusing != nullptr) ++refusing->refused;
    return false;
  };
  // One scan from the highest class down, restarted only at a class's first row not yet visible
  // (the rest of that class is later still): an empty class costs nothing, where a range per
  // class cost an index descent each (three of the four claim descents of a one-class queue).
  auto from_class = [&](int p) {
    return std::array<pg::Key, 3>{{{1, pg::Compare::eq, queue.t},
                                   {2, pg::Compare::eq, queue.q},
                                   {3, pg::Compare::ge, {Int16GetDatum(static_cast<std::int16_t>(p)), false}}}};
  };
  // The message in m's slot, locked and ready in class p: handed out, or dead-lettered when its
  // delivery lapsed on every attempt, or left ready when its resource refuses it.
  auto hand_out = [&](int p) {
    const std::int64_t attempt = static_cast<std::int64_t>(m.int4(c.attempt)) + 1;
    // A resource that refuses leaves the message ready, no attempt charged. (A delivery that lapsed
    // on every attempt is dead-lettered whatever its resource says.)
    if (resource_col != 0 && attempt <= queue.options.max_attempts && !resource_allows(!m.is_null(c.claim_token)))
      return;
    const std::int64_t token = pg::next_value(pg::CachedTable::claim_tokens);
    const std::int64_t msg_id = m.int8(c.msg_id);
    // Lapsed deliveries taken here do not count: the scan goes on for the rest (they are now
    // locked and no longer visible, so they are not taken twice).
    if (attempt > queue.options.max_attempts) {
      lapsed.add(queue, m.int2(c.slot), m.int8(c.bytes), m.text(key_col));
      if (resource_col != 0)
        lapsed.outcome(m.text(resource_col), m.is_null(resource_part_col) ? 0 : m.int2(resource_part_col),
                       core::flow::Outcome::neutral);
      doomed.push_back(msg_id);
      if (lapsed_out != nullptr)
        lapsed_out->push_back({msg_id, m.uuid(c.event_id), m.text(c.partition_key), p, attempt, token,
                               m.bytea(c.payload), m.timestamptz(c.enqueued_at)});
    } else {
      out.push_back({msg_id, m.uuid(c.event_id), m.text(c.partition_key), p, attempt, token, m.bytea(c.payload),
                     m.timestamptz(c.enqueued_at)});
    }
    const pg::Value attempt_value = pg::int4_value(static_cast<std::int32_t>(attempt)),
                    token_value = pg::int8_value(token);
    // A claim for longer than a listing may stay open leaves its lane (core::max_listed_claim_usecs).
    const bool unlist = ready_col != 0 && visibility > core::max_listed_claim_usecs && !m.is_null(ready_col);
    if (admitted_part >= 0 && unlist)
      m.update({{c.attempt, attempt_value},
                {c.claim_token, token_value},
                {c.visible_at, until},
                {c.claimed_by, claimed_by},
                {resource_part_col, pg::int2_value(static_cast<std::int16_t>(admitted_part))},
                {ready_col, pg::null_value()}});
    else if (admitted_part >= 0)
      m.update({{c.attempt, attempt_value},
                {c.claim_token, token_value},
                {c.visible_at, until},
                {c.claimed_by, claimed_by},
                {resource_part_col, pg::int2_value(static_cast<std::int16_t>(admitted_part))}});
    else if (unlist)
      m.update({{c.attempt, attempt_value},
                {c.claim_token, token_value},
                {c.visible_at, until},
                {c.claimed_by, claimed_by},
                {ready_col, pg::null_value()}});
    else
      m.update({{c.attempt, attempt_value},
                {c.claim_token, token_value},
                {c.visible_at, until},
                {c.claimed_by, claimed_by}});
  };
  if (!fair) {
    // The candidates read before, in order, each found by its key and taken if it is still ready
    // in its own class where it was found (its listing, or none).
    std::set<std::int64_t> seen;
    auto try_each = [&](const std::vector<Candidate>& list) {
      for (const Candidate& a : list) {
        if (static_cast<int>(out.size()) >= max_messages) break;
        if (!seen.insert(a.msg_id).second) continue;
        if (!m.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(a.msg_id)}}) || !still_listed(a))
          continue;
        const pg::Locked locked = m.lock(pg::LockMode::update, pg::Wait::skip);
        if (locked == pg::Locked::skipped) continue;
        if (locked == pg::Locked::newer_version && !still_listed(a)) continue;
        hand_out(a.priority);
      }
    };
    // The candidates were read before this call's snapshot: others may have taken them since, or
    // hold them now. While the claim is short and a read stopped at what was asked for, more are
    // read: the lanes on from where their reads got to, the heads without a listing again with
    // eight times more (those tried are passed over).
    // A lapsed delivery still listed in its lane (delivered before, ready again) leaves the lane
    // when a claim meets it, if no one holds it, and is tried as a head without a listing: it
    // comes after every message visible since before its lapse, so listed it would stop its lane's
    // cursor until it is claimed again, and every claim would walk what was consumed past it
    // meanwhile (extension/queue_lanes.sql, queue_candidates: the same in the PL/pgSQL edition).
    auto unlist_lapsed = [&](std::vector<Candidate>& list) {
      bool wrote = false;
      for (Candidate& a : list) {
        if (!a.lapsed) continue;
        a.lapsed = false;
        if (!m.find(pg::OwnIndex::messages_pkey, {{1, pg::Compare::eq, pg::int8_value(a.msg_id)}}) || !still_listed(a))
          continue;
        const pg::Locked locked = m.lock(pg::LockMode::update, pg::Wait::skip);
        if (locked == pg::Locked::skipped || (locked == pg::Locked::newer_version && !still_listed(a))) continue;
        m.update({{ready_col, pg::null_value()}});
        a.pos = 0;
        wrote = true;
      }
      if (wrote) access.next_command();
    };
    std::vector<Candidate> list = tried;
    for (int extra = few_more;; extra *= 8) {
      if (ready_col != 0) unlist_lapsed(list);
      try_each(list);
      if (static_cast<int>(out.size()) >= max_messages || !reads.cut || extra >= most_more) break;
      reads.cut = false;
      list = ordered_candidates(spi, queue, max_messages + few_more, max_messages + extra * 8, now, reads);
    }

  } else {
    // A fair queue's classes are in pass order (messages_fair), where a row not yet visible (in
    // flight, or delayed) says nothing of the rows after it: it is skipped, not a stop.
    const std::array<pg::Key, 3> first = from_class(0);
    pg::Table::Scan scan(m, fair ? pg::OwnIndex::messages_fair : pg::OwnIndex::messages_claim, first);
    while (static_cast<int>(out.size()) < max_messages && scan.next()) {
      const int p = m.int2(c.priority);
      if (m.timestamptz(c.visible_at) > now) {
        if (fair) continue;
        if (p + 1 >= core::priority_classes) break;
        const std::array<pg::Key, 3> next = from_class(p + 1);
        scan.restart(next);
        continue;
      }
      const pg::Locked locked = m.lock(pg::LockMode::update, pg::Wait::skip);
      if (locked == pg::Locked::skipped) continue;
      if (locked == pg::Locked::newer_version && !still_ready(p)) continue;
      hand_out(p);
    }
    scan.end();
  }
  // The row in the slot is written as it is; another is found again (its lock, already held, then
  // gives the version locked, which this call's snapshot may not see).
  for (const auto& [resource, h] : held)
    for (std::size_t i = 0; i < h.parts.size(); ++i) {
      const Part& part = h.parts[i];
      if (part.locked && part.changed &&
          (in_slot == &part ||
           (find_resource_part(*resources, queue.t, resource, static_cast<int>(i)) &&
            resources->lock(pg::LockMode::no_key_update, pg::Wait::block) != pg::Locked::skipped))) {
        write_resource_state(*resources, part.state, part.refused);
        in_slot = nullptr;  // the slot holds the written row's new version now
      }
    }
  if (outcome_deltas) outcome_deltas->finish();
  if (resources) resources->finish();
  m.finish();
  access.finish();
  // A subscription's message has no payload of its own: it is its topic event's.
  for (Claimed& d : out)
    if (!d.payload && d.event_id) d.payload = event_payload(spi, queue, *d.event_id);
  // Delivery order: class, then oldest first (the scan's order within a class is visible_at); a
  // fair queue's is the scan's (class, then pass).
  if (!fair)
    std::sort(out.begin(), out.end(), [](const Claimed& a, const Claimed& b) {
      return a.priority != b.priority ? a.priority < b.priority : a.msg_id < b.msg_id;
    });
  for (std::int64_t msg_id : doomed)
    spi.run(lanes_schema() ? dead_listed : dead,
            {pg::int8_value(msg_id), pg::timestamptz_value(now), pg::bool_value(queue.options.keep_dead_payload)});
  apply(spi, queue, lapsed);
  return out;
}

void return_claimed(FunctionCallInfo fcinfo, const std::vector<Claimed>& claimed) {
  pg::TableResult out(fcinfo);
  for (const Claimed& m : claimed)
    out.add_row({pg::int8_value(m.msg_id), pg::optional_uuid_value(m.event_id),
                 pg::optional_text_value(m.partition_key), pg::text_value(core::priority_names[m.priority]),
                 pg::int4_value(static_cast<int>(m.attempt)), pg::int8_value(m.claim_token),
                 pg::optional_bytea_value(m.payload), pg::timestamptz_value(m.enqueued_at)});
}

int max_messages_arg(FunctionCallInfo fcinfo, int n) {
  return positive_int_arg(fcinfo, n, "max_messages", core::max_claim_batch);
}

std::int64_t visibility_arg(FunctionCallInfo fcinfo, int n, const Queue& queue) {
  const std::optional<core::Duration> d = pg::optional_interval_arg(fcinfo, n);
  return d ? core::check_duration("visibility", *d, core::max_queue_duration_usecs) : queue.options.visibility_usecs;
}

}  // namespace fy::queue

using namespace fy;
using namespace fy::queue;

// claim(tenant, queue, consumer, max_messages, visibility) -> up to max_messages deliveries
FY_FUNCTION(fy_claim) {
  pg::Spi spi;
  const Queue queue = load(spi, fcinfo);
  const std::string consumer = pg::name_arg(fcinfo, 2, "consumer", core::max_consumer_bytes);
  const int max_messages = max_messages_arg(fcinfo, 3);
  const std::int64_t visibility = visibility_arg(fcinfo, 4, queue);
  const std::vector<Claimed> claimed = claim(spi, queue, consumer, max_messages, visibility, pg::now());
  spi.finish();
  return_claimed(fcinfo, claimed);
  return (Datum)0;
}
