// Idempotency keys: docs/sql-api.md#idempotency-keys, on every backend.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <barrier>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::IdempotencyBegin;
using Status = forgeyard::IdempotencyBegin::Status;

namespace {
struct IdemFixture : conformance::Backend {
  forgeyard::IdempotencyKey key{tenant, "run.create:project/42", unique("key")};
  forgeyard::Bytes digest = forgeyard::request_digest("create run 7 in project 42");
  forgeyard::Idempotency& idem() { return store->idempotency(); }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(idempotency, IdemFixture)

BOOST_AUTO_TEST_CASE(a_new_key_starts_and_a_completed_one_replays_its_response) {
  auto first = idem().begin(key, digest);
  BOOST_TEST((first.status == Status::Started));
  BOOST_TEST(first.attempt > 0);
  BOOST_TEST(!first.recovery_point.has_value());
  const forgeyard::Bytes response("run-7\0\xff", 7);  // bytes, not text
  idem().complete(key, response, first.attempt);
  auto again = idem().begin(key, digest);
  BOOST_TEST((again.status == Status::Replay));
  BOOST_REQUIRE(again.response.has_value());
  BOOST_TEST(*again.response == response);
  BOOST_TEST(again.attempt == first.attempt);  // the attempt that completed it
  BOOST_TEST(idem().status(key)->status == "completed");
}

BOOST_AUTO_TEST_CASE(the_same_key_with_another_request_is_a_mismatch) {
  auto b = idem().begin(key, digest);
  FY_CHECK_ERROR(idem().begin(key, forgeyard::request_digest("something else")), ErrorKind::IdempotencyMismatch,
                 "FY011", "idempotency key \"" + key.key + "\" was used with a different request");
  idem().complete(key, std::string("ok"), b.attempt);
  FY_CHECK_ERROR(idem().begin(key, forgeyard::request_digest("something else")), ErrorKind::IdempotencyMismatch,
                 "FY011");
}

BOOST_AUTO_TEST_CASE(a_live_attempt_makes_others_wait_and_an_expired_one_is_taken_over) {
  auto first = idem().begin(key, digest, 30s);
  idem().checkpoint(key, "uploaded part 1", first.attempt);
  const auto e = conformance::expect_error([&] { idem().begin(key, digest, 30s); });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "InProgress");
  BOOST_TEST(e.retryable());
  clock.advance(31s);
  auto second = idem().begin(key, digest, 30s);
  BOOST_TEST((second.status == Status::Started));
  BOOST_TEST(second.attempt > first.attempt);
  BOOST_TEST(second.recovery_point.value_or("") == "uploaded part 1");
  // The first caller's work is no longer its own.
  FY_CHECK_ERROR(idem().checkpoint(key, "part 2", first.attempt), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(idem().complete(key, std::string("late"), first.attempt), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(idem().abandon(key, first.attempt), ErrorKind::StaleFence, "FY001");
  idem().complete(key, std::string("done"), second.attempt);
  BOOST_TEST(*idem().begin(key, digest).response == "done");
  FY_CHECK_ERROR(idem().complete(key, std::string("twice"), second.attempt), ErrorKind::StaleFence, "FY001");
}

BOOST_AUTO_TEST_CASE(a_checkpoint_extends_the_lock) {
  auto b = idem().begin(key, digest, 30s);
  clock.advance(20s);
  idem().checkpoint(key, "step 1", b.attempt);
  clock.advance(20s);  // 40 s after begin, 20 s after the checkpoint: still held
  FY_CHECK_ERROR(idem().begin(key, digest, 30s), ErrorKind::InProgress, "FY010",
                 "idempotency key \"" + key.key + "\" is in progress elsewhere");
  clock.advance(10s);
  BOOST_TEST(idem().begin(key, digest, 30s).attempt > b.attempt);
}

BOOST_AUTO_TEST_CASE(abandon_lets_the_next_begin_start_afresh) {
  auto b = idem().begin(key, digest);
  idem().checkpoint(key, "half way", b.attempt);
  idem().abandon(key, b.attempt);
  BOOST_TEST(!idem().status(key).has_value());
  auto again = idem().begin(key, digest);
  BOOST_TEST(again.attempt > b.attempt);  // attempt numbers are never reused
  BOOST_TEST(!again.recovery_point.has_value());
  FY_CHECK_ERROR(idem().complete(key, std::string("stale"), b.attempt), ErrorKind::StaleFence, "FY001");
}

BOOST_AUTO_TEST_CASE(unknown_keys_are_not_found) {
  FY_CHECK_ERROR(idem().complete(key, std::string("x"), 1), ErrorKind::NotFound, "P0002",
                 "no idempotency key \"" + key.key + "\" in scope \"" + key.scope + "\"");
  FY_CHECK_ERROR(idem().checkpoint(key, "x", 1), ErrorKind::NotFound, "P0002");
  FY_CHECK_ERROR(idem().abandon(key, 1), ErrorKind::NotFound, "P0002");
  BOOST_TEST(!idem().status(key).has_value());
}

BOOST_AUTO_TEST_CASE(a_key_is_kept_for_its_retention_then_purged) {
  const std::string t = unique("purge");
  forgeyard::IdempotencyKey k1{t, "s", "k1"}, k2{t, "s", "k2"};
  idem().complete(k1, std::string("one"), idem().begin(k1, digest, 1min, 1h).attempt);
  idem().complete(k2, std::string("two"), idem().begin(k2, digest, 1min, 2h).attempt);
  clock.advance(59min);
  BOOST_TEST((idem().begin(k1, digest).status == Status::Replay));
  BOOST_TEST(idem().purge(100, t) == 0);
  clock.advance(2min);  // 61 min: k1's hour is over, k2's two hours are not
  BOOST_TEST(idem().status(k1)->status == "expired");
  BOOST_TEST(idem().status(k2)->status == "completed");
  BOOST_TEST(idem().purge(100, t) == 1);
  BOOST_TEST(!idem().status(k1).has_value());
  clock.advance(2h);
  auto fresh = idem().begin(k2, forgeyard::request_digest("a new request"));  // past retention: unused again
  BOOST_TEST((fresh.status == Status::Started));
  BOOST_TEST(!fresh.recovery_point.has_value());
}

BOOST_AUTO_TEST_CASE(a_key_past_its_retention_stays_held_while_its_lock_is_live) {
  auto b = idem().begin(key, digest, 5min, 5min);
  clock.advance(4min);
  idem().checkpoint(key, "step 1", b.attempt);  // the lock now runs to 9 min, past the retention (5 min)
  clock.advance(90s);
  FY_CHECK_ERROR(idem().begin(key, digest, 5min, 5min), ErrorKind::InProgress, "FY010");
  BOOST_TEST(idem().purge(100, tenant) == 0);  // not purged under a live lock
  idem().complete(key, std::string("done"), b.attempt);
  BOOST_TEST(*idem().begin(key, digest).response == "done");
}

BOOST_AUTO_TEST_CASE(tenants_and_scopes_are_independent) {
  idem().complete(key, std::string("a"), idem().begin(key, digest).attempt);
  forgeyard::IdempotencyKey other_scope{key.tenant, "run.delete:project/42", key.key};
  forgeyard::IdempotencyKey other_tenant{unique("t2"), key.scope, key.key};
  BOOST_TEST((idem().begin(other_scope, forgeyard::request_digest("x")).status == Status::Started));
  BOOST_TEST((idem().begin(other_tenant, forgeyard::request_digest("y")).status == Status::Started));
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused) {
  FY_CHECK_ERROR(idem().begin({"", "s", "k"}, digest), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin({tenant, "", "k"}, digest), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin({tenant, "s", ""}, digest), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin({tenant, std::string(257, 's'), "k"}, digest), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(idem().begin({tenant, "s", std::string(257, 'k')}, digest), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(idem().begin(key, ""), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin(key, std::string(65, 'd')), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(idem().begin(key, digest, 0s), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin(key, digest, 25h), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().begin(key, digest, 10min, 5min), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(idem().purge(0), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST(!idem().status(key).has_value());  // nothing was recorded
}

BOOST_AUTO_TEST_CASE(a_duplicate_waits_for_the_first_transaction_then_replays) {
  auto tx = store->begin();
  auto first = tx->idempotency().begin(key, digest);
  BOOST_REQUIRE((first.status == Status::Started));
  auto other = open_another(1);
  std::atomic<bool> done{false};
  auto duplicate = std::async(std::launch::async, [&] {
    auto tx2 = other->begin();
    auto b = tx2->idempotency().begin(key, digest);
    done = true;
    tx2->commit();
    return b;
  });
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(!done.load());  // waiting on the first one's uncommitted key
  tx->idempotency().complete(key, std::string("first result"), first.attempt);
  tx->commit();
  auto b = duplicate.get();
  BOOST_TEST((b.status == Status::Replay));
  BOOST_TEST(b.response.value_or("") == "first result");
}

BOOST_AUTO_TEST_CASE(a_duplicate_proceeds_when_the_first_rolls_back) {
  auto tx = store->begin();
  tx->idempotency().begin(key, digest);
  auto other = open_another(1);
  auto duplicate = std::async(std::launch::async, [&] {
    auto tx2 = other->begin();
    auto b = tx2->idempotency().begin(key, digest);
    tx2->commit();
    return b;
  });
  std::this_thread::sleep_for(200ms);
  tx->rollback();
  auto b = duplicate.get();
  BOOST_TEST((b.status == Status::Started));
  BOOST_TEST(b.attempt > 0);
}

BOOST_AUTO_TEST_CASE(eight_connections_racing_one_key_have_exactly_one_effect) {
  const std::string table = unique_identifier("effects");
  create_versioned_table(table);
  exec_sql("INSERT INTO " + table + " (tenant_id, id, value) VALUES ('" + tenant + "', 1, 0)");
  const forgeyard::Fields row_key{{"tenant_id", tenant}, {"id", std::int64_t{1}}};
  constexpr int racers = 8;
  std::vector<std::unique_ptr<forgeyard::Store>> stores;
  for (int i = 0; i < racers; ++i) stores.push_back(open_another(1));
  std::barrier start(racers);
  std::atomic<int> effects{0};
  std::vector<std::future<forgeyard::Bytes>> results;
  forgeyard::RetryPolicy policy;
  policy.max_attempts = 50;  // InProgress and serialization failures are retried, bounded
  for (int i = 0; i < racers; ++i)
    results.push_back(std::async(std::launch::async, [&, i] {
      start.arrive_and_wait();
      return forgeyard::run_once(
          *stores[i], key, digest,
          [&](forgeyard::Transaction& tx) {
            ++effects;
            auto current = tx.versioned_rows().get(table, row_key);
            tx.versioned_rows().update(table, row_key, current->version,
                                       {{"value", std::get<std::int64_t>(current->values.at("value")) + 1}});
            return forgeyard::Bytes("effect by " + std::to_string(i));
          },
          policy);
    }));
  std::set<forgeyard::Bytes> responses;
  for (auto& r : results) responses.insert(r.get());
  BOOST_TEST(responses.size() == 1u);  // everyone got the first response
  BOOST_TEST(effects.load() == 1);
  auto row = store->versioned_rows().get(table, row_key);
  BOOST_TEST(std::get<std::int64_t>(row->values.at("value")) == 1);
  BOOST_TEST(row->version == 2);
}

BOOST_AUTO_TEST_SUITE_END()
