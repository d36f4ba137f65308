// What the queue functions share, split by phase like pgvector's hnsw*.c: queue.cpp (loading a
// queue, capacity usage and release), queue_create.cpp (create, alter, drop), queue_enqueue.cpp,
// queue_claim.cpp, queue_finish.cpp (ack, nack, extend), queue_admin.cpp (stats, dead letters),
// and maintain.cpp. client/src/sqlite/ pairs with these files one to one.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/flow.hpp"
#include "pg/spi.hpp"
#include "pg/table_access.hpp"

namespace fy::queue {

// The tenant and queue arguments (0 and 1) of every queue function, checked by the core.
std::string tenant_arg(FunctionCallInfo fcinfo);
std::string queue_arg(FunctionCallInfo fcinfo);

struct Queue {
  std::string tenant, name;
  pg::Value t, q;
  core::QueueOptions options;
  int slots = 1;
  bool flow = false;       // the catalog has flow control's columns and tables (flow_schema())
  std::int64_t lanes = 0;  // its ready lanes (queues.lanes; lane id = lanes * 8 + class), 0: none
};

// Whether the database has flow control's columns and tables (0.7.0); before ALTER EXTENSION
// UPDATE the library runs a 0.6.0 catalog, where every queue has the defaults.
bool flow_schema();
// The queue named by the first two arguments, after the tenant check; 42704 if it does not exist.
// `producing`: the call adds messages, and keeps the queue from being dropped until it commits.
Queue load(pg::Spi& spi, FunctionCallInfo fcinfo, bool producing = false);
// The same for names already checked (the tenant too), e.g. the subscriptions of a topic.
Queue load(pg::Spi& spi, const std::string& tenant, const std::string& name, bool producing);
// Takes room for one message of `bytes` in a capacity slot (FY020 when no slot admits the
// class) and returns the slot.
// `seen`, when given, receives the slot's usage read under its lock, before this message.
int admit(pg::Spi& spi, const Queue& queue, int priority, std::int64_t bytes, core::Usage* seen = nullptr);
// Takes `count` tokens of the queue's admission limit, if it has one (FY020 with a retry-after
// otherwise), and decides whether a nack's retry fits the queue's retry budget, if it has one
// (queue_flow.cpp).
void admit_rate(pg::Spi& spi, const Queue& queue, std::int64_t count, TimestampTz now);
// The tenant's configured resources (flow_resources), cached per backend until the table changes;
// empty before 0.7.0's catalog. Read before any direct table access of a call (it runs SQL).
using ResourceConfigs = std::map<std::string, core::flow::ResourceConfig, std::less<>>;
const ResourceConfigs& resource_configs(pg::Spi& spi, const Queue& queue);
// A resource's state row as the core sees it, from the columns of the row in the table's slot,
// and written back into that row (locked by this transaction), `refused` claims added to its
// count (queue_flow.cpp).
core::flow::ResourceState resource_state_of(const pg::Table& table);
void write_resource_state(pg::Table& table, const core::flow::ResourceState& state, std::int64_t refused);
// Finds part `part` of a resource's state in `table`'s slot (flow_resource_state_pkey).
bool find_resource_part(pg::Table& table, const pg::Value& tenant, const std::string& resource, int part);

core::flow::RetryDecision admit_retry(pg::Spi& spi, const Queue& queue, TimestampTz now);
// Counts `n` new pending messages into their key's row (core::group_key: the partition_key of a
// partition-ordered queue, the fairness_key of a queue with max_in_flight_per_key) and returns how
// many of them, from the first, are heads (claimable): all of them for a message of no key.
std::int64_t join_key(pg::Spi& spi, const Queue& queue, const std::optional<std::string>& key, std::int64_t n = 1);
// A fair queue's passes for `n` new messages of one key and class (queue_enqueue.cpp): after the
// key's last pass or the class's lowest pending pass, whichever is later (the queue's highest
// last pass when the class has none), one step of the key's weight apart. None elsewhere.
std::vector<std::int64_t> fair_passes(pg::Spi& spi, const Queue& queue, int priority,
                                      const std::optional<std::string>& fairness_key, std::int64_t n);
// The shared counter rows a transaction holds locked to its end (capacity slots, admission
// buckets, resource parts, retry windows), in one order of (tenant, queue or resource, kind,
// index) that every backend uses. A call waits for such a row only if it comes after every one
// its transaction holds: along a chain of transactions each waiting for the next, the rows waited
// for would ascend, so the chain cannot close into a cycle (docs/architecture.md, "Locks held to
// commit"). A row it may not wait for is passed over, and the call does what it does when the row
// is held: a producer is refused (FY020, or an admission limit's refusal) only near a limit,
// never past it; a claim leaves the message ready; a retry waits for its window's end. Kept per
// backend for its current transaction (a rolled-back subtransaction's locks stay counted: that
// only passes over more).
// (Within a queue, the order an enqueue takes them in: its capacity slot, then its admission bucket.)
enum class HeldRow : char { capacity_slot = 'c', admission_bucket = 'd', resource_part = 'p', retry_window = 'w' };
// `name`: the queue's, or a resource part's resource.
std::string held_key(const std::string& tenant, const std::string& name, HeldRow kind, int index);
inline std::string held_key(const Queue& queue, HeldRow kind, int index) {
  return held_key(queue.tenant, queue.name, kind, index);
}
class HeldRows {
 public:
  bool may_wait(const std::string& key);
  void took(const std::string& key);

