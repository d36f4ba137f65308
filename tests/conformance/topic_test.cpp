// Topics: durable pub/sub and the event type registry (docs/sql-api.md#topics), on every backend.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::Event;
using forgeyard::SubscriptionOptions;

namespace {
struct TopicFixture : conformance::Backend {
  std::string topic = "orders";
  forgeyard::Topics& topics() { return store->topics(); }
  forgeyard::Queues& queues() { return store->queues(); }
  void create(const forgeyard::TopicOptions& options = {}) {
    topics().register_event_type(tenant, "order.created", 1);
    topics().create(tenant, topic, options);
  }
  static Event event(const std::string& payload, int version = 1, const std::string& type = "order.created") {
    Event e;
    e.event_type = type;
    e.version = version;
    e.payload = payload;
    return e;
  }
  std::int64_t publish(const std::string& payload, int version = 1) {
    return topics().publish(tenant, topic, event(payload, version));
  }
  std::vector<std::string> drain(const std::string& subscription) {
    std::vector<std::string> out;
    for (;;) {
      auto got = queues().claim(tenant, subscription, "c", 100);
      if (got.empty()) return out;
      for (const auto& d : got) {
        out.push_back(d.payload);
        queues().ack(tenant, subscription, d.msg_id, d.claim_token);
      }
    }
  }
};

SubscriptionOptions accepting(int min, int max) {
  SubscriptionOptions o;
  o.event_types = std::map<std::string, forgeyard::VersionRange>{{"order.created", {min, max}}};
  return o;
}

int events_for_fan_out() {
  const char* n = std::getenv("FORGEYARD_TOPIC_EVENTS");
  return n ? std::atoi(n) : 2000;
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(topics, TopicFixture)

BOOST_AUTO_TEST_CASE(a_rolled_back_publish_delivers_nothing_and_a_committed_one_reaches_every_subscription) {
  create();
  topics().subscribe(tenant, topic, "billing");
  topics().subscribe(tenant, topic, "shipping");
  {
    auto tx = store->begin();
    tx->topics().publish(tenant, topic, event("rolled back"));
    tx->rollback();
  }
  BOOST_TEST(queues().claim(tenant, "billing", "c", 10).empty());
  BOOST_TEST(queues().stats(tenant, "billing").bytes == 0);
  auto tx = store->begin();
  const std::int64_t seq = tx->topics().publish(tenant, topic, event("committed"));
  tx->commit();
  BOOST_TEST(seq > 0);
  auto billing = topics().claim(tenant, "billing", "c", 10);
  BOOST_REQUIRE(billing.size() == 1u);
  BOOST_TEST(billing[0].delivery.payload == "committed");
  BOOST_TEST(billing[0].topic == topic);
  BOOST_TEST(billing[0].event_type == "order.created");
  BOOST_TEST(billing[0].version == 1);
  BOOST_TEST(billing[0].event_seq == seq);
  BOOST_TEST(drain("shipping") == std::vector<std::string>{"committed"});
  // A later publish has a greater event_seq.
  BOOST_TEST(publish("next") > seq);
}

BOOST_AUTO_TEST_CASE(an_unregistered_type_or_version_is_refused_with_schema_unsupported) {
  create();
  topics().subscribe(tenant, topic, "billing");
  FY_CHECK_ERROR(publish("x", 2), ErrorKind::SchemaUnsupported, "FY050",
                 "event type \"order.created\" version 2 is not registered for tenant \"" + tenant + "\"");
  FY_CHECK_ERROR(topics().publish(tenant, topic, event("x", 1, "order.deleted")), ErrorKind::SchemaUnsupported,
                 "FY050");
  BOOST_TEST(!forgeyard::is_retryable(ErrorKind::SchemaUnsupported));
  BOOST_TEST(queues().claim(tenant, "billing", "c", 10).empty());
}

BOOST_AUTO_TEST_CASE(filters_skip_other_types_and_quarantine_versions_outside_the_range) {
  create();
  topics().register_event_type(tenant, "order.created", 2);
  topics().register_event_type(tenant, "order.shipped", 1);
  topics().subscribe(tenant, topic, "v1only", accepting(1, 1));
  topics().subscribe(tenant, topic, "all");
  publish("v1", 1);
  publish("v2", 2);
  topics().publish(tenant, topic, event("shipped", 1, "order.shipped"));
  BOOST_TEST(drain("v1only") == std::vector<std::string>{"v1"});
  BOOST_TEST(drain("all") == (std::vector<std::string>{"v1", "v2", "shipped"}));
  auto dead = queues().dead_letters(tenant, "v1only");
  BOOST_REQUIRE(dead.size() == 1u);  // v2 quarantined, order.shipped filtered out (not dead)
  BOOST_TEST(dead[0].error_class == "schema_unsupported");
  BOOST_TEST(dead[0].error == "version 2 of event type \"order.created\" is outside the subscription's accepted range");
}

BOOST_AUTO_TEST_CASE(an_n_minus_one_consumer_keeps_working_while_a_new_version_is_registered_and_published) {
  create();
  topics().subscribe(tenant, topic, "old_reader", accepting(1, 1));
  topics().subscribe(tenant, topic, "new_reader", accepting(1, 2));
  publish("before");
  // The old consumer keeps claiming and acking on its own connection throughout.
  std::atomic<bool> stop{false};
  std::atomic<int> handled{0};
  std::vector<std::string> old_seen;  // read after the join
  std::thread reader([&] {
    auto s = open_another(1);
    while (!stop) {
      for (const auto& d : s->queues().claim(tenant, "old_reader", "old", 10)) {
        old_seen.push_back(d.payload);
        s->queues().ack(tenant, "old_reader", d.msg_id, d.claim_token);
        ++handled;
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  topics().register_event_type(tenant, "order.created", 2);
  publish("v2", 2);
  publish("after", 1);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (handled < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  stop = true;
  reader.join();
  BOOST_TEST(old_seen == (std::vector<std::string>{"before", "after"}));
  BOOST_TEST(drain("new_reader") == (std::vector<std::string>{"before", "v2", "after"}));
  BOOST_TEST(queues().dead_letters(tenant, "old_reader").size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_subscription_rejects_the_publish_or_dead_letters_the_event) {
  create();
  SubscriptionOptions strict;
  strict.queue.max_messages = 2;
  strict.queue.admit_percent[2] = 100;  // realtime
  strict.queue.admit_percent[3] = 100;  // interactive
  SubscriptionOptions lossy = strict;
  lossy.queue.max_messages = 1;
  lossy.on_full = forgeyard::OnFull::DeadLetter;
  topics().subscribe(tenant, topic, "lossy", lossy);
  topics().subscribe(tenant, topic, "strict", strict);
  publish("a");
  publish("b");  // lossy is full: a dead letter there, strict takes it
  FY_CHECK_ERROR(publish("c"), ErrorKind::QueueFull, "FY020",
                 "queue \"strict\" is full for priority class interactive");
  auto dead = queues().dead_letters(tenant, "lossy");
  BOOST_REQUIRE(dead.size() == 1u);
  BOOST_TEST(dead[0].error_class == "backlog_full");
  BOOST_TEST(drain("lossy") == std::vector<std::string>{"a"});
  BOOST_TEST(drain("strict") == (std::vector<std::string>{"a", "b"}));  // "c" was never published
  auto lag = topics().lag(tenant, topic);
  BOOST_REQUIRE(lag.size() == 2u);
  BOOST_TEST(lag[0].subscription == "lossy");
  BOOST_TEST(lag[0].dead == 1);
  BOOST_TEST(lag[0].backlog == 0);
}

BOOST_AUTO_TEST_CASE(fan_out_is_bounded_by_max_subscriptions) {
  forgeyard::TopicOptions o;
  o.max_subscriptions = 2;
  create(o);
  topics().subscribe(tenant, topic, "a");
  topics().subscribe(tenant, topic, "b");
  FY_CHECK_ERROR(topics().subscribe(tenant, topic, "c"), ErrorKind::InvalidArgument, "22023",
                 "topic \"orders\" has its max_subscriptions of 2");
  BOOST_TEST(topics().unsubscribe(tenant, topic, "b"));
  BOOST_TEST(!topics().unsubscribe(tenant, topic, "b"));
  topics().subscribe(tenant, topic, "c");
  auto list = topics().list(tenant);
  BOOST_REQUIRE(list.size() == 1u);
  BOOST_TEST(list[0].options.max_subscriptions == 2);
  BOOST_TEST(list[0].subscriptions == (std::vector<std::string>{"a", "c"}));
}

BOOST_AUTO_TEST_CASE(another_tenant_cannot_reach_a_topic_or_its_events) {
  create();
  topics().subscribe(tenant, topic, "billing");
  publish("secret");
  const std::string other = unique("other");
  topics().register_event_type(other, "order.created", 1);
  FY_CHECK_ERROR(topics().publish(other, topic, event("x")), ErrorKind::NotFound, "42704",
                 "topic \"orders\" does not exist for tenant \"" + other + "\"");
  FY_CHECK_ERROR(topics().subscribe(other, topic, "spy"), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(topics().rewind(other, topic, "billing", forgeyard::from_unix_usecs(0)), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(topics().claim(other, "billing", "spy"), ErrorKind::NotFound, "42704");
  FY_CHECK_ERROR(queues().claim(other, "billing", "spy"), ErrorKind::NotFound, "42704");
  BOOST_TEST(topics().list(other).empty());
  BOOST_TEST(drain("billing") == std::vector<std::string>{"secret"});
}

BOOST_AUTO_TEST_CASE(replay_within_retention_and_a_repeated_event_id) {
  forgeyard::TopicOptions o;
  o.retention = 1h;
  create(o);
  topics().subscribe(tenant, topic, "first");
  Event e = event("one");
  e.event_id = "00000000-0000-4000-8000-0000000000e1";
  const std::int64_t seq = topics().publish(tenant, topic, e);
  BOOST_TEST(topics().publish(tenant, topic, e) == seq);  // the same event again: the first event_seq
  e.payload = "other";
  FY_CHECK_ERROR(topics().publish(tenant, topic, e), ErrorKind::IdempotencyMismatch, "FY011");
  publish("two");
  SubscriptionOptions oldest;
  oldest.start = forgeyard::StartAt::Oldest;
  topics().subscribe(tenant, topic, "late", oldest);
  topics().subscribe(tenant, topic, "fresh");
  BOOST_TEST(drain("late") == (std::vector<std::string>{"one", "two"}));
  BOOST_TEST(drain("fresh").empty());
  BOOST_TEST(drain("first") == (std::vector<std::string>{"one", "two"}));
  clock.advance(10min);
  BOOST_TEST(topics().rewind(tenant, topic, "first", clock.now() - 1h) == 2);
  auto again = topics().claim(tenant, "first", "c", 10);
  BOOST_REQUIRE(again.size() == 2u);
  BOOST_TEST(*again[0].delivery.event_id == "00000000-0000-4000-8000-0000000000e1");
  // The inbox makes a replayed event's effect happen once.
  BOOST_TEST(queues().inbox_accept(tenant, "billing-consumer", *again[0].delivery.event_id));
  BOOST_TEST(!queues().inbox_accept(tenant, "billing-consumer", *again[0].delivery.event_id));
  clock.advance(2h);
  BOOST_TEST(topics().rewind(tenant, topic, "fresh", clock.now() - 24h) == 0);  // past the retention
  FY_CHECK_ERROR(topics().rewind(tenant, topic, "ghost", clock.now()), ErrorKind::NotFound, "42704");
}

BOOST_AUTO_TEST_CASE(four_subscriptions_of_three_consumers_each_get_every_event_once_despite_a_killed_consumer) {
  create();
  const std::vector<std::string> subs = {"s0", "s1", "s2", "s3"};
  for (const auto& s : subs) topics().subscribe(tenant, topic, s);
  const int total = events_for_fan_out();
  for (int batch = 0; batch < total / 100; ++batch) {
    std::vector<Event> events;
    for (int i = 0; i < 100; ++i) events.push_back(event(std::to_string(batch * 100 + i)));
    auto tx = store->begin();
    BOOST_REQUIRE(tx->topics().publish_batch(tenant, topic, events).size() == 100u);
    tx->commit();
  }
  // A consumer process claims a batch from every subscription and is killed before it acks.
  pid_t child = fork();
  if (child == 0) {
    try {
      auto s = open_another(1);
      for (const auto& sub : subs)
        if (s->queues().claim(tenant, sub, "doomed", 25, 30s).size() != 25u) _exit(3);
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
  clock.advance(31s);  // the dead consumer's deliveries lapse
  std::mutex m;
  std::map<std::string, std::map<std::string, int>> acked;  // subscription -> payload -> acks
  std::vector<std::string> failures;
  std::vector<std::thread> consumers;
  for (const auto& sub : subs)
    for (int c = 0; c < 3; ++c)
      consumers.emplace_back([&, sub, c] {
        auto s = open_another(1);
        std::vector<forgeyard::Ack> acks;
        std::vector<std::string> payloads;
        for (;;) {
          std::vector<forgeyard::Delivery> got;
          try {
            got = s->queues().ack_and_claim(tenant, sub, "c" + std::to_string(c), acks, 50);
          } catch (const forgeyard::Error& e) {
            // Twelve consumers on one SQLite file may outwait its busy timeout: the call did
            // nothing, and the same acks are sent again (SerializationFailure is retryable).
            if (e.kind() != ErrorKind::SerializationFailure) {
              std::lock_guard lock(m);
              failures.push_back(e.what());
              return;
            }
            continue;
          }
          {
            std::lock_guard lock(m);
            for (const auto& p : payloads) ++acked[sub][p];
          }
          acks.clear();
          payloads.clear();
          if (got.empty()) break;
          for (const auto& d : got) {
            acks.emplace_back(d.msg_id, d.claim_token);
            payloads.push_back(d.payload);
          }
        }
      });
  for (auto& t : consumers) t.join();
  BOOST_TEST(failures.empty());
  for (const auto& sub : subs) {
    BOOST_TEST(acked[sub].size() == static_cast<std::size_t>(total));  // none lost
    int twice = 0;
    for (const auto& [payload, n] : acked[sub]) twice += n - 1;
    BOOST_TEST(twice == 0);  // none acked twice
    const auto stats = queues().stats(tenant, sub);
    BOOST_TEST(stats.ready + stats.in_flight + stats.delayed == 0);
    BOOST_TEST(stats.bytes == 0);
  }
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_and_changes_nothing) {
  create();
  FY_CHECK_ERROR(topics().create(tenant, topic), ErrorKind::InvalidArgument, "42710");
  forgeyard::TopicOptions bad;
  bad.max_subscriptions = 0;
  FY_CHECK_ERROR(topics().create(tenant, "bad", bad), ErrorKind::InvalidArgument, "22023",
                 "topic option max_subscriptions must be between 1 and 256");
  FY_CHECK_ERROR(topics().create(tenant, ""), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(topics().create(tenant, std::string(129, 't')), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(topics().register_event_type(tenant, "x", 0), ErrorKind::InvalidArgument, "22023",
                 "version must be between 1 and 1000000");
  FY_CHECK_ERROR(topics().register_event_type(tenant, "order.created", 1, forgeyard::RetentionClass::Audit),
                 ErrorKind::InvalidArgument, "42710");
  FY_CHECK_ERROR(topics().subscribe(tenant, "nope", "s"), ErrorKind::NotFound, "42704",
                 "topic \"nope\" does not exist for tenant \"" + tenant + "\"");
  FY_CHECK_ERROR(topics().subscribe(tenant, topic, "s", accepting(3, 2)), ErrorKind::InvalidArgument, "22023",
                 "event_types min must not be over max");
  BOOST_TEST(topics().list(tenant).size() == 1u);
  BOOST_TEST(topics().list(tenant)[0].subscriptions.empty());
  BOOST_TEST(topics().drop(tenant, topic));
  BOOST_TEST(!topics().drop(tenant, topic));
}

BOOST_AUTO_TEST_SUITE_END()

// ---- A state transition may publish to a topic instead of enqueueing -----------------------

namespace {
struct PublishingTransition : TopicFixture {
  std::string table = unique_identifier("orders");
  PublishingTransition() {
    create_versioned_table(table);
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value, note) VALUES ('" + tenant + "', 1, 0, 'new')");
    create();
    topics().subscribe(tenant, topic, "billing");
    topics().subscribe(tenant, topic, "shipping");
  }
  forgeyard::StateTransition paid(std::int64_t expected, int version = 1) const {
    forgeyard::StateTransition t;
    t.tenant = tenant;
    t.table = table;
    t.key = {{"tenant_id", tenant}, {"id", std::int64_t{1}}};
    t.expected_version = expected;
    t.changes = {{"note", std::string("paid")}};
    t.audit.actor = "tester";
    t.audit.action = "order.paid";
    t.audit.resource = "order/1";
    t.publication = forgeyard::StateTransition::Publication{topic, event("order 1 is paid", version)};
    return t;
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(publishing_transition, PublishingTransition)

BOOST_AUTO_TEST_CASE(state_audit_and_event_commit_together_and_reach_every_subscription) {
  const auto r = forgeyard::transition(*store, paid(1));
  BOOST_TEST(r.version == 2);
  BOOST_REQUIRE(r.event_seq.has_value());
  BOOST_TEST(!r.msg_id.has_value());
  BOOST_TEST(drain("billing") == std::vector<std::string>{"order 1 is paid"});
  BOOST_TEST(drain("shipping") == std::vector<std::string>{"order 1 is paid"});
}

BOOST_AUTO_TEST_CASE(an_unregistered_version_leaves_no_state_change_and_no_event) {
  FY_CHECK_ERROR(forgeyard::transition(*store, paid(1, 9)), ErrorKind::SchemaUnsupported, "FY050");
  BOOST_TEST(store->versioned_rows().get(table, {{"tenant_id", tenant}, {"id", std::int64_t{1}}})->version == 1);
  BOOST_TEST(store->audit().head(tenant).seq == 0);
  BOOST_TEST(drain("billing").empty());
  auto both = paid(1);
  both.outbox = forgeyard::StateTransition::Outbox{"billing", forgeyard::OutgoingMessage{"x"}};
  FY_CHECK_ERROR(forgeyard::transition(*store, both), ErrorKind::InvalidArgument, "22023");
}

BOOST_AUTO_TEST_SUITE_END()
