// Durable queues and the inbox: docs/sql-api.md#queues, on every backend.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::Delivery;
using forgeyard::ErrorKind;
using forgeyard::OutgoingMessage;
using forgeyard::Priority;

namespace {
struct QueueFixture : conformance::Backend {
  std::string queue = "jobs";
  forgeyard::Queues& queues() { return store->queues(); }
  void create(const forgeyard::QueueOptions& options = {}) { queues().create(tenant, queue, options); }
  std::int64_t send(const std::string& payload, Priority p = Priority::Interactive) {
    OutgoingMessage m;
    m.payload = payload;
    m.priority = p;
    return queues().enqueue(tenant, queue, m);
  }
  std::vector<Delivery> take(int n = 1, std::optional<forgeyard::Duration> visibility = std::nullopt) {
    return queues().claim(tenant, queue, "consumer-1", n, visibility);
  }
};

forgeyard::QueueOptions small(std::int64_t max_messages) {
  forgeyard::QueueOptions o;
  o.max_messages = max_messages;
  return o;
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(queues, QueueFixture)

BOOST_AUTO_TEST_CASE(an_enqueue_is_delivered_only_after_its_transaction_commits) {
  create();
  {
    auto tx = store->begin();
    tx->queues().enqueue(tenant, queue, {"rolled back"});
    tx->rollback();
  }
  BOOST_TEST(take().empty());
  BOOST_TEST(queues().stats(tenant, queue).bytes == 0);  // no room was kept either
  auto tx = store->begin();
  const std::int64_t id = tx->queues().enqueue(tenant, queue, {"committed"});
  if (is_postgres()) {
    // A claim neither sees nor waits for an open producer transaction.
    auto other = open_another(1);
    BOOST_TEST(other->queues().claim(tenant, queue, "c", 10).empty());
  }
  tx->commit();
  auto got = take();
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].msg_id == id);
  BOOST_TEST(got[0].payload == "committed");
  BOOST_TEST(got[0].attempt == 1);
}

BOOST_AUTO_TEST_CASE(a_repeated_event_id_returns_the_first_message_even_after_ack_and_when_full) {
  create(small(2));
  OutgoingMessage m{"payload", "a8098c1a-f86e-11da-bd1a-00112444be1e"};
  const std::int64_t first = queues().enqueue(tenant, queue, m);
  BOOST_TEST(queues().enqueue(tenant, queue, m) == first);
  OutgoingMessage other = m;
  other.payload = "another payload";
  FY_CHECK_ERROR(queues().enqueue(tenant, queue, other), ErrorKind::IdempotencyMismatch, "FY011",
                 "event_id was enqueued before with a different payload");
  auto d = take();
  BOOST_REQUIRE(d.size() == 1u);
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  BOOST_TEST(queues().enqueue(tenant, queue, m) == first);  // after the ack
  send("fill");
  send("fill", Priority::Emergency);
  FY_CHECK_ERROR(send("one more", Priority::Emergency), ErrorKind::QueueFull, "FY020",
                 "queue \"" + queue + "\" is full for priority class emergency");
  BOOST_TEST(queues().enqueue(tenant, queue, m) == first);  // even when full
  for (const auto& x : take(2)) queues().ack(tenant, queue, x.msg_id, x.claim_token);
  clock.advance(24h + 1s);  // past the dedup window: a new message
  BOOST_TEST(queues().enqueue(tenant, queue, m) > first);
}

BOOST_AUTO_TEST_CASE(a_full_queue_refuses_lower_classes_first_and_never_grows_past_its_limit) {
  create(small(10));
  // Defaults: bulk up to 70%, background 80%, interactive 90%, realtime 95%, the top two 100%.
  for (int i = 0; i < 7; ++i) send("b", Priority::Bulk);
  FY_CHECK_ERROR(send("b", Priority::Bulk), ErrorKind::QueueFull, "FY020",
                 "queue \"" + queue + "\" is full for priority class bulk");
  send("bg", Priority::Background);
  FY_CHECK_ERROR(send("bg", Priority::Background), ErrorKind::QueueFull, "FY020");
  send("i", Priority::Interactive);
  FY_CHECK_ERROR(send("i", Priority::Interactive), ErrorKind::QueueFull, "FY020");
  FY_CHECK_ERROR(send("r", Priority::Realtime), ErrorKind::QueueFull, "FY020");  // 95% of 10 is 9
  send("s", Priority::SecurityControl);
  FY_CHECK_ERROR(send("e", Priority::Emergency), ErrorKind::QueueFull, "FY020");
  const auto e = conformance::expect_error([&] { send("e", Priority::Emergency); });
  BOOST_TEST(e.retryable());
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.ready == 10);
  BOOST_TEST(stats.pressure == "saturated");
  // In-flight and delayed messages count; acked ones give their room back.
  auto d = take(1);
  FY_CHECK_ERROR(send("e", Priority::Emergency), ErrorKind::QueueFull, "FY020");
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  send("e", Priority::Emergency);
  FY_CHECK_ERROR(send("e", Priority::Emergency), ErrorKind::QueueFull, "FY020");
}

