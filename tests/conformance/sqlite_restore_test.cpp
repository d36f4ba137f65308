// The SQLite restore drill (docs/operations.md#backup-and-restore): write (leases, claims, CAS,
// idempotency, audit), copy the closed store file, write more (new epochs, tokens, messages,
// attempts), put the old copy back, and prove the store says it was restored (and is not
// healthy) until reconcile runs; then every epoch, token and attempt issued after the copy is
// refused (FY001), nothing is handed out twice, the in-flight message is delivered again, and
// the cut audit tail is reported against the later anchor. A copy opened in a new place is a
// restore too; a store that stays where it is never is. These tests open SQLite files of their
// own through the public API, so they run (alike) in every backend's conformance run.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "forgeyard/forgeyard.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using forgeyard::ErrorKind;

namespace {

struct Dir {
  fs::path path;
  Dir() {
    std::string pattern = (fs::temp_directory_path() / "forgeyard-restore.XXXXXX").string();
    BOOST_REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~Dir() { fs::remove_all(path); }
};

std::unique_ptr<forgeyard::Store> open_at(const fs::path& file) {
  return forgeyard::open("sqlite://" + file.string());
}

template <class F>
std::string kind_of_error(F&& f) {
  try {
    f();
  } catch (const forgeyard::Error& e) {
    return std::string(forgeyard::to_string(e.kind())) + " " + e.sqlstate();
  }
  return "no error";
}

const forgeyard::IdempotencyKey locked_key{"t", "run.create", "k"};

}  // namespace

BOOST_AUTO_TEST_SUITE(sqlite_restore)

BOOST_AUTO_TEST_CASE(a_store_that_stays_where_it_is_is_never_restored) {
  Dir dir;
  const fs::path file = dir.path / "store.db";
  {
    auto store = open_at(file);
    BOOST_TEST(std::string(forgeyard::to_string(store->restore_status().state)) == "ok");
  }
  auto store = open_at(file);  // reopened: the same file
  BOOST_TEST(std::string(forgeyard::to_string(store->restore_status().state)) == "ok");
  BOOST_TEST(store->status().healthy);
}

BOOST_AUTO_TEST_CASE(a_copy_opened_in_another_place_is_a_restore) {
  Dir dir;
  { open_at(dir.path / "a.db")->leases().acquire("t", "r", "w", 1h); }
  fs::copy_file(dir.path / "a.db", dir.path / "b.db");
  auto copy = open_at(dir.path / "b.db");
  const auto s = copy->restore_status();
  BOOST_TEST(std::string(forgeyard::to_string(s.state)) == "restored");
  BOOST_TEST(s.detail.find("a copied or restored file") != std::string::npos);
  BOOST_TEST(!copy->status().healthy);
  BOOST_TEST(copy->status().detail.find("restore detected") != std::string::npos);
  BOOST_TEST(copy->restore_reconcile().restore_detected);
  BOOST_TEST(std::string(forgeyard::to_string(copy->restore_status().state)) == "ok");
  BOOST_TEST(copy->status().healthy);
  BOOST_TEST(std::string(forgeyard::to_string(open_at(dir.path / "a.db")->restore_status().state)) == "ok");
}

BOOST_AUTO_TEST_CASE(the_drill_nothing_issued_after_the_copy_is_honoured_or_issued_again) {
  Dir dir;
  const fs::path file = dir.path / "store.db";
  const fs::path backup = dir.path / "backup.db";
  std::int64_t m1 = 0, t1 = 0, e1 = 0, a1 = 0;
  {
    auto s = open_at(file);
    s->queues().create("t", "jobs", {});
    m1 = s->queues().enqueue("t", "jobs", {"one"});
    s->queues().enqueue("t", "jobs", {"two"});
    const auto c = s->queues().claim("t", "jobs", "w1", 1, 1h);
    BOOST_REQUIRE(c.size() == 1u);
    t1 = c[0].claim_token;
    e1 = s->leases().acquire("t", "res", "w1", 1h).epoch;
    a1 = s->idempotency().begin(locked_key, forgeyard::request_digest("r"), 1h).attempt;
    s->idempotency().checkpoint(locked_key, "step-1", a1);
    s->audit().append("t", {"a", "deploy", "svc"});
    s->audit().append("t", {"a", "scale", "svc"});
  }
  fs::copy_file(file, backup);  // the backup: a copy of the closed store

  // The lost period.
  std::int64_t e2 = 0, a2 = 0, max_id = 0, max_token = 0;
  std::vector<forgeyard::Delivery> lost_claims;
  forgeyard::AuditHead anchor;
  {
    auto s = open_at(file);
    s->leases().release("t", "res", e1);
    e2 = s->leases().acquire("t", "res", "w2", 1h).epoch;
    max_id = s->queues().enqueue("t", "jobs", {"three"});
    lost_claims = s->queues().claim("t", "jobs", "w2", 10, 1h);
    for (const auto& d : lost_claims) max_token = std::max(max_token, d.claim_token);
    s->idempotency().abandon(locked_key, a1);
    a2 = s->idempotency().begin(locked_key, forgeyard::request_digest("r"), 1h).attempt;
    s->audit().append("t", {"a", "rollback", "svc"});
    anchor = s->audit().append("t", {"a", "deploy", "svc"});
  }
  BOOST_TEST(e2 > e1);
  BOOST_TEST(a2 > a1);

  // Put the old copy back (a new file at the same path) and open it.
  fs::rename(backup, file);
  auto s = open_at(file);
  BOOST_TEST(std::string(forgeyard::to_string(s->restore_status().state)) == "restored");
  BOOST_TEST(!s->status().healthy);
  const auto rep = s->restore_reconcile({{"t", anchor}});
  BOOST_TEST(rep.restore_detected);
  BOOST_TEST(rep.leases_expired == 1);
  BOOST_TEST(rep.deliveries_released == 1);
  BOOST_TEST(rep.idempotency_unlocked == 1);
  BOOST_REQUIRE(rep.audit_chains.size() == 1u);
  BOOST_TEST(rep.audit_chains[0].head_seq == 2);
  BOOST_TEST(rep.audit_chains[0].cut_to.value_or(0) == 4);
  BOOST_TEST(std::string(forgeyard::to_string(s->restore_status().state)) == "ok");
  BOOST_TEST(s->status().healthy);

  // Refused: every epoch, token and attempt from before the reconcile.
  BOOST_TEST(kind_of_error([&] { s->leases().renew("t", "res", e2, 1h); }) == "StaleFence FY001");
  BOOST_TEST(kind_of_error([&] { s->leases().renew("t", "res", e1, 1h); }) == "StaleFence FY001");
  BOOST_TEST(kind_of_error([&] { s->queues().ack("t", "jobs", m1, t1); }) == "StaleFence FY001");
  for (const auto& d : lost_claims)
    if (d.msg_id < max_id)
      BOOST_TEST(kind_of_error([&] { s->queues().ack("t", "jobs", d.msg_id, d.claim_token); }) == "StaleFence FY001");
  BOOST_TEST(kind_of_error([&] { s->idempotency().complete(locked_key, std::string("x"), a2); }) == "StaleFence FY001");
  BOOST_TEST(kind_of_error([&] { s->idempotency().complete(locked_key, std::string("x"), a1); }) == "StaleFence FY001");

  // Nothing handed out twice; the in-flight message comes again.
  BOOST_TEST(s->leases().acquire("t", "res", "w3", 1h).epoch > e2);
  BOOST_TEST(s->queues().enqueue("t", "jobs", {"four"}) > max_id);
  bool redelivered = false;
  for (const auto& d : s->queues().claim("t", "jobs", "w3", 10, 1h)) {
    BOOST_TEST(d.claim_token > max_token);
    if (d.msg_id == m1) redelivered = d.attempt == 2;
  }
  BOOST_TEST(redelivered);
  const auto resumed = s->idempotency().begin(locked_key, forgeyard::request_digest("r"), 1h);
  BOOST_TEST(resumed.recovery_point.value_or("") == "step-1");
  BOOST_TEST(resumed.attempt > a2);
  BOOST_TEST(s->audit().verify("t").ok);
  BOOST_TEST(s->audit().head(forgeyard::operations_tenant).seq == 1);
}

BOOST_AUTO_TEST_SUITE_END()
