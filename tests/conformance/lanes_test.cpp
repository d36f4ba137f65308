// Ready lanes (docs/architecture.md, "Ready lanes"; F17): on PostgreSQL a claim starts at its
// lane's cursor, which moves over what committed work consumed whatever snapshot is held, and
// maintain() voids the positions rolled-back producers left. What a user sees is the same on
// every backend: these cases hold SQLite to the deliveries, PostgreSQL to the lanes as well.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::Delivery;
using forgeyard::OutgoingMessage;
using forgeyard::Priority;

namespace {
struct LanesFixture : conformance::Backend {
  std::string queue = "laned";
  forgeyard::Queues& queues() { return store->queues(); }
  std::int64_t send(const std::string& payload, Priority p = Priority::Interactive) {
    OutgoingMessage m;
    m.payload = payload;
    m.priority = p;
    return queues().enqueue(tenant, queue, m);
  }
  std::vector<Delivery> take(int n = 1) { return queues().claim(tenant, queue, "consumer-1", n); }
  // PostgreSQL: the lane of class p of the queue (its id), its last position taken and its cursor.
  struct Lane {
    std::int64_t last = 0, cursor = 0;
  };
  Lane lane(conformance::PgSession& s, int p) {
    const std::string id =
        s.value("SELECT lanes * 8 + " + std::to_string(p) + " FROM forgeyard.queues WHERE tenant_id = '" + tenant +
                "' AND queue = '" + queue + "'");
    BOOST_REQUIRE(!id.empty());
    Lane l;
    const std::string last = s.value("SELECT pg_sequence_last_value('forgeyard.lane_" + id + "'::regclass)");
    const std::string cursor = s.value("SELECT pg_sequence_last_value('forgeyard.lane_" + id + "_cursor'::regclass)");
    l.last = last.empty() ? 0 : std::stoll(last);
    l.cursor = cursor.empty() ? 0 : std::stoll(cursor);
    return l;
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(lanes, LanesFixture)

// A snapshot held open (REPEATABLE READ in a second session) keeps every version the claims and
// acks leave; the claims still deliver in order, and the lane's cursor passes every consumed
// entry: no claim steps over what was consumed before it (docs/queue-storage-design.md).
BOOST_AUTO_TEST_CASE(with_a_snapshot_held_open_the_cursor_passes_what_was_consumed) {
  queues().create(tenant, queue, {});
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 120; ++i) ids.push_back(send("m" + std::to_string(i)));
  std::optional<conformance::PgSession> holder;
  if (is_postgres()) {
    holder.emplace(url);
    holder->value("BEGIN ISOLATION LEVEL REPEATABLE READ");
    holder->value("SELECT count(*) FROM forgeyard.messages");
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::vector<Delivery> d = take();
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].msg_id == ids[i]);
    queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  }
  BOOST_TEST(take().empty());
  if (!is_postgres()) return;
  conformance::PgSession observer(url);
  const Lane l = lane(observer, 3);  // interactive
  BOOST_TEST(l.last == 120);
  BOOST_TEST(l.cursor == 120);
  // Listed messages never enter messages_claim: it holds none of this queue's.
  BOOST_TEST(observer.value("SELECT count(*) FROM forgeyard.messages WHERE tenant_id = '" + tenant + "' AND queue = '" +
                            queue + "' AND ready_pos IS NULL AND state = 'pending'") == "0");
  holder->value("COMMIT");
}