BOOST_AUTO_TEST_CASE(producers_of_one_queue_do_not_wait_for_each_other) {
  forgeyard::QueueOptions o;
  o.max_messages = 100000;  // room for several capacity slots
  create(o);
  auto tx = store->begin();
  tx->queues().enqueue(tenant, queue, {"held open"});
  auto other = open_another(1);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    other->queues().enqueue(tenant, queue, {"second producer"});
    done = true;
  });
  // PostgreSQL: the second producer takes another capacity slot and commits while the first
  // transaction is open (given up to 5 s). SQLite has one writer at a time: it is still waiting
  // for the commit after 300 ms.
  const int polls = is_postgres() ? 100 : 6;
  for (int i = 0; i < polls && !done; ++i) std::this_thread::sleep_for(50ms);
  BOOST_TEST(done.load() == is_postgres());
  tx->commit();
  producer.join();
  BOOST_TEST(take(10).size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_drop_waits_for_an_open_producer_and_leaves_nothing_behind) {
  create();
  auto tx = store->begin();
  tx->queues().enqueue(tenant, queue, {"in flight to a dropped queue"});
  auto other = open_another(1);
  std::atomic<bool> dropped{false};
  std::thread dropper([&] {
    other->queues().drop(tenant, queue);
    dropped = true;
  });
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(!dropped.load());  // waits for the producer
  tx->commit();
  dropper.join();
  create(small(1));  // the same name again: empty, and bounded from zero
  BOOST_TEST(queues().stats(tenant, queue).bytes == 0);
  BOOST_TEST(take(10).empty());
  send("one", Priority::Emergency);
  FY_CHECK_ERROR(send("two", Priority::Emergency), ErrorKind::QueueFull, "FY020");
}

BOOST_AUTO_TEST_CASE(bytes_are_bounded_and_payloads_over_the_limit_refused) {
  forgeyard::QueueOptions o;
  o.max_bytes = 100;
  o.max_payload_bytes = 60;
  create(o);
  FY_CHECK_ERROR(send(std::string(61, 'x')), ErrorKind::PayloadTooLarge, "FY021",
                 "payload of 61 bytes is over the limit of queue \"" + queue + "\"");
  send(std::string(60, 'x'), Priority::Emergency);
  FY_CHECK_ERROR(send(std::string(41, 'x'), Priority::Emergency), ErrorKind::QueueFull, "FY020");
  send(std::string(40, 'x'), Priority::Emergency);
  BOOST_TEST(queues().stats(tenant, queue).bytes == 100);
}