 private:
  void reset_if_new_transaction();
  std::uint32_t transaction_ = 0;  // (0: no transaction yet)
  std::set<std::string> held_;
};
HeldRows& held_rows();

// Messages and bytes admitted and not yet released, summed over the slots.
core::Usage usage(pg::Spi& spi, const Queue& queue);
// What the catalog keeps of a slot's counts beside its two rows: release deltas (0.7.1 on),
// admission generations too (0.12.0 on). The library runs on the older catalogs until ALTER
// EXTENSION UPDATE.
enum class SlotCounts { rows, release_deltas, admit_deltas };
SlotCounts slot_counts();
// A query of each slot's usage ($1 tenant, $2 queue; slot, messages, bytes; the slot as `a`): its
// admitted counts (with its generation row's) less its release row's and its release deltas',
// as far as `counts` has them.
std::string slot_usage_sql(SlotCounts counts);
// Whether the delta tables of the counts are in segments (0.14.0: queue_release_deltas_0..3 and
// queue_admit_deltas_0..3, LIST partitions by the ten-second period of the row's generation).
bool usage_segments_schema();
enum class Deltas { release, admit };
// A delta table of the counts opened below SPI: from 0.14.0 its four segments, each opened when
// first used (a generation's rows are all in one of them); before, the one table.
class DeltaTables {
 public:
  DeltaTables(pg::Access& access, Deltas kind);
  // The segment of generation `gen` (release: 100 ms units; admit: seconds), and its index on
  // (tenant_id, queue, slot, gen).
  pg::Table& at(std::int64_t gen) { return segment(segment_of(gen)); }
  pg::OwnIndex index_at(std::int64_t gen) const { return index(segment_of(gen)); }
  // The segments one by one, for a scan over all of them.
  int count() const { return segmented_ ? 4 : 1; }
  // The segments that can hold generations from `from` to `to` - 1 (all four when they span four
  // periods or more), for a fold of that range.
  std::vector<int> holding(std::int64_t from, std::int64_t to) const;
  pg::Table& segment(int i);
  pg::OwnIndex index(int i) const;
  void finish();