// A producer that rolls back leaves its position empty: the cursor stops there (claims pass it
// and still deliver), until maintain() voids it once the producer must have ended; the next
// claim then moves the cursor past it.
BOOST_AUTO_TEST_CASE(a_rolled_back_enqueue_leaves_a_gap_that_maintain_voids) {
  queues().create(tenant, queue, {});
  const std::int64_t a = send("a");
  {
    auto tx = store->begin();
    tx->queues().enqueue(tenant, queue, {"rolled back"});
    tx->rollback();
  }
  const std::int64_t b = send("b");
  for (const std::int64_t id : {a, b}) {
    const std::vector<Delivery> d = take();
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].msg_id == id);
    queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  }
  BOOST_TEST(take().empty());
  if (!is_postgres()) return;
  conformance::PgSession observer(url);
  Lane l = lane(observer, 3);
  BOOST_TEST(l.last == 3);
  BOOST_TEST(l.cursor == 1);  // stopped at the gap
  // The first pass marks the lane; a later one voids the gap once every transaction that was
  // running at the mark has ended (other suites on this cluster may keep one open a while).
  bool voided = false;
  for (int i = 0; i < 200 && !voided; ++i) {
    voided = observer.value(
                 "SELECT count(*) FROM forgeyard.queue_lane_entries WHERE msg_id IS NULL AND lane = (SELECT "
                 "lanes * 8 + 3 FROM forgeyard.queues WHERE tenant_id = '" +
                 tenant + "' AND queue = '" + queue + "')") == "1";
    if (!voided) {
      store->maintain(1000, tenant);
      std::this_thread::sleep_for(50ms);
    }
  }
  BOOST_TEST(voided);
  BOOST_TEST(take().empty());
  l = lane(observer, 3);
  BOOST_TEST(l.cursor == 3);
  // The entries behind the cursor are not deleted: they leave with their segment, once it is
  // sealed and everything in it is consumed (regress/lane_segments.sql, tests/pg/lane_segments.sh).
  store->maintain(1000, tenant);
  BOOST_TEST(observer.value("SELECT count(*) FROM forgeyard.queue_lane_entries WHERE lane = (SELECT lanes * 8 + 3 FROM "
                            "forgeyard.queues WHERE tenant_id = '" +
                            tenant + "' AND queue = '" + queue + "') AND pos > " + std::to_string(l.cursor)) == "0");
}

// What is not listed at enqueue (a retry after its backoff) competes with what is by age: the
// retry that became visible first is claimed before a message enqueued after that.
BOOST_AUTO_TEST_CASE(a_due_retry_and_a_listed_message_are_claimed_oldest_first) {
  forgeyard::QueueOptions o;
  o.backoff_base = 1s;
  o.backoff_max = 1s;
  queues().create(tenant, queue, o);
  const std::int64_t a = send("a");
  std::vector<Delivery> d = take();
  BOOST_REQUIRE(d.size() == 1u);
  queues().nack(tenant, queue, a, d[0].claim_token, "boom");
  clock.advance(2s);  // the retry is visible (after at most its backoff)
  const std::int64_t b = send("b");
  d = take(2);
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST(d[0].msg_id == a);
  BOOST_TEST(d[1].msg_id == b);
  // A higher class first, listed or not.
  const std::int64_t low = send("low", Priority::Bulk);
  const std::int64_t high = send("high", Priority::Emergency);
  d = take(2);
  BOOST_REQUIRE(d.size() == 2u);
  BOOST_TEST(d[0].msg_id == high);
  BOOST_TEST(d[1].msg_id == low);
}

// Claimers racing through one lane: a claim reads a few candidates, which others may take before
// it locks them; it must then read on, never come back empty while messages are ready that no one
// holds. (The first build read its few candidates once: under two pgbench clients a claim came back
// empty within seconds.)
BOOST_AUTO_TEST_CASE(racing_claimers_never_come_back_empty_while_messages_are_ready) {
  queues().create(tenant, queue, {});
  constexpr int total = 600, threads = 4;
  std::vector<OutgoingMessage> batch(total);
  for (int i = 0; i < total; ++i) batch[i].payload = "m" + std::to_string(i);
  queues().enqueue_many(tenant, queue, batch);
  std::atomic<int> claimed{0}, empty_while_ready{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      auto own = open_another(1);
      for (int empties = 0; empties < 100000;) {
        const std::vector<Delivery> d = own->queues().claim(tenant, queue, "racer-" + std::to_string(w), 1);
        if (d.empty()) {
          // Ready and held by no one during the whole call: more than the others could hold.
          if (total - claimed.load() - threads > 0) ++empty_while_ready;
          if (claimed.load() >= total) return;
          ++empties;
          continue;
        }
        ++claimed;
        own->queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
      }
    });
  for (std::thread& t : workers) t.join();
  BOOST_TEST(claimed.load() == total);
  BOOST_TEST(empty_while_ready.load() == 0);
  BOOST_TEST(take().empty());
}