BOOST_AUTO_TEST_CASE(unknown_queues_and_bad_input_are_refused) {
  FY_CHECK_ERROR(send("x"), ErrorKind::NotFound, "42704",
                 "queue \"" + queue + "\" does not exist for tenant \"" + tenant + "\"");
  create();
  FY_CHECK_ERROR(create(), ErrorKind::InvalidArgument, "42710");
  // "_wf." names belong to workflow definitions, on both backends.
  FY_CHECK_ERROR(queues().create(tenant, "_wf.order@1", {}), ErrorKind::InvalidArgument, "22023",
                 "queue names starting \"_wf.\" are reserved for workflows");
  FY_CHECK_ERROR(queues().drop(tenant, "_wf.order@1"), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(queues().enqueue(unique("other-tenant"), queue, {"x"}), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(queues().claim(tenant, queue, "c", 0), ErrorKind::InvalidArgument, "22023",
                 "max_messages must be between 1 and 1000");
  FY_CHECK_ERROR(queues().claim(tenant, queue, "", 1), ErrorKind::InvalidArgument, "22023",
                 "consumer must not be empty");
  FY_CHECK_ERROR(queues().enqueue(tenant, queue, {"x", "not-a-uuid"}), ErrorKind::InvalidArgument, "22P02",
                 "invalid input syntax for type uuid: \"not-a-uuid\"");
  // A dash PostgreSQL refuses (not after a group of four digits) is refused on both backends.
  FY_CHECK_ERROR(queues().enqueue(tenant, queue, {"x", "a-8098c1af86e11dabd1a00112444be1e"}),
                 ErrorKind::InvalidArgument, "22P02");
  FY_CHECK_ERROR(queues().inbox_accept(tenant, "billing", "a8098c1af86e11dabd1a00112444be1e-"),
                 ErrorKind::InvalidArgument, "22P02");
  // The other spellings PostgreSQL accepts name the same event.
  const auto first = queues().enqueue(tenant, queue, {"same", "A8098C1A-F86E-11DA-BD1A-00112444BE1E"});
  BOOST_TEST(queues().enqueue(tenant, queue, {"same", "{a8098c1a-f86e-11da-bd1a-00112444be1e}"}) == first);
  BOOST_TEST(queues().enqueue(tenant, queue, {"same", "a8098c1af86e11dabd1a00112444be1e"}) == first);
  FY_CHECK_ERROR(forgeyard::priority_from_string("urgent"), ErrorKind::InvalidArgument, "22023",
                 "priority must be one of emergency, security_control, realtime, interactive, background, bulk");
  forgeyard::QueueOptions bad;
  bad.admit_percent[5] = 95;  // bulk above background
  FY_CHECK_ERROR(queues().create(tenant, "bad", bad), ErrorKind::InvalidArgument, "22023",
                 "queue option admit_bulk must not exceed admit_background: a lower class is refused earlier");
  bad = {};
  bad.max_messages = 0;
  FY_CHECK_ERROR(queues().create(tenant, "bad", bad), ErrorKind::InvalidArgument, "22023");
  bad = {};
  bad.max_attempts = 1001;  // the same bound on both backends
  FY_CHECK_ERROR(queues().create(tenant, "bad", bad), ErrorKind::InvalidArgument, "22023",
                 "queue option max_attempts must be at most 1000");
  bad.max_attempts = 1000;
  queues().create(tenant, "most_attempts", bad);
  BOOST_TEST(queues().stats(tenant, queue).ready == 1);  // only the deduplicated one
}

BOOST_AUTO_TEST_CASE(claims_deliver_the_highest_class_first_then_the_oldest) {
  create();
  const auto b = send("bulk", Priority::Bulk);
  const auto i1 = send("interactive 1");
  const auto e = send("emergency", Priority::Emergency);
  const auto i2 = send("interactive 2");
  auto got = take(10);
  BOOST_REQUIRE(got.size() == 4u);
  BOOST_TEST(got[0].msg_id == e);
  BOOST_TEST(got[1].msg_id == i1);
  BOOST_TEST(got[2].msg_id == i2);
  BOOST_TEST(got[3].msg_id == b);
  BOOST_TEST(forgeyard::to_string(got[0].priority) == "emergency");
  std::set<std::int64_t> tokens;
  for (const auto& d : got) tokens.insert(d.claim_token);
  BOOST_TEST(tokens.size() == 4u);
  BOOST_TEST(take(10).empty());  // all in flight
}

BOOST_AUTO_TEST_CASE(a_lapsed_claim_is_delivered_again_and_the_old_token_is_fenced) {
  create();
  send("work");
  auto first = take(1, 30s);
  BOOST_REQUIRE(first.size() == 1u);
  clock.advance(29s);
  BOOST_TEST(take().empty());
  clock.advance(1s);  // visibility ran out (visible_at <= now)
  const std::string stale = "claim token " + std::to_string(first[0].claim_token) +
                            " is not the current delivery of message " + std::to_string(first[0].msg_id);
  FY_CHECK_ERROR(queues().extend(tenant, queue, first[0].msg_id, first[0].claim_token, 30s), ErrorKind::StaleFence,
                 "FY001", stale);
  auto second = take();
  BOOST_REQUIRE(second.size() == 1u);
  BOOST_TEST(second[0].msg_id == first[0].msg_id);
  BOOST_TEST(second[0].attempt == 2);
  BOOST_TEST(second[0].claim_token != first[0].claim_token);
  FY_CHECK_ERROR(queues().ack(tenant, queue, first[0].msg_id, first[0].claim_token), ErrorKind::StaleFence, "FY001",
                 stale);
  FY_CHECK_ERROR(queues().nack(tenant, queue, first[0].msg_id, first[0].claim_token, "late"), ErrorKind::StaleFence,
                 "FY001", stale);
  queues().extend(tenant, queue, second[0].msg_id, second[0].claim_token, 60s);
  clock.advance(45s);
  BOOST_TEST(take().empty());  // the extension holds
  queues().ack(tenant, queue, second[0].msg_id, second[0].claim_token);
  queues().ack(tenant, queue, second[0].msg_id, second[0].claim_token);  // again: a no-op
  BOOST_TEST(queues().stats(tenant, queue).ready == 0);
}

BOOST_AUTO_TEST_CASE(a_message_whose_visibility_runs_out_on_every_attempt_is_dead_lettered) {
  forgeyard::QueueOptions o;
  o.max_attempts = 2;
  create(o);
  const auto id = send("kills its consumer");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto d = take(1, 10s);
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].attempt == attempt);
    clock.advance(10s);  // the consumer died: no ack, no nack
  }
  BOOST_TEST(take(1, 10s).empty());  // not handed out a third time
  auto dead = queues().dead_letters(tenant, queue);
  BOOST_REQUIRE(dead.size() == 1u);
  BOOST_TEST(dead[0].msg_id == id);
  BOOST_TEST(dead[0].error_class == "max_attempts");
  BOOST_TEST(queues().stats(tenant, queue).bytes == 0);
}

