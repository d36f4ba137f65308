// Flow control, fair queues (docs/operations.md, "Flow control"): within a class, claims
// interleave fairness keys by their weights, on every backend.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using forgeyard::ErrorKind;
using forgeyard::OutgoingMessage;

namespace {
struct FairFixture : conformance::Backend {
  std::string queue = "fair";
  forgeyard::Queues& queues() { return store->queues(); }
  void create() {
    forgeyard::QueueOptions o;
    o.fairness = true;
    queues().create(tenant, queue, o);
  }
  // n messages of one key, in one call; the payload is the key.
  void send(const std::string& key, int n) {
    std::vector<OutgoingMessage> batch;
    for (int i = 0; i < n; ++i) {
      OutgoingMessage m{key};
      m.fairness_key = key;
      batch.push_back(m);
    }
    queues().enqueue_many(tenant, queue, batch);
  }
  // Claims and acks n messages one at a time; the keys in claim order.
  std::vector<std::string> take(int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) {
      auto got = queues().claim(tenant, queue, "w", 1);
      if (got.empty()) break;
      keys.emplace_back(got[0].payload.begin(), got[0].payload.end());
      queues().ack(tenant, queue, got[0].msg_id, got[0].claim_token);
    }
    return keys;
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(flow_fair, FairFixture)

BOOST_AUTO_TEST_CASE(shares_follow_the_weights_within_ten_percent_over_1000_claims) {
  create();
  queues().fairness_weight(tenant, queue, "b", 3);
  queues().fairness_weight(tenant, queue, "c", 2);
  // a's backlog first: by age, a would take all 1000 claims.
  send("a", 600);
  send("b", 600);
  send("c", 600);
  std::map<std::string, int> share;
  std::vector<forgeyard::Ack> acks;
  int claimed = 0;
  while (claimed < 1000) {
    auto got = queues().claim(tenant, queue, "w", 10);
    BOOST_REQUIRE(!got.empty());
    for (const auto& d : got) {
      ++share[std::string(d.payload.begin(), d.payload.end())];
      acks.push_back({d.msg_id, d.claim_token});
    }
    claimed += static_cast<int>(got.size());
    queues().ack_many(tenant, queue, acks);
    acks.clear();
  }
  // Weights 1 : 3 : 2 of 1000 claims: 167, 500, 333, each within 10%.
  BOOST_TEST(share["a"] >= 150);
  BOOST_TEST(share["a"] <= 183);
  BOOST_TEST(share["b"] >= 450);
  BOOST_TEST(share["b"] <= 550);
  BOOST_TEST(share["c"] >= 300);
  BOOST_TEST(share["c"] <= 366);
}

BOOST_AUTO_TEST_CASE(a_burst_of_one_key_delays_another_keys_next_message_by_a_few_claims) {
  create();
  send("a", 2000);
  BOOST_TEST(take(5).size() == 5u);
  send("b", 1);
  const auto next = take(3);
  BOOST_TEST(next.size() == 3u);
  BOOST_TEST(std::count(next.begin(), next.end(), "b") == 1);
}

BOOST_AUTO_TEST_CASE(an_idle_key_banks_no_credit) {
  create();
  send("b", 1);
  BOOST_TEST(take(1) == std::vector<std::string>{"b"});
  // b is idle while a's messages are claimed; then b sends ten.
  send("a", 100);
  BOOST_TEST(take(50).size() == 50u);
  send("b", 10);
  // b starts where the class is now, not where it left: the two keys alternate.
  const auto next = take(10);
  const auto bs = std::count(next.begin(), next.end(), "b");
  BOOST_TEST(bs >= 4);
  BOOST_TEST(bs <= 6);
}

BOOST_AUTO_TEST_CASE(messages_without_a_key_share_one_and_a_plain_queue_keeps_its_age_order) {
  create();
  send("a", 20);
  queues().enqueue(tenant, queue, {"none"});
  queues().enqueue(tenant, queue, {"none"});
  // One key ("" : no key) beside a's backlog: they alternate (a, a, none, a, none, a).
  const auto next = take(6);
  BOOST_TEST(std::count(next.begin(), next.end(), "none") == 2);
  BOOST_TEST(next.back() == "a");
  queues().create(tenant, "plain", {});
  for (const char* k : {"x", "x", "y"}) {
    OutgoingMessage m{k};
    m.fairness_key = k;
    queues().enqueue(tenant, "plain", m);
  }
  std::string order;
  for (const auto& d : queues().claim(tenant, "plain", "w", 3))
    order += std::string(d.payload.begin(), d.payload.end());
  BOOST_TEST(order == "xxy");
}

BOOST_AUTO_TEST_CASE(a_redriven_dead_letter_of_a_fair_queue_is_claimed_again) {
  forgeyard::QueueOptions o;
  o.fairness = true;
  o.keep_dead_letter_payload = true;
  queues().create(tenant, queue, o);
  send("a", 1);
  auto got = queues().claim(tenant, queue, "w", 1);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(
      (queues().nack(tenant, queue, got[0].msg_id, got[0].claim_token, "bad", true) == forgeyard::NackOutcome::Dead));
  send("b", 2);
  BOOST_TEST(queues().redrive(tenant, queue, {got[0].msg_id}) == 1);
  // It takes a new pass, as a new message of a would: after b's first (b, a, b).
  const auto order = take(3);
  BOOST_TEST(order.size() == 3u);
  BOOST_TEST(order.front() == "b");
  BOOST_TEST(std::count(order.begin(), order.end(), "a") == 1);
}

BOOST_AUTO_TEST_CASE(bad_weights_and_queues_without_fairness_are_refused) {
  create();
  FY_CHECK_ERROR(queues().fairness_weight(tenant, queue, "a", 0), ErrorKind::InvalidArgument, "22023",
                 "weight must be between 1 and 1000");
  FY_CHECK_ERROR(queues().fairness_weight(tenant, queue, "a", 1001), ErrorKind::InvalidArgument, "22023",
                 "weight must be between 1 and 1000");
  FY_CHECK_ERROR(queues().fairness_weight(tenant, queue, "", 2), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(queues().fairness_weight(tenant, "nope", "a", 2), ErrorKind::NotFound, "42704");
  queues().create(tenant, "plain", {});
  FY_CHECK_ERROR(queues().fairness_weight(tenant, "plain", "a", 2), ErrorKind::InvalidArgument, "22023",
                 "queue \"plain\" is not fair");
  queues().fairness_weight(tenant, queue, "a", std::nullopt);  // back to 1: allowed
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
struct AgingFixture : conformance::Backend {
  std::string queue = "aging";
  forgeyard::Queues& queues() { return store->queues(); }
  void send(const std::string& payload, forgeyard::Priority p) {
    OutgoingMessage m{payload};
    m.priority = p;
    queues().enqueue(tenant, queue, m);
  }
  std::string next() {
    auto got = queues().claim(tenant, queue, "w", 1);
    if (got.empty()) return "";
    queues().ack(tenant, queue, got[0].msg_id, got[0].claim_token);
    return std::string(got[0].payload.begin(), got[0].payload.end());
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(flow_aging, AgingFixture)

BOOST_AUTO_TEST_CASE(a_waiting_message_climbs_a_class_per_interval_but_never_above_realtime) {
  using forgeyard::Priority;
  forgeyard::QueueOptions o;
  o.aging = std::chrono::minutes(1);
  queues().create(tenant, queue, o);
  send("bulk-old", Priority::Bulk);
  clock.advance(std::chrono::seconds(150));  // two intervals: bulk competes as interactive
  send("interactive", Priority::Interactive);
  send("bulk-new", Priority::Bulk);
  // In class interactive the older message goes first; the new bulk one has not aged.
  BOOST_TEST(next() == "bulk-old");
  BOOST_TEST(next() == "interactive");
  BOOST_TEST(next() == "bulk-new");
  // An hour of waiting lifts bulk to realtime and no further.
  send("bulk", Priority::Bulk);
  clock.advance(std::chrono::hours(1));
  send("realtime", Priority::Realtime);
  send("security", Priority::SecurityControl);
  send("emergency", Priority::Emergency);
  BOOST_TEST(next() == "emergency");
  BOOST_TEST(next() == "security");
  BOOST_TEST(next() == "bulk");  // realtime now, and older than the realtime message
  BOOST_TEST(next() == "realtime");
  BOOST_TEST(next() == "");
}

BOOST_AUTO_TEST_CASE(without_aging_classes_keep_their_order_and_bad_aging_is_refused) {
  using forgeyard::Priority;
  queues().create(tenant, queue, {});
  send("bulk", Priority::Bulk);
  clock.advance(std::chrono::hours(1));
  send("interactive", Priority::Interactive);
  BOOST_TEST(next() == "interactive");
  BOOST_TEST(next() == "bulk");
  forgeyard::QueueOptions o;
  o.aging = std::chrono::hours(24 * 31);
  FY_CHECK_ERROR(queues().create(tenant, "bad", o), ErrorKind::InvalidArgument, "22023");
  o.aging = std::chrono::minutes(1);
  o.fairness = true;
  FY_CHECK_ERROR(
      queues().create(tenant, "bad", o), ErrorKind::InvalidArgument, "22023",
      "queue option aging cannot be combined with fairness (a fair queue orders a class by pass, not by age)");
}

BOOST_AUTO_TEST_SUITE_END()
