// Randomized properties of consuming with the worker and the inbox (seed 001 §406), on every
// backend: the same event delivered many times has one effect; a tenant's events never reach
// another tenant's consumer; the worker never acks a message before the consumer's transaction
// committed. Handlers fail at random before and after their commit. The seed is printed; set
// FORGEYARD_PROPERTY_SEED to replay a run.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::Fields;

namespace {
unsigned property_seed() {
  if (const char* s = std::getenv("FORGEYARD_PROPERTY_SEED")) return static_cast<unsigned>(std::stoul(s));
  return std::random_device{}();
}

std::string random_uuid(std::mt19937& rng) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
    s += hex[rng() % 16];
  }
  s[14] = '4';  // version 4, variant 10: a valid uuid on both backends
  s[19] = '8';
  return s;
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(properties, conformance::Backend)

BOOST_AUTO_TEST_CASE(each_event_has_one_effect_stays_in_its_tenant_and_is_acked_only_after_commit) {
  const unsigned seed = property_seed();
  BOOST_TEST_MESSAGE("FORGEYARD_PROPERTY_SEED=" << seed);
  std::mt19937 rng(seed);
  const std::string table = unique_identifier("effects");
  create_versioned_table(table);
  const std::vector<std::string> tenants{tenant, tenant + "-b"};
  std::map<std::string, std::set<std::string>> events;  // tenant -> its distinct event ids
  forgeyard::QueueOptions options;
  options.max_attempts = 1000;  // random failures must not dead-letter anything
  options.backoff_base = 1ms;
  options.backoff_max = 10ms;
  for (const auto& t : tenants) {
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value) VALUES ('" + t + "', 1, 0)");
    store->queues().create(t, "events", options);
    // Producers re-publish: each event is sent 1 to 3 times, as separate messages, in random order.
    std::vector<std::string> sends;
    for (int i = 0; i < 30; ++i) {
      auto id = random_uuid(rng);
      events[t].insert(id);
      for (unsigned n = 1 + rng() % 3; n > 0; --n) sends.push_back(id);
    }
    std::shuffle(sends.begin(), sends.end(), rng);
    for (const auto& id : sends) store->queues().enqueue(t, "events", {t + "/" + id});
  }

  auto observer = open_another(2);
  std::map<std::string, int> committed_effects;  // tenant -> effects its handlers committed
  int failed_before_commit = 0, failed_after_commit = 0, deliveries = 0;
  for (const auto& t : tenants) {
    forgeyard::WorkerOptions w;
    w.tenant = t;
    w.queue = "events";
    w.consumer = "billing";
    w.batch = 1 + static_cast<int>(rng() % 5);
    w.stop_when_idle = true;
    auto handler = [&](const forgeyard::Delivery& d) {
      ++deliveries;
      const std::string payload(d.payload.begin(), d.payload.end());
      const auto slash = payload.find('/');
      BOOST_REQUIRE(slash != std::string::npos);
      // A tenant's event never reaches another tenant's consumer.
      BOOST_TEST(payload.substr(0, slash) == t);
      const std::string event = payload.substr(slash + 1);
      BOOST_TEST(events[t].count(event) == 1u);
      // Not acked yet: the delivery is still in flight while the handler works.
      BOOST_TEST(observer->queues().stats(t, "events").in_flight >= 1);
      auto tx = store->begin();
      if (tx->queues().inbox_accept(t, "billing", event)) {
        Fields key{{"tenant_id", t}, {"id", std::int64_t{1}}};
        auto row = tx->versioned_rows().get(table, key);
        BOOST_REQUIRE(row.has_value());
        tx->versioned_rows().update(table, key, row->version,
                                    {{"value", std::get<std::int64_t>(row->values.at("value")) + 1}});
        if (rng() % 5 == 0) {
          ++failed_before_commit;
          throw std::runtime_error("crashed before commit");  // rolled back: no effect, must be redelivered
        }
        tx->commit();
        ++committed_effects[t];
      } else {
        tx->commit();  // a duplicate: the inbox already holds this event's effect
      }
      if (rng() % 5 == 0) {
        ++failed_after_commit;
        throw std::runtime_error("crashed after commit, before the ack");  // redelivered: the inbox dedups
      }
      return forgeyard::HandlerResult::ack();
    };
    for (int round = 0; round < 200; ++round) {
      forgeyard::run_worker(store->queues(), w, handler, {});
      auto s = store->queues().stats(t, "events");
      if (s.ready + s.in_flight + s.delayed == 0) break;
      clock.advance(1s);  // past the retries' backoff
    }
  }

  BOOST_TEST_MESSAGE("deliveries " << deliveries << ", failed before commit " << failed_before_commit
                                   << ", failed after commit " << failed_after_commit);
  for (const auto& t : tenants) {
    auto s = store->queues().stats(t, "events");
    BOOST_TEST(s.ready + s.in_flight + s.delayed + s.dead == 0);  // every message acked
    auto row = store->versioned_rows().get(table, {{"tenant_id", t}, {"id", std::int64_t{1}}});
    BOOST_REQUIRE(row.has_value());
    // One effect per distinct event: none lost to an early ack, none doubled by a redelivery.
    BOOST_TEST(std::get<std::int64_t>(row->values.at("value")) == static_cast<std::int64_t>(events[t].size()));
    BOOST_TEST(committed_effects[t] == static_cast<int>(events[t].size()));
  }
}

BOOST_AUTO_TEST_SUITE_END()