BOOST_AUTO_TEST_CASE(redriving_one_dead_letter_twice_in_a_call_redrives_it_once) {
  forgeyard::QueueOptions o;
  o.keep_dead_letter_payload = true;
  create(o);
  const auto id = send("x");
  auto d = take();
  queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "no", true);
  BOOST_TEST(queues().redrive(tenant, queue, {id, id}) == 1);
  BOOST_TEST(queues().stats(tenant, queue).bytes == 1);
  BOOST_TEST(take(10).size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_ack_after_the_visibility_ran_out_but_before_a_reclaim_is_accepted) {
  create();
  send("work");
  auto d = take(1, 10s);
  clock.advance(11s);
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
  BOOST_TEST(take().empty());
  BOOST_TEST(queues().stats(tenant, queue).bytes == 0);
}

BOOST_AUTO_TEST_CASE(nack_retries_with_capped_backoff_then_dead_letters) {
  forgeyard::QueueOptions o;
  o.max_attempts = 3;
  o.backoff_base = 1s;
  o.backoff_max = 4s;
  create(o);
  const auto id = send("flaky");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto d = take();
    BOOST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].attempt == attempt);
    BOOST_TEST((queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "boom") == forgeyard::NackOutcome::Retry));
    clock.advance(4s);  // the cap: after it the retry is visible whatever the jitter drew
  }
  auto d = take();
  BOOST_REQUIRE(d.size() == 1u);
  BOOST_TEST(d[0].attempt == 3);
  BOOST_TEST(
      (queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "still boom") == forgeyard::NackOutcome::Dead));
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.dead == 1);
  BOOST_TEST(stats.bytes == 0);  // dead letters do not count against the queue
  auto dead = queues().dead_letters(tenant, queue);
  BOOST_REQUIRE(dead.size() == 1u);
  BOOST_TEST(dead[0].msg_id == id);
  BOOST_TEST(dead[0].attempt == 3);
  BOOST_TEST(dead[0].error == "still boom");
  BOOST_TEST(dead[0].error_class == "max_attempts");
  BOOST_TEST(!dead[0].payload.has_value());                    // dropped by default
  queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);  // acking a dead message: a no-op
  FY_CHECK_ERROR(queues().redrive(tenant, queue, {id}), ErrorKind::InvalidArgument, "22023",
                 "dead letter " + std::to_string(id) + " cannot be redriven: its payload was dropped");
  BOOST_TEST(queues().purge_dead(tenant, queue) == 1);
  BOOST_TEST(queues().dead_letters(tenant, queue).empty());
}

BOOST_AUTO_TEST_CASE(a_nacked_message_stays_invisible_for_its_backoff) {
  forgeyard::QueueOptions o;
  o.backoff_base = 10s;
  o.backoff_max = 10s;
  create(o);
  send("x");
  auto d = take();
  queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "later");
  BOOST_TEST(queues().stats(tenant, queue).ready + queues().stats(tenant, queue).delayed == 1);
  clock.advance(10s);
  BOOST_TEST(take().size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_permanent_failure_dead_letters_at_once_and_kept_payloads_can_be_redriven) {
  forgeyard::QueueOptions o;
  o.keep_dead_letter_payload = true;
  create(o);
  const auto id = send("poison");
  auto d = take();
  BOOST_TEST(
      (queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "bad input", true) == forgeyard::NackOutcome::Dead));
  auto dead = queues().dead_letters(tenant, queue);
  BOOST_REQUIRE(dead.size() == 1u);
  BOOST_TEST(dead[0].error_class == "permanent");
  BOOST_TEST(dead[0].payload.value_or("") == "poison");
  BOOST_TEST(queues().redrive(tenant, queue) == 1);
  auto again = take();
  BOOST_REQUIRE(again.size() == 1u);
  BOOST_TEST(again[0].msg_id == id);
  BOOST_TEST(again[0].attempt == 1);
  BOOST_TEST(again[0].payload == "poison");
}

BOOST_AUTO_TEST_CASE(dead_letters_are_listed_with_keyset_pagination) {
  create();
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(send("m" + std::to_string(i)));
    auto d = take();
    queues().nack(tenant, queue, d[0].msg_id, d[0].claim_token, "no", true);
  }
  auto page1 = queues().dead_letters(tenant, queue, 0, 2);
  BOOST_REQUIRE(page1.size() == 2u);
  auto page2 = queues().dead_letters(tenant, queue, page1.back().msg_id, 2);
  auto page3 = queues().dead_letters(tenant, queue, page2.back().msg_id, 2);
  BOOST_REQUIRE(page2.size() == 2u);
  BOOST_REQUIRE(page3.size() == 1u);
  BOOST_TEST(page1[0].msg_id == ids[0]);
  BOOST_TEST(page2[0].msg_id == ids[2]);
  BOOST_TEST(page3[0].msg_id == ids[4]);
}

