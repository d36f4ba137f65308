// Restore safety (docs/sql-api.md#restore-safety) through the public API, on every backend:
// reconcile ends what the restored state held (leases, claimed deliveries, idempotency locks)
// so that no fencing value from before it is honoured, raises every fencing value above the
// clock, reports cut audit tails against anchors, records its report in the operations chain,
// refuses bad anchors without changing anything, and is idempotent. Each test works on a store of
// its own: reconcile acts on the whole store. The PostgreSQL drill through pg_dump / pg_restore
// is tests/pg/restore_drill.sh; the SQLite file drill is tests/conformance/sqlite_restore_test.cpp.
#include <boost/test/unit_test.hpp>

#include <string>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::ErrorKind;
using forgeyard::RestoreState;
using forgeyard::unix_usecs;

namespace {

struct OwnStore : conformance::Backend {
  std::string name = unique_identifier("fy_reconcile");
  std::unique_ptr<forgeyard::Store> own;
  OwnStore() {
    forgeyard::StoreOptions options;
    options.clock = [this] { return clock.now(); };
    options.prepared_statements = !unnamed_statements;
    own = forgeyard::open(create_own_store(name), options);
  }
  ~OwnStore() {
    own.reset();
    drop_own_store(name);
  }
};

const forgeyard::IdempotencyKey key{"t", "run.create", "k1"};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(restore, OwnStore)

BOOST_AUTO_TEST_CASE(a_new_store_is_not_restored_and_is_healthy) {
  const forgeyard::RestoreStatus s = own->restore_status();
  BOOST_TEST(std::string(forgeyard::to_string(s.state)) == "ok");
  BOOST_TEST(!s.needs_reconcile());
  BOOST_TEST(!s.last_reconciled_at.has_value());
  BOOST_TEST(own->status().healthy);
}

BOOST_AUTO_TEST_CASE(reconcile_ends_what_the_restored_state_held_and_raises_every_fencing_value) {
  auto& q = own->queues();
  q.create("t", "jobs", {});
  const std::int64_t m1 = q.enqueue("t", "jobs", {"one"});
  q.enqueue("t", "jobs", {"two"});
  const auto claimed = q.claim("t", "jobs", "w1", 1, 10min);
  BOOST_REQUIRE(claimed.size() == 1u);
  BOOST_REQUIRE(claimed[0].msg_id == m1);
  const auto lease = own->leases().acquire("t", "res", "w1", 1h);
  const auto released = own->leases().acquire("t", "done", "w1", 1h);
  own->leases().release("t", "done", released.epoch);
  const auto begun = own->idempotency().begin(key, forgeyard::request_digest("r"), 1h);
  own->idempotency().checkpoint(key, "step-2", begun.attempt);
  own->audit().append("t", {"a", "deploy", "svc"});
  own->audit().append("t", {"a", "scale", "svc"});
  forgeyard::AuditAnchor anchor{"t", {5, std::string(32, '\x11')}};

  clock.advance(1min);
  const forgeyard::ReconcileReport r = own->restore_reconcile({anchor});
  const std::int64_t floor = unix_usecs(clock.now());
  BOOST_TEST(!r.restore_detected);  // the store is where it was; reconcile still does its work
  BOOST_TEST(r.leases_expired == 1);
  BOOST_TEST(r.deliveries_released == 1);
  BOOST_TEST(r.idempotency_unlocked == 1);
  BOOST_TEST(r.audit_chains_verified == 1);
  BOOST_TEST(r.audit_chains_failed == 1);
  BOOST_REQUIRE(r.audit_chains.size() == 1u);
  BOOST_TEST(r.audit_chains[0].tenant == "t");
  BOOST_TEST(r.audit_chains[0].head_seq == 2);
  BOOST_TEST(r.audit_chains[0].cut_to.value_or(0) == 5);
  BOOST_TEST(!r.audit_chains[0].ok);
  BOOST_TEST(r.operations_audit.seq == 1);
  BOOST_TEST(r.operations_audit.hash.size() == 32u);
  const auto ops = own->audit().head(forgeyard::operations_tenant);
  BOOST_TEST(ops.seq == 1);
  BOOST_TEST(ops.hash == r.operations_audit.hash);
  const auto ops_events = own->audit().read(forgeyard::operations_tenant);
  BOOST_REQUIRE(ops_events.size() == 1u);
  BOOST_TEST(ops_events[0].action == "storage.reconcile");
  BOOST_TEST(ops_events[0].details.value_or("").find("\"leases_expired\":1") != std::string::npos);

  // Leases: the held epoch is refused, reap reports it once, a new grant passes it.
  FY_CHECK_ERROR(own->leases().renew("t", "res", lease.epoch, 1h), ErrorKind::StaleFence, "FY001");
  const auto reaped = own->leases().reap(100, std::string("t"));
  BOOST_REQUIRE(reaped.size() == 1u);
  BOOST_TEST(reaped[0].resource == "res");
  BOOST_TEST(reaped[0].epoch == lease.epoch);
  BOOST_TEST(own->leases().reap(100, std::string("t")).empty());
  BOOST_TEST(own->leases().acquire("t", "res", "w2", 1h).epoch > lease.epoch);

  // Deliveries: the old token is refused; the message comes again under a token above the floor.
  FY_CHECK_ERROR(q.ack("t", "jobs", m1, claimed[0].claim_token), ErrorKind::StaleFence, "FY001");
  const auto again = q.claim("t", "jobs", "w2", 10, 10min);
  bool redelivered = false;
  for (const auto& d : again) {
    BOOST_TEST(d.claim_token > floor);
    if (d.msg_id != m1) continue;
    redelivered = true;
    BOOST_TEST(d.attempt == 2);
  }
  BOOST_TEST(redelivered);
  BOOST_TEST(q.enqueue("t", "jobs", {"three"}) > floor);

  // Idempotency: the old attempt is refused; the key resumes from its recovery point.
  FY_CHECK_ERROR(own->idempotency().checkpoint(key, "x", begun.attempt), ErrorKind::StaleFence, "FY001");
  const auto resumed = own->idempotency().begin(key, forgeyard::request_digest("r"), 1h);
  BOOST_TEST((resumed.status == forgeyard::IdempotencyBegin::Status::Started));
  BOOST_TEST(resumed.recovery_point.value_or("") == "step-2");
  BOOST_TEST(resumed.attempt > floor);

  const forgeyard::RestoreStatus s = own->restore_status();
  BOOST_TEST(std::string(forgeyard::to_string(s.state)) == "ok");
  BOOST_TEST(s.last_reconciled_at.has_value());
}

BOOST_AUTO_TEST_CASE(reconcile_is_idempotent) {
  own->leases().acquire("t", "res", "w1", 1h);
  const auto first = own->restore_reconcile();
  BOOST_TEST(first.leases_expired == 1);
  clock.advance(1s);
  const auto second = own->restore_reconcile();
  BOOST_TEST(second.leases_expired == 0);
  BOOST_TEST(second.deliveries_released == 0);
  BOOST_TEST(second.idempotency_unlocked == 0);
  BOOST_TEST(second.audit_chains_failed == 0);
  BOOST_TEST(second.audit_chains_verified == 1);  // the operations chain of the first run
  BOOST_TEST(second.operations_audit.seq == 2);
  BOOST_TEST(own->audit().verify(forgeyard::operations_tenant).ok);
}

BOOST_AUTO_TEST_CASE(a_matching_anchor_is_no_finding) {
  const auto head = own->audit().append("t", {"a", "deploy", "svc"});
  const auto r = own->restore_reconcile({{"t", head}});
  BOOST_TEST(r.audit_chains_failed == 0);
  BOOST_TEST(r.audit_chains.empty());
}

BOOST_AUTO_TEST_CASE(bad_anchors_are_refused_and_change_nothing) {
  const auto lease = own->leases().acquire("t", "res", "w1", 1h);
  FY_CHECK_ERROR(own->restore_reconcile({{"t", {0, std::string(32, '\x01')}}}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(own->restore_reconcile({{"t", {1, "short"}}}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(own->restore_reconcile({{"", {1, std::string(32, '\x01')}}}), ErrorKind::InvalidArgument, "22023");
  BOOST_TEST(std::string(forgeyard::to_string(own->leases().get("t", "res")->state)) == "live");
  BOOST_TEST(unix_usecs(own->leases().renew("t", "res", lease.epoch, 1h)) > unix_usecs(clock.now()));
  BOOST_TEST(own->audit().head(forgeyard::operations_tenant).seq == 0);
}

BOOST_AUTO_TEST_SUITE_END()