// A claim reads a few candidates from the lane; when another session holds every one of them (and
// of the larger reads after), it reads on until it finds one no one holds.
BOOST_AUTO_TEST_CASE(a_claim_reads_past_candidates_others_hold) {
  queues().create(tenant, queue, {});
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 45; ++i) ids.push_back(send("m" + std::to_string(i)));
  if (!is_postgres()) {
    const std::vector<Delivery> d = take();
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].msg_id == ids[0]);
    return;
  }
  conformance::PgSession holder(url);
  holder.value("BEGIN");
  holder.value("SELECT count(*) FROM (SELECT 1 FROM forgeyard.messages WHERE msg_id BETWEEN " + std::to_string(ids[0]) +
               " AND " + std::to_string(ids[39]) + " FOR UPDATE) l");
  const std::vector<Delivery> d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == ids[40]);  // the oldest no one holds
  holder.value("ROLLBACK");
  const std::vector<Delivery> next = take();
  BOOST_REQUIRE(next.size() == 1u);
  BOOST_TEST(next[0].msg_id == ids[0]);
}

// A listing held open stops its lane's cursor, so what may stay in flight long leaves the lane: a
// claim or an extend for longer than 60 s, and a message bound to a resource (whose limits may keep
// it ready). Each is still delivered: a lapsed long claim is claimed again from messages_claim.
BOOST_AUTO_TEST_CASE(long_claims_and_resource_bound_messages_leave_the_lanes) {
  queues().create(tenant, queue, {});
  const std::int64_t long_claimed = send("long");
  const std::int64_t extended = send("extended");
  OutgoingMessage bound;
  bound.payload = "bound";
  bound.resource = "downstream";
  const std::int64_t bound_id = queues().enqueue(tenant, queue, bound);
  std::optional<conformance::PgSession> observer;
  auto listed = [&](std::int64_t id) {
    return observer->value("SELECT ready_pos IS NOT NULL FROM forgeyard.messages WHERE msg_id = " + std::to_string(id));
  };
  if (is_postgres()) {
    observer.emplace(url);
    BOOST_TEST(listed(long_claimed) == "t");
    BOOST_TEST(listed(bound_id) == "f");
  }
  std::vector<Delivery> d = queues().claim(tenant, queue, "c", 1, std::chrono::minutes(2));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == long_claimed);
  d = queues().claim(tenant, queue, "c", 1, std::chrono::seconds(30));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == extended);
  if (is_postgres()) {
    BOOST_TEST(listed(long_claimed) == "f");
    BOOST_TEST(listed(extended) == "t");  // 30 s: it stays
  }
  queues().extend(tenant, queue, extended, d[0].claim_token, std::chrono::minutes(5));
  if (is_postgres()) BOOST_TEST(listed(extended) == "f");
  d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == bound_id);
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  clock.advance(std::chrono::minutes(3));  // the 2-minute claim lapsed
  d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == long_claimed);
  BOOST_TEST(d[0].attempt == 2);
}

// A delivery whose claim lapsed (its consumer died) is ready again but comes after the messages
// visible since before its lapse. Still listed, it would stop its lane's cursor until it is claimed
// again, and every claim would walk what was consumed past it meanwhile: the first claim that
// meets it takes it out of the lane, the cursor goes on, and it is still delivered in its turn
// (from messages_claim), on its second attempt. A lapsed delivery that is the oldest is claimed
// again by the claim that meets it.
BOOST_AUTO_TEST_CASE(a_lapsed_delivery_behind_older_messages_leaves_its_lane) {
  queues().create(tenant, queue, {});
  const std::int64_t dying = send("dying");
  std::vector<Delivery> d = queues().claim(tenant, queue, "dies", 1, std::chrono::seconds(30));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == dying);
  std::vector<std::int64_t> backlog;
  for (int i = 0; i < 5; ++i) backlog.push_back(send("backlog-" + std::to_string(i)));
  clock.advance(std::chrono::minutes(1));  // the claim lapsed: ready again, visible since 30 s ago
  std::optional<conformance::PgSession> observer;
  if (is_postgres()) observer.emplace(url);
  for (std::size_t i = 0; i < backlog.size(); ++i) {
    d = take();
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].msg_id == backlog[i]);
    queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
    if (is_postgres() && i == 0)
      BOOST_TEST(observer->value("SELECT ready_pos IS NULL FROM forgeyard.messages WHERE msg_id = " +
                                 std::to_string(dying)) == "t");
  }
  if (is_postgres()) {
    // The cursor passed the lapsed delivery's position and the backlog acked before the last claim.
    const Lane l = lane(*observer, 3);
    BOOST_TEST(l.cursor >= l.last - 1);
  }
  d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == dying);
  BOOST_TEST(d[0].attempt == 2);
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  BOOST_TEST(take().empty());
  // The oldest ready message lapsed: the claim that meets it in its lane delivers it again.
  const std::int64_t oldest = send("oldest");
  d = queues().claim(tenant, queue, "dies", 1, std::chrono::seconds(30));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == oldest);
  clock.advance(std::chrono::seconds(31));
  send("younger");
  d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == oldest);
  BOOST_TEST(d[0].attempt == 2);
}