BOOST_AUTO_TEST_CASE(a_delayed_message_is_invisible_until_its_time) {
  create();
  OutgoingMessage m{"later"};
  m.delay = 60s;
  queues().enqueue(tenant, queue, m);
  BOOST_TEST(take().empty());
  BOOST_TEST(queues().stats(tenant, queue).delayed == 1);
  clock.advance(60s);
  BOOST_TEST(take().size() == 1u);
}

BOOST_AUTO_TEST_CASE(partition_keys_are_delivered_in_order_one_at_a_time) {
  forgeyard::QueueOptions o;
  o.partition_ordered = true;
  create(o);
  FY_CHECK_ERROR(send("no key"), ErrorKind::InvalidArgument, "22023",
                 "partition_key is required: queue \"" + queue + "\" is partition-ordered");
  auto keyed = [&](const std::string& key, const std::string& payload, Priority p = Priority::Interactive) {
    OutgoingMessage m{payload};
    m.partition_key = key;
    m.priority = p;
    return queues().enqueue(tenant, queue, m);
  };
  const auto a1 = keyed("a", "a1", Priority::Bulk);
  const auto a2 = keyed("a", "a2", Priority::Emergency);  // enqueue order beats class within a key
  const auto b1 = keyed("b", "b1", Priority::Realtime);
  auto got = take(10);
  BOOST_REQUIRE(got.size() == 2u);  // one per key
  BOOST_TEST(got[0].msg_id == b1);  // class orders the heads of different keys
  BOOST_TEST(got[1].msg_id == a1);
  BOOST_TEST(take(10).empty());
  BOOST_TEST(queues().stats(tenant, queue).ready == 1);    // a2: visible, unclaimed,
  BOOST_TEST(queues().stats(tenant, queue).waiting == 1);  // and waiting behind a1
  queues().ack(tenant, queue, got[1].msg_id, got[1].claim_token);
  auto next = take(10);
  BOOST_REQUIRE(next.size() == 1u);
  BOOST_TEST(next[0].msg_id == a2);
  queues().nack(tenant, queue, next[0].msg_id, next[0].claim_token, "dead", true);
  queues().ack(tenant, queue, got[0].msg_id, got[0].claim_token);
  const auto a3 = keyed("a", "a3");
  auto last = take(10);
  BOOST_REQUIRE(last.size() == 1u);
  BOOST_TEST(last[0].msg_id == a3);
}

BOOST_AUTO_TEST_CASE(partition_keys_do_not_order_an_unordered_queue) {
  create();
  OutgoingMessage m{"k1"};
  m.partition_key = "same";
  queues().enqueue(tenant, queue, m);
  m.payload = "k2";
  queues().enqueue(tenant, queue, m);
  BOOST_TEST(take(10).size() == 2u);  // both at once: ordering is none
}

BOOST_AUTO_TEST_CASE(the_batch_ack_of_ack_and_claim_fences_like_ack) {
  // ack_and_claim acks through one set-based statement on PostgreSQL: it must give ack's answers.
  create();
  send("a");
  send("b");
  auto first = take(2, 30s);
  BOOST_REQUIRE(first.size() == 2u);
  clock.advance(30s);  // both lapse; nobody has claimed them again yet
  const std::vector<forgeyard::Ack> lapsed_a{{first[0].msg_id, first[0].claim_token}};
  auto again = queues().ack_and_claim(tenant, queue, "consumer-1", lapsed_a, 1);  // accepted after the lapse
  BOOST_REQUIRE(again.size() == 1u);
  BOOST_TEST(again[0].msg_id == first[1].msg_id);  // b, claimed again under a new token
  const std::vector<forgeyard::Ack> stale_b{{first[1].msg_id, first[1].claim_token}};
  FY_CHECK_ERROR(queues().ack_and_claim(tenant, queue, "consumer-1", stale_b, 1), ErrorKind::StaleFence, "FY001",
                 "claim token " + std::to_string(first[1].claim_token) + " is not the current delivery of message " +
                     std::to_string(first[1].msg_id));
  BOOST_TEST(queues().ack_and_claim(tenant, queue, "consumer-1", lapsed_a, 1).empty());  // acked already: a no-op
  queues().ack(tenant, queue, again[0].msg_id, again[0].claim_token);
  BOOST_TEST(queues().stats(tenant, queue).in_flight == 0);
}

