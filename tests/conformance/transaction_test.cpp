// Transactions compose calls atomically, the same way on every backend.
#include <boost/test/unit_test.hpp>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;

BOOST_FIXTURE_TEST_SUITE(transactions, conformance::Backend)

BOOST_AUTO_TEST_CASE(commit_makes_calls_durable_together) {
  auto tx = store->begin();
  auto a = tx->leases().acquire(tenant, "one", "w", 30s);
  auto b = tx->leases().acquire(tenant, "two", "w", 30s);
  tx->commit();
  BOOST_TEST(store->leases().get(tenant, "one")->epoch == a.epoch);
  BOOST_TEST(store->leases().get(tenant, "two")->epoch == b.epoch);
}

BOOST_AUTO_TEST_CASE(rollback_and_destruction_leave_nothing) {
  {
    auto tx = store->begin();
    tx->leases().acquire(tenant, "rolled-back", "w", 30s);
    tx->rollback();
  }
  {
    auto tx = store->begin();
    tx->leases().acquire(tenant, "dropped", "w", 30s);
  }  // destroyed without commit
  BOOST_TEST(!store->leases().get(tenant, "rolled-back").has_value());
  BOOST_TEST(!store->leases().get(tenant, "dropped").has_value());
}

// Reads never wait for an open write: while a transaction holds the write side (on SQLite, its
// write turn), another store's reads of every capability answer at once with what was committed.
BOOST_AUTO_TEST_CASE(reads_do_not_wait_for_an_open_write) {
  const auto lease = store->leases().acquire(tenant, "held", "w", 30s);
  store->queues().create(tenant, "jobs", forgeyard::QueueOptions{});
  store->queues().enqueue(tenant, "jobs", {forgeyard::Bytes("one")});
  forgeyard::AuditEvent e;
  e.actor = "ann";
  e.action = "read.test";
  e.resource = "r";
  store->audit().append(tenant, e);
  const auto other = open_another();
  auto tx = store->begin();
  tx->leases().acquire(tenant, "open", "w", 30s);
  tx->queues().enqueue(tenant, "jobs", {forgeyard::Bytes("two")});
  BOOST_TEST(other->leases().get(tenant, "held")->epoch == lease.epoch);
  BOOST_TEST(!other->leases().get(tenant, "open").has_value());
  BOOST_TEST(other->queues().stats(tenant, "jobs").ready == 1);
  BOOST_TEST(other->queues().dead_letters(tenant, "jobs").empty());
  BOOST_TEST(other->audit().head(tenant).seq == 1);
  BOOST_TEST(other->audit().read(tenant, 1, 10).size() == 1u);
  BOOST_TEST(other->audit().verify(tenant).ok);
  BOOST_TEST(!other->idempotency().status({tenant, "scope", "k"}).has_value());
  BOOST_TEST(other->topics().list(tenant).empty());
  tx->rollback();
}

BOOST_AUTO_TEST_CASE(an_error_aborts_the_whole_transaction) {
  auto tx = store->begin();
  tx->leases().acquire(tenant, "kept?", "w", 30s);
  FY_CHECK_ERROR(tx->leases().fence(tenant, "no-such-lease", 1), ErrorKind::StaleFence, "FY001");
  FY_CHECK_ERROR(tx->leases().acquire(tenant, "after-error", "w", 30s), ErrorKind::Internal, "25P02");
  FY_CHECK_ERROR(tx->commit(), ErrorKind::Internal, "25P02");
  BOOST_TEST(!store->leases().get(tenant, "kept?").has_value());
}

BOOST_AUTO_TEST_CASE(a_finished_transaction_refuses_more_work) {
  auto tx = store->begin();
  tx->commit();
  FY_CHECK_ERROR(tx->commit(), ErrorKind::InvalidArgument, "25000");
  FY_CHECK_ERROR(tx->leases().acquire(tenant, "late", "w", 30s), ErrorKind::InvalidArgument, "25000");
}

BOOST_AUTO_TEST_CASE(a_stale_holder_cannot_commit_a_fenced_write) {
  auto a = store->leases().acquire(tenant, "job", "worker-a", 10s);
  clock.advance(11s);
  auto b = store->leases().acquire(tenant, "job", "worker-b", 10s);
  BOOST_TEST(b.acquired);
  auto tx = store->begin();
  FY_CHECK_ERROR(tx->leases().fence(tenant, "job", a.epoch), ErrorKind::StaleFence, "FY001");
  tx->rollback();
  auto tx2 = store->begin();
  tx2->leases().fence(tenant, "job", b.epoch);
  tx2->commit();
}

BOOST_AUTO_TEST_CASE(transact_helper_commits_and_returns_the_result) {
  auto epoch = forgeyard::transact(
      *store, [&](forgeyard::Transaction& tx) { return tx.leases().acquire(tenant, "helper", "w", 30s).epoch; });
  BOOST_TEST(store->leases().get(tenant, "helper")->epoch == epoch);
}

BOOST_AUTO_TEST_SUITE_END()