 private:
  int segment_of(std::int64_t gen) const;
  pg::Access& access_;
  Deltas kind_;
  bool segmented_;
  std::array<std::optional<pg::Table>, 4> tables_;
};
// The room given back to a slot as deltas of its release row (queue_release_deltas), read by the
// open tables' snapshot.
core::Usage slot_deltas(DeltaTables& deltas, const Queue& queue, int slot);
// Inserts a queue with its capacity counters; false (and nothing changed) if it exists.
bool insert_queue(pg::Spi& spi, const std::string& tenant, const std::string& name, const core::QueueOptions& options);
// The queue with default options unless it exists (a workflow's definition queue). Looked up
// first: the INSERT, even one that inserts nothing, fires the statement trigger that drops every
// backend's cache of queue options.
void ensure_queue(pg::Spi& spi, const std::string& tenant, const std::string& name);
// An integer argument in 1..max (22023 otherwise, 22004 for NULL).
std::int32_t positive_int_arg(FunctionCallInfo fcinfo, int n, const char* argument, std::int32_t max);

// Messages that left the live queue (acked or dead) in one call: their capacity goes back to
// their slots, and in a partition queue the next message of each key becomes its head. Applied
// once per slot and per key, in ascending order, so that concurrent batch acks lock the shared
// counter rows in one order and cannot deadlock.
struct Releases {
  std::map<int, core::Usage> slots;
  std::map<std::string, std::int64_t> keys;
  // How deliveries bound to resources ended: per resource and part of its state
  // (messages.resource_part), in order (success, failure, neutral).
  std::map<std::pair<std::string, int>, std::array<std::int64_t, 3>> outcomes;
  // `key`: the message's core::group_key (none: not counted by key).
  void add(const Queue& queue, int slot, std::int64_t bytes, const std::optional<std::string>& key);
  void outcome(const std::optional<std::string>& resource, int part, core::flow::Outcome outcome);
};
void apply(pg::Spi& spi, const Queue& queue, const Releases& releases);
// Applies the outcomes recorded for a resource part while it was held by another transaction
// (flow_outcome_deltas, opened as `deltas`) to `state`, the part's row being locked by the caller,
// and deletes them; each is locked SKIP LOCKED first, so one that another caller folds is left to
// it. Part 0 also takes those of parts at or past `parts` (the resource's number of parts now).
// `config` is the part's share of the limits. Whether any was applied.
bool fold_outcomes(pg::Table& deltas, const pg::Value& tenant, const std::string& resource, int part, int parts,
                   const core::flow::ResourceConfig& config, core::flow::ResourceState& state, TimestampTz now);
// Records the outcomes of `releases` on their resources, never waiting for a part another
// transaction holds (queue_flow.cpp; apply() calls it).
void record_outcomes(pg::Spi& spi, const Queue& queue, const Releases& releases, TimestampTz now);

// One delivery handed out by claim.
struct Claimed {
  std::int64_t msg_id;
  std::optional<std::string> event_id, partition_key;
  int priority;
  std::int64_t attempt, claim_token;
  std::optional<std::string> payload;
  TimestampTz enqueued_at;
};
// Up to max_messages deliveries, highest class first, then oldest (queue_claim.cpp). Deliveries
// that lapsed on every attempt are dead-lettered instead; with `lapsed`, they are appended there
// (as they were before, payload included) for a caller that owns what they stood for.
struct FirstCandidates;
std::vector<Claimed> claim(pg::Spi& spi, const Queue& queue, const std::string& consumer, int max_messages,
                           std::int64_t visibility, TimestampTz now, std::vector<Claimed>* lapsed = nullptr,
                           const FirstCandidates* first = nullptr);
// How many more candidates than it may take a claim reads per lane and class (each read costs a
// message lookup; more are read when the claim comes out short).
inline constexpr int claim_extra_candidates = 4;
// The ready lanes (queue_lanes.cpp, 0.10.0). Whether the catalog has them:
bool lanes_schema();
// Whether its entries are in segments (0.13.0: queue_lane_entries_0..3), not queue_lanes.
bool segments_schema();
// A message a claim tries: from a lane (pos, its listing) or from messages_claim (pos 0), with
// the class it competes in (`aged`: its own without aging) and since when it is visible;
// `lapsed`: a listed one that was delivered before (its claim lapsed).
struct Candidate {
  std::int64_t msg_id;
  int priority, aged;
  std::int64_t pos;
  TimestampTz visible_at;
  bool lapsed = false;
};
// Where a claim's reads of its lanes got to (per class, the last position read; 0: none yet), so
// that a second read goes on from there, and whether any read stopped at what was asked for (more
// may be ready).
struct LaneReads {
  std::array<std::int64_t, core::priority_classes> after{};
  bool cut = false;
};
// The candidates of a claim in a queue that is not a fair one, in no order: per lane, up to
// `want` ready entries above its cursor (or above where `reads` got to; none without `lanes`),
// then up to `due_want` ready heads without a listing per class. Moves each lane's cursor over the
// consumed run it read, if the transaction has written nothing yet.
std::vector<Candidate> candidates(pg::Spi& spi, const Queue& queue, int want, int due_want, TimestampTz now,
                                  LaneReads* reads, bool lanes = true);
// ack_and_claim's read of its lanes before its acks write, which moves their cursors (the claim
// after the acks cannot: it would count the transaction's own acks as consumed): up to `want`
// ready entries per lane and where the reads got to, which the claim takes as its first
// candidates. None for a queue without lanes or a fair one, or when the transaction has written.
struct FirstCandidates {
  std::vector<Candidate> lanes;
  LaneReads reads;
};
std::optional<FirstCandidates> first_candidates(pg::Spi& spi, const Queue& queue, int want, TimestampTz now);
// Lists new messages (ids, not yet inserted) of one class in their lane: msg_id -> position.
// None in a queue without lanes or a fair one; one whose position maintain() voided meanwhile is
// left out (messages_claim finds it).
std::map<std::int64_t, std::int64_t> list(pg::Spi& spi, const Queue& queue, int priority,
                                          const std::vector<std::int64_t>& msg_ids);

// The rows of claim and ack_and_claim.
void return_claimed(FunctionCallInfo fcinfo, const std::vector<Claimed>& claimed);
// The max_messages argument of a claim (1..max_claim_batch), and its visibility (the queue's
// visibility_timeout when NULL).
int max_messages_arg(FunctionCallInfo fcinfo, int n);
std::int64_t visibility_arg(FunctionCallInfo fcinfo, int n, const Queue& queue);

// The claim statement of up to `limit` messages ($1 tenant, $2 queue, $3 visible until,
// $4 consumer, $5 now), highest class first: per class an index range scan that stops at the
// first message not yet visible. Planned once per backend and limit, generic (queue_claim.cpp).
std::string claim_sql(int limit, bool flow);
pg::Statement& claim_statement(int limit);

}  // namespace fy::queue