BOOST_AUTO_TEST_CASE(ack_and_claim_is_one_call) {
  create();
  for (int i = 0; i < 4; ++i) send("m" + std::to_string(i));
  auto batch = take(2);
  std::vector<forgeyard::Ack> acks;
  for (const auto& d : batch) acks.emplace_back(d.msg_id, d.claim_token);
  auto next = queues().ack_and_claim(tenant, queue, "consumer-1", acks, 2);
  BOOST_TEST(next.size() == 2u);
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.in_flight == 2);
  BOOST_TEST(stats.ready == 0);
  acks.clear();
  for (const auto& d : next) acks.emplace_back(d.msg_id, d.claim_token);
  BOOST_TEST(queues().ack_and_claim(tenant, queue, "consumer-1", acks, 2).empty());
  BOOST_TEST(queues().stats(tenant, queue).in_flight == 0);
}

BOOST_AUTO_TEST_CASE(enqueue_many_keeps_the_list_order_across_classes_delays_and_repeated_events) {
  create();
  BOOST_TEST(queues().enqueue_many(tenant, queue, {}).empty());
  const std::string event = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
  std::vector<OutgoingMessage> list{{"a"}, {"b"}, {"c"}, {"d"}, {"e", event}, {"f", event}, {"g"}};
  list[2].priority = Priority::Realtime;
  list[3].delay = 60s;
  list[5].payload = "e";  // the same event again, as a retried producer sends it
  // PostgreSQL sends a statement per run of the same class and delay: a, b | c | d | e, f, g.
  const auto ids = queues().enqueue_many(tenant, queue, list);
  BOOST_REQUIRE(ids.size() == list.size());
  for (std::size_t i = 1; i < ids.size(); ++i)
    if (i != 5) BOOST_TEST(ids[i] > ids[i - 1]);
  BOOST_TEST(ids[5] == ids[4]);  // a repeated event_id answers the first msg_id, also within the list
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.ready == 5);
  BOOST_TEST(stats.delayed == 1);
  std::vector<std::string> order;
  std::vector<forgeyard::Ack> acks;
  for (const auto& d : take(10)) order.push_back(d.payload), acks.emplace_back(d.msg_id, d.claim_token);
  BOOST_TEST(order == (std::vector<std::string>{"c", "a", "b", "e", "g"}), boost::test_tools::per_element());
  queues().ack_many(tenant, queue, acks);
  clock.advance(60s);
  const auto later = take(10);
  BOOST_REQUIRE(later.size() == 1u);
  BOOST_TEST(later[0].msg_id == ids[3]);
}

BOOST_AUTO_TEST_CASE(enqueue_many_is_all_or_nothing) {
  forgeyard::QueueOptions o = small(10);
  o.max_payload_bytes = 60;
  create(o);
  // Over the bound: interactive is admitted up to 9 of 10, so the tenth refuses all ten.
  FY_CHECK_ERROR(queues().enqueue_many(tenant, queue, std::vector<OutgoingMessage>(10, OutgoingMessage{"x"})),
                 ErrorKind::QueueFull, "FY020");
  // A refused message in a later run (on PostgreSQL: a later statement of the pipeline).
  std::vector<OutgoingMessage> list{{"a"}, {"b"}, {std::string(61, 'x')}};
  list[2].priority = Priority::Emergency;
  FY_CHECK_ERROR(queues().enqueue_many(tenant, queue, list), ErrorKind::PayloadTooLarge, "FY021");
  list[2].payload = "c";
  FY_CHECK_ERROR(queues().enqueue_many(unique("other-tenant"), queue, list), ErrorKind::NotFound, "42704");
  list[1].event_id = "not-a-uuid";
  FY_CHECK_ERROR(queues().enqueue_many(tenant, queue, list), ErrorKind::InvalidArgument, "22P02");
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.ready == 0);
  BOOST_TEST(stats.bytes == 0);
  // Inside a Transaction: part of it, gone with its rollback, delivered after its commit.
  list[1].event_id.reset();
  {
    auto tx = store->begin();
    BOOST_TEST(tx->queues().enqueue_many(tenant, queue, list).size() == 3u);
    tx->rollback();
  }
  BOOST_TEST(take(10).empty());
  {
    auto tx = store->begin();
    tx->queues().enqueue_many(tenant, queue, list);
    if (is_postgres())
      BOOST_TEST(open_another(1)->queues().claim(tenant, queue, "c", 10).empty());  // not before the commit
    tx->commit();
  }
  BOOST_TEST(take(10).size() == 3u);
  // The calls after a refused one run as usual (the connection left its pipeline cleanly).
  BOOST_TEST(queues().enqueue_many(tenant, queue, {{"after"}}).size() == 1u);
}