// A void beside a real entry of the same position, in another segment (0.13.0: the primary key
// is per segment), does not move the cursor past the listing: the real entry decides the position,
// so a claim in flight there is found again when it lapses.
BOOST_AUTO_TEST_CASE(a_void_beside_a_listing_in_another_segment_does_not_move_the_cursor_past_it) {
  queues().create(tenant, queue, {});
  const std::int64_t a = send("a");
  std::vector<Delivery> d = queues().claim(tenant, queue, "dies", 1, std::chrono::seconds(30));
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == a);
  if (is_postgres()) {
    conformance::PgSession observer(url);
    const std::string id = observer.value("SELECT lanes * 8 + 3 FROM forgeyard.queues WHERE tenant_id = '" + tenant +
                                          "' AND queue = '" + queue + "'");
    observer.value("INSERT INTO forgeyard.queue_lane_entries (lane, pos, msg_id, seg) SELECT " + id +
                   ", 1, NULL, s FROM generate_series(0, 3) s WHERE s <> (SELECT seg FROM forgeyard.queue_lane_entries "
                   "WHERE lane = " +
                   id + " AND pos = 1 AND msg_id IS NOT NULL)");
    BOOST_TEST(observer.value("SELECT count(*) FROM forgeyard.queue_lane_entries WHERE lane = " + id) == "4");
    BOOST_TEST(take().empty());  // moves the cursor over what is consumed, if anything
    BOOST_TEST(lane(observer, 3).cursor == 0);
  }
  clock.advance(std::chrono::seconds(31));  // the claim lapsed
  d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].msg_id == a);
  BOOST_TEST(d[0].attempt == 2);
}

// queue_drop takes the lanes with the queue: no sequence of them is left behind.
BOOST_AUTO_TEST_CASE(dropping_a_queue_drops_its_lanes) {
  queues().create(tenant, queue, {});
  send("x");
  if (!is_postgres()) {
    BOOST_TEST(queues().drop(tenant, queue));
    return;
  }
  conformance::PgSession observer(url);
  const std::string base = observer.value("SELECT lanes FROM forgeyard.queues WHERE tenant_id = '" + tenant +
                                          "' AND queue = '" + queue + "'");
  BOOST_REQUIRE(!base.empty());
  BOOST_TEST(
      observer.value("SELECT count(*) FROM pg_class WHERE relnamespace = 'forgeyard'::regnamespace AND relname ~ "
                     "'^lane_[0-9]+(_cursor)?$' AND substring(relname from '[0-9]+')::bigint / 8 = " +
                     base) == "12");
  BOOST_TEST(queues().drop(tenant, queue));
  BOOST_TEST(
      observer.value("SELECT count(*) FROM pg_class WHERE relnamespace = 'forgeyard'::regnamespace AND relname ~ "
                     "'^lane_[0-9]+(_cursor)?$' AND substring(relname from '[0-9]+')::bigint / 8 = " +
                     base) == "0");
  BOOST_TEST(observer.value("SELECT count(*) FROM forgeyard.queue_lane_entries WHERE lane / 8 = " + base) == "0");
}

BOOST_AUTO_TEST_SUITE_END()
