// Flow control, per-key concurrency limits (docs/operations.md, "Flow control"): a queue's
// max_in_flight_per_key bounds the messages of one fairness key that are ready or in flight, on
// every backend, under concurrent claimers.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <string>
#include <vector>

#include "backend.hpp"
#include "check.hpp"
#include "claimers.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::OutgoingMessage;

namespace {
struct KeyFixture : conformance::Backend {
  std::string queue = "keyed";
  forgeyard::Queues& queues() { return store->queues(); }
  void create(std::int64_t limit) {
    forgeyard::QueueOptions o;
    o.max_in_flight_per_key = limit;
    o.backoff_base = 1ms;
    o.backoff_max = 1ms;
    o.keep_dead_letter_payload = true;
    queues().create(tenant, queue, o);
  }
  std::int64_t send(const std::string& key) {
    OutgoingMessage m{key};
    m.fairness_key = key;
    return queues().enqueue(tenant, queue, m);
  }
  std::vector<forgeyard::Delivery> claim(int n) {
    auto got = queues().claim(tenant, queue, "w", n);
    std::sort(got.begin(), got.end(), [](const auto& x, const auto& y) { return x.msg_id < y.msg_id; });
    return got;
  }
  static std::vector<std::int64_t> ids(const std::vector<forgeyard::Delivery>& got) {
    std::vector<std::int64_t> out;
    for (const auto& d : got) out.push_back(d.msg_id);
    return out;
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(flow_keys, KeyFixture)

BOOST_AUTO_TEST_CASE(a_key_at_its_limit_is_skipped_and_its_next_follows_when_one_finishes) {
  create(2);
  std::vector<std::int64_t> a;
  for (int i = 0; i < 5; ++i) a.push_back(send("A"));
  const std::int64_t b = send("B");
  const std::int64_t plain = queues().enqueue(tenant, queue, {"no key"});
  // Two of A (the oldest), B and the message without a key; A's others wait and are not ready.
  auto first = claim(10);
  BOOST_TEST(ids(first) == (std::vector<std::int64_t>{a[0], a[1], b, plain}));
  BOOST_TEST(claim(10).empty());
  // queue_stats counts them as ready (visible and unclaimed) and, of those, as waiting behind their
  // key; flow_state shows them per key.
  BOOST_TEST(queues().stats(tenant, queue).ready == 3);
  BOOST_TEST(queues().stats(tenant, queue).waiting == 3);
  // An ack lets A's next one in, in enqueue order; a retry keeps its place (still one of the two).
  queues().ack(tenant, queue, first[0].msg_id, first[0].claim_token);
  auto second = claim(10);
  BOOST_TEST(ids(second) == (std::vector<std::int64_t>{a[2]}));
  BOOST_TEST(
      (queues().nack(tenant, queue, first[1].msg_id, first[1].claim_token, "again") == forgeyard::NackOutcome::Retry));
  clock.advance(1s);
  BOOST_TEST(ids(claim(10)) == (std::vector<std::int64_t>{a[1]}));
  // A dead letter finishes too: A's next one follows it.
  BOOST_TEST((queues().nack(tenant, queue, second[0].msg_id, second[0].claim_token, "bad", true) ==
              forgeyard::NackOutcome::Dead));
  BOOST_TEST(ids(claim(10)) == (std::vector<std::int64_t>{a[3]}));
  BOOST_TEST(claim(10).empty());
  BOOST_TEST(queues().stats(tenant, queue).ready == 1);  // a[4], behind a[1] and a[3]
  BOOST_TEST(queues().stats(tenant, queue).waiting == 1);
  // Without a waiting message of its key, a message is ready and not waiting.
  send("D");
  BOOST_TEST(queues().stats(tenant, queue).ready == 2);
  BOOST_TEST(queues().stats(tenant, queue).waiting == 1);
}

BOOST_AUTO_TEST_CASE(a_batch_of_one_key_makes_heads_up_to_the_limit_and_a_redriven_message_waits_for_room) {
  create(2);
  std::vector<OutgoingMessage> batch;
  for (int i = 0; i < 4; ++i) {
    OutgoingMessage m{"c" + std::to_string(i)};
    m.fairness_key = "C";
    batch.push_back(m);
  }
  const auto c = queues().enqueue_many(tenant, queue, batch);
  auto got = claim(10);
  BOOST_TEST(ids(got) == (std::vector<std::int64_t>{c[0], c[1]}));
  // A dead letter makes room: C's next one follows it.
  BOOST_TEST(
      (queues().nack(tenant, queue, got[0].msg_id, got[0].claim_token, "bad", true) == forgeyard::NackOutcome::Dead));
  const auto c2 = claim(10);
  BOOST_TEST(ids(c2) == (std::vector<std::int64_t>{c[2]}));
  // Redriven, it joins the key at its limit and waits; as the oldest of C it is the next one in.
  BOOST_TEST(queues().redrive(tenant, queue, {c[0]}) == 1);
  BOOST_TEST(claim(10).empty());
  queues().ack(tenant, queue, got[1].msg_id, got[1].claim_token);
  const auto c0 = claim(10);
  BOOST_TEST(ids(c0) == (std::vector<std::int64_t>{c[0]}));
  queues().ack(tenant, queue, c2[0].msg_id, c2[0].claim_token);
  BOOST_TEST(ids(claim(10)) == (std::vector<std::int64_t>{c[3]}));
}

BOOST_AUTO_TEST_CASE(eight_claimers_never_hold_more_than_the_limit_of_a_key) {
  create(2);
  constexpr int keys = 4, per_key = 12, total = keys * per_key;
  for (int i = 0; i < per_key; ++i)
    for (int k = 0; k < keys; ++k) send("k" + std::to_string(k));
  std::array<std::atomic<int>, keys> holding{}, most{};
  auto key_of = [](const forgeyard::Delivery& d) { return d.payload.back() - '0'; };
  const auto result = conformance::run_claimers(
      *this, tenant, queue, 8, 3, total,
      [&](const std::vector<forgeyard::Delivery>& got) {
        for (const auto& d : got) {
          const int k = key_of(d), now_holding = ++holding[k];
          for (int seen = most[k].load(); now_holding > seen && !most[k].compare_exchange_weak(seen, now_holding);) {
          }
        }
      },
      [&](const std::vector<forgeyard::Delivery>& got) {
        for (const auto& d : got) --holding[key_of(d)];
      });
  BOOST_TEST(result.error == "");
  BOOST_TEST(result.done == total);
  for (int k = 0; k < keys; ++k) {
    BOOST_TEST(most[k].load() <= 2, "key " << k << " had " << most[k].load() << " in flight");
    BOOST_TEST(most[k].load() >= 1);
  }
  BOOST_TEST(queues().stats(tenant, queue).ready == 0);
}

BOOST_AUTO_TEST_CASE(flow_state_shows_every_limit_and_what_it_holds_alike_on_every_backend) {
  create(2);
  queues().admission_limit(tenant, queue, forgeyard::RateLimit{10, std::chrono::minutes(1)});
  forgeyard::QueueOptions fair;
  fair.fairness = true;
  queues().create(tenant, "fair", fair);
  queues().fairness_weight(tenant, "fair", "vip", 3);
  forgeyard::ResourceLimits limits;
  limits.rate = forgeyard::RateLimit{5, std::chrono::seconds(1)};
  limits.max_in_flight = 3;
  queues().resource_limit(tenant, "smtp", limits);
  queues().breaker_configure(tenant, "smtp", forgeyard::BreakerOptions{});
  for (int i = 0; i < 3; ++i) send("A");
  OutgoingMessage bound{"mail"};
  bound.resource = "smtp";
  queues().enqueue(tenant, queue, bound);
  BOOST_TEST(claim(10).size() == 3u);  // A's two and the mail
  const auto rows = queues().flow_state(tenant);
  BOOST_REQUIRE_EQUAL(rows.size(), 5u);
  auto check = [&](std::size_t i, const char* kind, std::optional<std::string> q, std::optional<std::string> subject,
                   const char* limit) {
    BOOST_TEST_CONTEXT("row " << i) {
      BOOST_TEST(rows[i].kind == kind);
      BOOST_TEST(rows[i].queue.value_or("(none)") == q.value_or("(none)"));
      BOOST_TEST(rows[i].subject.value_or("(none)") == subject.value_or("(none)"));
      BOOST_TEST(rows[i].limit == limit);
    }
  };
  check(0, "admission_limit", queue, std::nullopt, "10 per 00:01:00");
  BOOST_TEST(rows[0].available.value_or(-1) == 6);  // four of ten taken
  check(1, "breaker", std::nullopt, std::string("smtp"),
        "opens at 0.5 of the last 100 (at least 10), open for 00:00:30, 1 half-open");
  BOOST_TEST(rows[1].state.value_or("(none)") == "closed");
  BOOST_TEST(rows[1].in_flight.value_or(-1) == 1);
  BOOST_TEST(rows[1].counted.value_or(-1) == 0);
  check(2, "fairness_weight", std::string("fair"), std::string("vip"), "weight 3");
  check(3, "key_limit", queue, std::string("A"), "max_in_flight_per_key 2");
  BOOST_TEST(rows[3].available.value_or(-1) == 0);
  BOOST_TEST(rows[3].in_flight.value_or(-1) == 2);
  BOOST_TEST(rows[3].counted.value_or(-1) == 3);
  BOOST_TEST(rows[3].delayed.value_or(-1) == 1);
  check(4, "resource_limit", std::nullopt, std::string("smtp"), "5 per 00:00:01 burst 5, max_in_flight 3");
  BOOST_TEST(rows[4].available.value_or(-1) == 4);
  BOOST_TEST(rows[4].in_flight.value_or(-1) == 1);
  BOOST_TEST(rows[4].refused.value_or(-1) == 0);
  BOOST_TEST(queues().flow_state("nobody").empty());
  // storage stats and metrics carry the same rows, with their tenant.
  std::size_t seen = 0;
  const forgeyard::StoreStats stats = store->stats();
  for (const auto& f : stats.flow)
    if (f.tenant == tenant) {
      BOOST_TEST(f.limit.kind == rows[seen].kind);
      BOOST_TEST(f.limit.in_flight.value_or(-1) == rows[seen].in_flight.value_or(-1));
      ++seen;
    }
  BOOST_TEST(seen == rows.size());
  // The queue's depth there counts A's third as waiting (and as ready), as queue_stats does.
  bool found = false;
  for (const auto& q : stats.queues)
    if (q.tenant == tenant && q.queue == queue) {
      found = true;
      BOOST_TEST(q.depth.ready == 1);
      BOOST_TEST(q.depth.waiting == 1);
      BOOST_TEST(q.depth.retries_delayed == 0);
    }
  BOOST_TEST(found);
  const std::string metrics = forgeyard::prometheus_text(stats, store->metrics());
  BOOST_TEST(metrics.find("forgeyard_queue_waiting_messages{tenant=\"" + tenant + "\",queue=\"" + queue + "\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(metrics.find("forgeyard_queue_retries_delayed{tenant=\"" + tenant + "\",queue=\"" + queue + "\"} 0\n") !=
             std::string::npos);
  // (A queue's keys summed: a series per key would be unbounded.)
  BOOST_TEST(metrics.find("forgeyard_flow_delayed{tenant=\"" + tenant + "\",queue=\"" + queue +
                          "\",kind=\"key_limit\"} 1\n") != std::string::npos);
  BOOST_TEST(metrics.find("forgeyard_flow_breakers{tenant=\"" + tenant + "\",state=\"closed\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(metrics.find("forgeyard_flow_in_flight{tenant=\"" + tenant + "\",kind=\"resource_limit\"} 1\n") !=
             std::string::npos);
  BOOST_TEST(metrics.find("smtp") == std::string::npos);  // no resource name in a label
  BOOST_TEST(metrics.find("forgeyard_flow_available{tenant=\"" + tenant + "\",queue=\"" + queue +
                          "\",kind=\"admission_limit\"} 6\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_key_limits_are_refused) {
  forgeyard::QueueOptions o;
  o.max_in_flight_per_key = 0;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023",
                 "queue option max_in_flight_per_key must be a positive integer");
  o.max_in_flight_per_key = 2000000;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023",
                 "queue option max_in_flight_per_key must be at most 1000000");
  o.max_in_flight_per_key = 2;
  o.partition_ordered = true;
  FY_CHECK_ERROR(queues().create(tenant, queue, o), ErrorKind::InvalidArgument, "22023",
                 "queue option max_in_flight_per_key cannot be combined with ordering partition (which hands out one "
                 "message of a partition_key at a time)");
  FY_CHECK_ERROR(queues().stats(tenant, queue), ErrorKind::NotFound, "42704");
}

BOOST_AUTO_TEST_SUITE_END()