BOOST_AUTO_TEST_CASE(ack_many_acks_all_or_none) {
  create();
  for (int i = 0; i < 3; ++i) send("m" + std::to_string(i));
  auto first = take(3, 30s);
  BOOST_REQUIRE(first.size() == 3u);
  queues().ack_many(tenant, queue, {});
  clock.advance(30s);
  auto again = take(1);  // the oldest lapsed delivery, under a new token
  BOOST_REQUIRE(again.size() == 1u);
  BOOST_REQUIRE(again[0].msg_id == first[0].msg_id);
  std::vector<forgeyard::Ack> acks;
  for (const auto& d : first) acks.emplace_back(d.msg_id, d.claim_token);
  FY_CHECK_ERROR(queues().ack_many(tenant, queue, acks), ErrorKind::StaleFence, "FY001");
  BOOST_TEST(queues().stats(tenant, queue).in_flight == 1);  // nothing acked: the two lapsed ones are still there
  BOOST_TEST(queues().stats(tenant, queue).ready == 2);
  acks[0] = {again[0].msg_id, again[0].claim_token};
  queues().ack_many(tenant, queue, acks);  // lapsed but not claimed again: accepted, as ack() does
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.in_flight == 0);
  BOOST_TEST(stats.ready == 0);
  queues().ack_many(tenant, queue, acks);  // acked already: a no-op
}

BOOST_AUTO_TEST_CASE(an_ack_listed_twice_in_one_call_gives_the_room_back_once) {
  create(small(2));
  const Priority top = Priority::Emergency;  // admitted up to the whole bound
  send("a", top);
  send("b", top);
  auto got = take(2);
  BOOST_REQUIRE(got.size() == 2u);
  const forgeyard::Ack a{got[0].msg_id, got[0].claim_token}, b{got[1].msg_id, got[1].claim_token};
  queues().ack_many(tenant, queue, {a, a, b});
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.ready + stats.in_flight == 0);
  BOOST_TEST(stats.bytes == 0);
  // The bound counts two messages again, not three: a room given back twice would admit a third.
  send("c", top);
  send("d", top);
  FY_CHECK_ERROR(send("e", top), ErrorKind::QueueFull, "FY020");
  // The same through ack_and_claim, whose acks run before its claim.
  auto more = take(2);
  BOOST_REQUIRE(more.size() == 2u);
  const forgeyard::Ack c{more[0].msg_id, more[0].claim_token};
  BOOST_TEST(queues().ack_and_claim(tenant, queue, "consumer-1", {c, c}, 1).empty());  // d is in flight
  send("f", top);
  FY_CHECK_ERROR(send("g", top), ErrorKind::QueueFull, "FY020");
}

BOOST_AUTO_TEST_CASE(the_inbox_accepts_an_event_once_per_consumer) {
  const std::string event = "0f8fad5b-d9cb-469f-a165-70867728950e";
  BOOST_TEST(queues().inbox_accept(tenant, "billing", event));
  BOOST_TEST(!queues().inbox_accept(tenant, "billing", event));
  BOOST_TEST(queues().inbox_accept(tenant, "audit", event));
  {
    auto tx = store->begin();
    BOOST_TEST(tx->queues().inbox_accept(tenant, "mailer", event));
    tx->rollback();  // not accepted after all
  }
  BOOST_TEST(queues().inbox_accept(tenant, "mailer", event));
  FY_CHECK_ERROR(queues().inbox_accept(tenant, "billing", "nope"), ErrorKind::InvalidArgument, "22P02");
}

BOOST_AUTO_TEST_CASE(maintain_purges_what_outlived_its_retention_in_bounded_steps) {
  const std::string t = unique("maint");
  forgeyard::QueueOptions o;
  o.retain_acked = 1h;
  o.max_dead = 1;
  o.dead_letter_retention = 24h;
  queues().create(t, "q", o);
  auto add = [&](const std::string& p, std::optional<std::string> event = std::nullopt) {
    OutgoingMessage m{p, event};
    return queues().enqueue(t, "q", m);
  };
  add("acked", "3f1e9a62-0c1b-4c9c-9d3a-2f4d7c1b0a11");
  auto d = queues().claim(t, "q", "c", 1);
  queues().ack(t, "q", d[0].msg_id, d[0].claim_token);
  for (int i = 0; i < 3; ++i) {
    add("dead " + std::to_string(i));
    auto x = queues().claim(t, "q", "c", 1);
    queues().nack(t, "q", x[0].msg_id, x[0].claim_token, "no", true);
  }
  const forgeyard::IdempotencyKey key{t, "s", "k"};
  store->idempotency().complete(key, std::string("r"),
                                store->idempotency().begin(key, forgeyard::request_digest("x"), 1min, 1h).attempt);
  queues().inbox_accept(t, "consumer", "3f1e9a62-0c1b-4c9c-9d3a-2f4d7c1b0a12");

  auto now = store->maintain(1000, t);
  BOOST_TEST(now["dead_letters"] == 2);  // over max_dead (1): the two oldest go
  BOOST_TEST(now["acked_messages"] == 0);
  BOOST_TEST(now["idempotency_keys"] == 0);
  BOOST_TEST(queues().dead_letters(t, "q").size() == 1u);
  clock.advance(25h);
  auto later = store->maintain(1, t);  // bounded: at most one row per task
  BOOST_TEST(later["acked_messages"] == 1);
  BOOST_TEST(later["idempotency_keys"] == 1);
  BOOST_TEST(later["queue_events"] == 1);
  BOOST_TEST(later["dead_letters"] == 1);
  BOOST_TEST(later["inbox"] == 0);  // kept for 7 days
  clock.advance(24h * 7);
  BOOST_TEST(store->maintain(1000, t)["inbox"] == 1);
  BOOST_TEST(queues().inbox_accept(t, "consumer", "3f1e9a62-0c1b-4c9c-9d3a-2f4d7c1b0a12"));  // forgotten
  FY_CHECK_ERROR(store->maintain(0), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_CASE(four_consumers_drain_eight_thousand_messages_each_exactly_once) {
  conformance::ThreadFailures
      failures;  // an error in a thread fails the test, naming it, instead of aborting the suite
  forgeyard::QueueOptions o;
  o.max_messages = 50000;
  create(o);
  constexpr int total = 8000;
  // Four producers on four connections at once: their messages interleave over several capacity
  // slots, so every consumer batch acks across slots (in msg_id order, which differs per batch).
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p)
    producers.emplace_back([&, p] {
      failures.run([&] {
        auto s = open_another(1);
        for (int batch = 0; batch < total / 4 / 100; ++batch) {
          auto tx = s->begin();
          for (int i = 0; i < 100; ++i)
            tx->queues().enqueue(tenant, queue, {std::to_string(p) + "/" + std::to_string(batch * 100 + i)});
          tx->commit();
        }
      });
    });
  for (auto& t : producers) t.join();
  failures.check("producer");
  std::mutex m;
  std::map<std::string, int> seen;
  std::vector<std::thread> consumers;
  for (int c = 0; c < 4; ++c)
    consumers.emplace_back([&, c] {
      failures.run([&] {
        auto s = open_another(1);
        std::vector<forgeyard::Ack> acks;
        for (;;) {
          auto got = s->queues().ack_and_claim(tenant, queue, "consumer-" + std::to_string(c), acks, 50);
          if (got.empty()) break;
          acks.clear();
          std::lock_guard lock(m);
          for (const auto& d : got) {
            ++seen[d.payload];
            acks.emplace_back(d.msg_id, d.claim_token);
          }
        }
      });
    });
  for (auto& t : consumers) t.join();
  failures.check("consumer");
  BOOST_TEST(seen.size() == static_cast<std::size_t>(total));  // none lost
  int duplicates = 0;
  for (const auto& [payload, n] : seen) duplicates += n - 1;
  BOOST_TEST(duplicates == 0);  // none delivered twice
  auto stats = queues().stats(tenant, queue);
  BOOST_TEST(stats.ready + stats.in_flight + stats.delayed == 0);
  BOOST_TEST(stats.bytes == 0);
}

BOOST_AUTO_TEST_CASE(a_consumer_killed_mid_batch_loses_nothing) {
  create();
  for (int i = 0; i < 5; ++i) send("m" + std::to_string(i));
  pid_t child = fork();
  if (child == 0) {
    // The consumer: claims the batch (committed), then dies before acking any of it.
    try {
      auto s = open_another(1);
      auto got = s->queues().claim(tenant, queue, "doomed", 5, 30s);
      if (got.size() != 5u) _exit(3);
    } catch (...) {
      _exit(4);
    }
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  BOOST_REQUIRE(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGKILL);
  BOOST_TEST(queues().stats(tenant, queue).in_flight == 5);
  BOOST_TEST(take(10).empty());
  clock.advance(30s);  // its visibility runs out
  auto again = take(10);
  BOOST_TEST(again.size() == 5u);
  for (const auto& d : again) BOOST_TEST(d.attempt == 2);
}

BOOST_AUTO_TEST_CASE(a_consumer_whose_connection_dies_mid_claim_loses_nothing) {
  create();
  for (int i = 0; i < 3; ++i) send("m" + std::to_string(i));
  {
    forgeyard::StoreOptions options;
    options.clock = [this] { return clock.now(); };
    options.prepared_statements = !unnamed_statements;
    auto victim = forgeyard::open(is_postgres() ? url + "&application_name=fy_victim" : url, options);
    auto tx = victim->begin();
    BOOST_TEST(tx->queues().claim(tenant, queue, "victim", 3).size() == 3u);
    if (is_postgres()) {
      // The server kills the consumer's connection while its claim is open.
      exec_sql(
          "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity"
          " WHERE application_name = 'fy_victim'");
      FY_CHECK_ERROR(tx->commit(), ErrorKind::CommitUnknown, "08006");
    }
  }  // SQLite: the consumer goes away with its transaction open
  auto again = take(10);
  BOOST_TEST(again.size() == 3u);  // delivered once more, at once: the claim never committed
  for (const auto& d : again) BOOST_TEST(d.attempt == 1);
}

BOOST_AUTO_TEST_SUITE_END()
