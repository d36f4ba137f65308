// The append-only audit chain (docs/sql-api.md, "Audit") and the atomicity of state + audit + outbox
// (docs/architecture.md, "Atomicity across semantics"), on every backend.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;
using forgeyard::AuditEvent;
using forgeyard::AuditHead;
using forgeyard::AuditRecord;
using forgeyard::ErrorKind;

namespace {

std::vector<std::string> vector_lines(const std::string& name) {
  std::ifstream in(std::filesystem::path(FORGEYARD_SOURCE_DIR) / "tests" / "vectors" / name);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

AuditEvent event(const std::string& action, std::optional<std::string> details = std::nullopt) {
  AuditEvent e;
  e.actor = "alice";
  e.action = action;
  e.resource = "svc/api";
  e.details = std::move(details);
  return e;
}

struct AuditFixture : conformance::Backend {
  forgeyard::Audit& audit() { return store->audit(); }

  // The chain as `forgeyard audit export` writes it.
  std::string export_chain(const std::string& t) {
    std::string out;
    for (const AuditRecord& r : audit().read(t, 1, 10000)) out += forgeyard::audit_export_line(r) + "\n";
    return out;
  }
  forgeyard::AuditVerification verify_offline(const std::string& text, std::optional<AuditHead> anchor = {}) {
    std::istringstream in(text);
    return forgeyard::verify_audit_export(in, anchor);
  }

  // Changes rows past the append-only triggers, as a superuser (or anyone who can edit the
  // SQLite file) can. `sql` uses the table name audit_events.
  void tamper(const std::string& sql) {
    if (is_postgres()) {
      std::string qualified = sql;
      for (std::size_t at = 0; (at = qualified.find("audit_", at)) != std::string::npos; at += 17)
        qualified.insert(at, "forgeyard.");
      exec_sql("BEGIN; ALTER TABLE forgeyard.audit_events DISABLE TRIGGER audit_events_no_change; " + qualified +
               "; ALTER TABLE forgeyard.audit_events ENABLE ALWAYS TRIGGER audit_events_no_change; COMMIT");
    } else {
      exec_sql("DROP TRIGGER IF EXISTS audit_events_no_update; DROP TRIGGER IF EXISTS audit_events_no_delete; " + sql);
    }
  }
  std::string quoted(const std::string& s) const { return "'" + s + "'"; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(audit, AuditFixture)

BOOST_AUTO_TEST_CASE(each_tenant_has_a_gap_free_chain_from_1) {
  const std::string other = unique("other");
  BOOST_TEST(audit().head(tenant).seq == 0);
  BOOST_TEST(audit().head(tenant).hash == std::string(32, '\0'));
  std::vector<AuditHead> mine, theirs;
  for (int i = 0; i < 3; ++i) {
    mine.push_back(audit().append(tenant, event("a" + std::to_string(i), R"({"i":)" + std::to_string(i) + "}")));
    theirs.push_back(audit().append(other, event("b")));
  }
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(mine[i].seq == i + 1);
    BOOST_TEST(theirs[i].seq == i + 1);
    BOOST_TEST(mine[i].hash.size() == 32u);
  }
  BOOST_TEST(mine[0].hash != theirs[0].hash);  // the tenant is part of the event
  const AuditHead head = audit().head(tenant);
  BOOST_TEST(head.seq == 3);
  BOOST_TEST(head.hash == mine[2].hash);

  clock.advance(5s);
  const auto records = audit().read(tenant);
  BOOST_REQUIRE_EQUAL(records.size(), 3u);
  BOOST_TEST(records[0].prev_hash == std::string(32, '\0'));
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(records[i].seq == i + 1);
    BOOST_TEST(records[i].hash == mine[i].hash);
    BOOST_TEST(records[i].action == "a" + std::to_string(i));
    BOOST_TEST(*records[i].details == R"({"i":)" + std::to_string(i) + "}");
    BOOST_TEST((records[i].recorded_at == clock.now() - 5s));        // the store's clock
    BOOST_TEST((records[i].occurred_at == records[i].recorded_at));  // by default
    if (i > 0) BOOST_TEST(records[i].prev_hash == records[i - 1].hash);
  }
  BOOST_TEST(audit().read(tenant, 2, 1).size() == 1u);
  BOOST_TEST(audit().read(tenant, 2, 1)[0].seq == 2);

  auto v = audit().verify(tenant);
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == 3);
  BOOST_TEST(!v.first_bad_seq.has_value());
  BOOST_TEST(audit().verify(tenant, 2, 2).checked == 1);
  BOOST_TEST(audit().verify(tenant, 6).ok);  // a range past the head is empty, not broken
  BOOST_TEST(audit().verify(tenant, 6).checked == 0);
  BOOST_TEST(audit().verify(tenant, 1, std::nullopt, head).ok);
}

BOOST_AUTO_TEST_CASE(the_store_reproduces_the_shipped_vectors) {
  const std::vector<std::string> lines = vector_lines("audit-v1.jsonl");
  BOOST_REQUIRE_EQUAL(lines.size(), 5u);
  // The vectors' tenant is fixed: append inside a transaction that is rolled back, so the run
  // leaves no trace (and no gap) in a shared database.
  auto tx = store->begin();
  for (const std::string& line : lines) {
    const AuditRecord r = forgeyard::parse_audit_export_line(line);
    clock.set(r.recorded_at);
    AuditEvent e;
    e.actor = r.actor;
    e.action = r.action;
    e.resource = r.resource;
    e.details = r.details;
    e.payload_digest = r.payload_digest;
    e.payload_ref = r.payload_ref;
    e.occurred_at = r.occurred_at;
    e.event_id = r.event_id;
    const AuditHead h = tx->audit().append(r.tenant, e);
    BOOST_TEST(h.seq == r.seq);
    BOOST_TEST(forgeyard::to_hex(h.hash) == forgeyard::to_hex(r.hash), "seq " << r.seq);
  }
  const auto v = tx->audit().verify("vector-tenant");
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == 5);
  tx->rollback();

  std::string text;
  for (const auto& l : lines) text += l + "\n";
  BOOST_TEST(verify_offline(text).checked == 5);
}

BOOST_AUTO_TEST_CASE(details_are_canonicalized_alike_and_exports_verify_offline) {
  // A subset of the vectors, written out here (the unit tests and regress/audit.sql run the
  // whole file against the core and the extension).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"b":1,"a":2})", R"({"a":2,"b":1})"},
      {R"({"n":1.0})", R"({"n":1})"},
      {R"({"n":1.50})", R"({"n":1.5})"},
      {R"({"n":1e2})", R"({"n":100})"},
      {R"({"n":-0})", R"({"n":0})"},
      {R"({"n":123e-5})", R"({"n":0.00123})"},
      {R"({"n":-12.340e1})", R"({"n":-123.4})"},
      {R"({ "s" : "a\/b" })", R"({"s":"a/b"})"},
      {R"({"s":"\u00e9"})", "{\"s\":\"\xc3\xa9\"}"},
      {R"({"s":"\ud83d\ude00"})", "{\"s\":\"\xf0\x9f\x98\x80\"}"},
      {R"({"k":1,"k":2})", R"({"k":2})"},
      {"{\"\xc3\xa9\":1,\"z\":2,\"Z\":3,\"a\":4,\"\":5}", "{\"\":5,\"Z\":3,\"a\":4,\"z\":2,\"\xc3\xa9\":1}"},
      {R"({"a":[3,1,{"c":1,"b":2}],"b":[true,false,null]})", R"({"a":[3,1,{"b":2,"c":1}],"b":[true,false,null]})"},
  };
  const std::string t = unique("canonical");
  for (const auto& [input, canonical] : cases) {
    const AuditHead h = audit().append(t, event("canonical", input));
    const auto back = audit().read(t, h.seq, 1);
    BOOST_REQUIRE_EQUAL(back.size(), 1u);
    BOOST_TEST(*back[0].details == canonical, input);
  }

  // The chain exported from this store verifies offline, with its head as the anchor.
  const AuditHead head = audit().head(t);
  const std::string exported = export_chain(t);
  auto v = verify_offline(exported, head);
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == static_cast<std::int64_t>(cases.size()));
  // A line changed after the export is named.
  std::string edited = exported;
  const auto at = edited.find("\"seq\":4,");
  BOOST_REQUIRE(at != std::string::npos);
  const auto actor = edited.find("\"actor\":\"alice\"", at);
  edited.replace(actor, 15, "\"actor\":\"mallory\"");
  v = verify_offline(edited, head);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 4);
  BOOST_TEST(v.checked == 3);
  // A cut export is found against the anchor.
  const std::string cut = exported.substr(0, exported.rfind('\n', exported.find("\"seq\":5,")) + 1);
  v = verify_offline(cut, head);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 5);
}

BOOST_AUTO_TEST_CASE(payload_references_and_occurred_at_are_kept) {
  AuditEvent e = event("artifact.store");
  e.payload_digest = std::string("\x01\x02\xff", 3);
  e.payload_ref = "cas://sha256/0102ff";
  e.occurred_at = clock.now() - 1h;
  audit().append(tenant, e);
  const auto r = audit().read(tenant);
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  BOOST_TEST(*r[0].payload_digest == *e.payload_digest);
  BOOST_TEST(*r[0].payload_ref == *e.payload_ref);
  BOOST_TEST((r[0].occurred_at == *e.occurred_at));
  BOOST_TEST((r[0].recorded_at == clock.now()));
  BOOST_TEST(!r[0].details.has_value());
  BOOST_TEST(r[0].event_id.size() == 36u);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_and_changes_nothing) {
  audit().append(tenant, event("first"));
  const AuditHead before = audit().head(tenant);
  auto with = [](auto change) {
    AuditEvent e = event("x");
    change(e);
    return e;
  };
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.actor = ""; })), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.action = ""; })), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.resource = ""; })), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append("", event("x")), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(std::string(129, 't'), event("x")), ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.actor = std::string(257, 'a'); })),
                 ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.action = std::string(129, 'a'); })),
                 ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.resource = std::string(513, 'a'); })),
                 ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.details = "[1]"; })), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.details = "{\"a\":"; })), ErrorKind::InvalidArgument,
                 "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) {
                                  e.details = "{\"a\":\"" + std::string(std::size_t{64} * 1024, 'x') + "\"}";
                                })),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.payload_digest = std::string(); })),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.payload_digest = std::string(65, 'd'); })),
                 ErrorKind::InvalidArgument, "22001");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.payload_ref = std::string(); })),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.event_id = "not-a-uuid"; })), ErrorKind::InvalidArgument,
                 "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.event_id = "--234567-89ab-cdef-0123-456789abcdef"; })),
                 ErrorKind::InvalidArgument, "22023");
  // Text that a store could not hold, read back or export alike: NUL, invalid UTF-8.
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.actor = std::string("al\0ice", 6); })),
                 ErrorKind::InvalidArgument, "22021");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.actor = "bad\xff"; })), ErrorKind::InvalidArgument,
                 "22021");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) { e.details = R"({"n":1e-17000})"; })),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append(tenant, with([](auto& e) {
                                  e.occurred_at = *forgeyard::parse_time("9999-12-31T23:59:59Z") + 1s;
                                })),
                 ErrorKind::InvalidArgument, "22023");
  // A batch with one bad event appends none of them.
  FY_CHECK_ERROR(audit().append_batch(tenant, {event("ok"), event("ok"), with([](auto& e) { e.action = ""; })}),
                 ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().append_batch(tenant, std::vector<AuditEvent>(1001, event("x"))), ErrorKind::InvalidArgument,
                 "22023");
  // Verify and read arguments.
  FY_CHECK_ERROR(audit().verify(tenant, 0), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().verify(tenant, 3, 2), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().verify(tenant, 1, std::nullopt, AuditHead{1, "short"}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().read(tenant, 1, 0), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(audit().read(tenant, 1, 10001), ErrorKind::InvalidArgument, "22023");

  const AuditHead after = audit().head(tenant);
  BOOST_TEST(after.seq == before.seq);
  BOOST_TEST(after.hash == before.hash);
  BOOST_TEST(audit().read(tenant).size() == 1u);
  BOOST_TEST(audit().verify(tenant).ok);
}

BOOST_AUTO_TEST_CASE(a_batch_continues_the_chain_in_order) {
  audit().append(tenant, event("one"));
  AuditEvent with_details = event("three", R"({"k":[1,2]})");
  const auto heads = audit().append_batch(tenant, {event("two"), with_details, event("four")});
  BOOST_REQUIRE_EQUAL(heads.size(), 3u);
  for (int i = 0; i < 3; ++i) BOOST_TEST(heads[i].seq == i + 2);
  const auto records = audit().read(tenant);
  BOOST_REQUIRE_EQUAL(records.size(), 4u);
  BOOST_TEST(records[2].action == "three");
  BOOST_TEST(*records[2].details == R"({"k":[1,2]})");
  BOOST_TEST(records[3].hash == heads[2].hash);
  BOOST_TEST(audit().verify(tenant).checked == 4);
  BOOST_TEST(audit().append_batch(tenant, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_retried_event_id_replays_and_a_reused_one_is_refused) {
  AuditEvent e = event("deploy", R"({"v":2})");
  e.event_id = "8d0f1c3e-5b7a-4c2d-9e1f-0a1b2c3d4e5f";
  const AuditHead first = audit().append(tenant, e);
  audit().append(tenant, event("other"));
  const AuditHead again = audit().append(tenant, e);  // a retry after CommitUnknown, say
  BOOST_TEST(again.seq == first.seq);
  BOOST_TEST(again.hash == first.hash);
  BOOST_TEST(audit().head(tenant).seq == 2);
  AuditEvent changed = e;
  changed.details = R"({"v":3})";
  FY_CHECK_ERROR(audit().append(tenant, changed), ErrorKind::IdempotencyMismatch, "FY011");
  BOOST_TEST(audit().head(tenant).seq == 2);
  // The same id in another tenant is another event.
  BOOST_TEST(audit().append(unique("elsewhere"), e).seq == 1);
}

BOOST_AUTO_TEST_CASE(audit_rows_cannot_be_updated_or_deleted) {
  audit().append(tenant, event("kept"));
  const std::string where = " WHERE tenant_id = " + quoted(tenant);
  if (is_postgres()) {
    // The test connects as a superuser: the owner is refused too, also as a replica.
    BOOST_TEST(exec_sql_error("UPDATE forgeyard.audit_events SET actor = 'x'" + where) == "FY030");
    BOOST_TEST(exec_sql_error("DELETE FROM forgeyard.audit_events" + where) == "FY030");
    BOOST_TEST(exec_sql_error("TRUNCATE forgeyard.audit_events") == "FY030");
    BOOST_TEST(exec_sql_error("SET session_replication_role = replica; DELETE FROM forgeyard.audit_events" + where) ==
               "FY030");
  } else {
    BOOST_TEST(exec_sql_error("UPDATE audit_events SET actor = 'x'" + where).find("FY030") != std::string::npos);
    BOOST_TEST(exec_sql_error("DELETE FROM audit_events" + where).find("FY030") != std::string::npos);
    BOOST_TEST(exec_sql_error("DELETE FROM audit_events").find("FY030") != std::string::npos);
    // INSERT OR REPLACE would delete the old row without the DELETE trigger: refused too.
    BOOST_TEST(exec_sql_error("INSERT OR REPLACE INTO audit_events SELECT tenant_id, seq, event_id, occurred_at,"
                              " recorded_at, 'mallory', action, resource, details, payload_digest, payload_ref,"
                              " prev_hash, hash FROM audit_events" +
                              where)
                   .find("FY030") != std::string::npos);
  }
  const auto r = audit().read(tenant);
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  BOOST_TEST(r[0].actor == "alice");
  BOOST_TEST(audit().verify(tenant).ok);
}

BOOST_AUTO_TEST_CASE(verify_names_the_first_bad_seq_after_tampering) {
  const std::string edited = unique("edited"), deleted = unique("deleted"), cut = unique("cut"),
                    rewritten = unique("rw");
  for (const std::string& t : {edited, deleted, cut, rewritten})
    for (int i = 0; i < 5; ++i) audit().append(t, event("e" + std::to_string(i)));
  const AuditHead cut_anchor = audit().head(cut);
  const AuditHead rewritten_anchor = audit().head(rewritten);

  tamper("UPDATE audit_events SET actor = 'mallory' WHERE tenant_id = " + quoted(edited) + " AND seq = 3");
  auto v = audit().verify(edited);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 3);
  BOOST_TEST(v.checked == 2);
  BOOST_TEST(v.reason->find("does not match its contents") != std::string::npos);
  BOOST_TEST(audit().verify(edited, 4).ok);  // a range after the edit links to its stored hash

  tamper("DELETE FROM audit_events WHERE tenant_id = " + quoted(deleted) + " AND seq = 2");
  v = audit().verify(deleted);
  BOOST_TEST(*v.first_bad_seq == 2);
  BOOST_TEST(v.reason->find("missing") != std::string::npos);
  BOOST_TEST(*audit().verify(deleted, 3).first_bad_seq == 2);  // the link before the range is gone

  // The tail cut, and the head moved back with it: only the anchor kept elsewhere tells.
  tamper("DELETE FROM audit_events WHERE tenant_id = " + quoted(cut) + " AND seq >= 4");
  v = audit().verify(cut);
  BOOST_TEST(*v.first_bad_seq == 4);  // the head still says 5
  tamper("UPDATE audit_heads SET seq = 3, hash = (SELECT hash FROM audit_events WHERE tenant_id = " + quoted(cut) +
         " AND seq = 3) WHERE tenant_id = " + quoted(cut));
  BOOST_TEST(audit().verify(cut).ok);
  v = audit().verify(cut, 1, std::nullopt, cut_anchor);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 4);
  BOOST_TEST(v.reason->find("tail was cut") != std::string::npos);

  // The tail rewritten: events 4 and 5 removed and appended anew through the API. The chain is
  // consistent again; only the anchor kept elsewhere tells.
  tamper("DELETE FROM audit_events WHERE tenant_id = " + quoted(rewritten) + " AND seq >= 4");
  tamper("UPDATE audit_heads SET seq = 3, hash = (SELECT hash FROM audit_events WHERE tenant_id = " +
         quoted(rewritten) + " AND seq = 3) WHERE tenant_id = " + quoted(rewritten));
  audit().append(rewritten, event("forged 4"));
  BOOST_TEST(audit().append(rewritten, event("forged 5")).seq == 5);
  BOOST_TEST(audit().verify(rewritten).ok);
  v = audit().verify(rewritten, 1, std::nullopt, rewritten_anchor);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 5);
  BOOST_TEST(v.reason->find("anchor") != std::string::npos);
  BOOST_TEST(audit().verify(rewritten, 1, std::nullopt, AuditHead{5, audit().head(rewritten).hash}).ok);

  // The head row is a second witness: its hash must be the hash of the event at its seq.
  tamper("UPDATE audit_heads SET hash = (SELECT hash FROM audit_events WHERE tenant_id = " + quoted(edited) +
         " AND seq = 1) WHERE tenant_id = " + quoted(deleted));
  v = audit().verify(deleted, 3);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 2);  // still the deleted event first
  const std::string head_row = unique("head-row");
  for (int i = 0; i < 3; ++i) audit().append(head_row, event("e" + std::to_string(i)));
  tamper("UPDATE audit_heads SET hash = (SELECT hash FROM audit_events WHERE tenant_id = " + quoted(head_row) +
         " AND seq = 2) WHERE tenant_id = " + quoted(head_row));
  v = audit().verify(head_row);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 3);
  BOOST_TEST(v.reason->find("head row") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(four_connections_append_400_each_without_a_gap) {
  constexpr int threads = 4, per_thread = 400;
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      try {
        auto s = open_another(1);
        for (int i = 0; i < per_thread; ++i) {
          AuditEvent e = event("w" + std::to_string(w), R"({"i":)" + std::to_string(i) + "}");
          // SerializationFailure (SQLite's busy timeout for a writer that kept losing the lock)
          // is retried, bounded: nothing was written. Any other error fails the test.
          forgeyard::with_retry([&] { s->audit().append(tenant, e); });
        }
      } catch (...) {
        ++failures;
      }
    });
  for (auto& t : workers) t.join();
  BOOST_TEST(failures == 0);
  const auto records = audit().read(tenant, 1, 10000);
  BOOST_REQUIRE_EQUAL(records.size(), static_cast<std::size_t>(threads * per_thread));
  for (std::size_t i = 0; i < records.size(); ++i)
    BOOST_TEST_REQUIRE(records[i].seq == static_cast<std::int64_t>(i + 1));
  std::map<std::string, int> per_worker;
  for (const auto& r : records) ++per_worker[r.action];
  for (int w = 0; w < threads; ++w) BOOST_TEST(per_worker["w" + std::to_string(w)] == per_thread);
  const auto v = audit().verify(tenant);
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == threads * per_thread);
  BOOST_TEST(audit().head(tenant).seq == threads * per_thread);
}

BOOST_AUTO_TEST_CASE(recorded_at_never_goes_backwards_along_a_chain) {
  // With the real clock and appends waiting for each other, each event's recorded_at is read
  // under the head lock, so it is never before the event it follows.
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      try {
        auto s = open_real_clock();
        for (int i = 0; i < 200; ++i) forgeyard::with_retry([&] { s->audit().append(tenant, event("tick")); });
      } catch (...) {
        ++failures;
      }
    });
  for (auto& t : workers) t.join();
  BOOST_TEST(failures == 0);
  const auto records = audit().read(tenant, 1, 10000);
  BOOST_REQUIRE_EQUAL(records.size(), 800u);
  int backwards = 0;
  for (std::size_t i = 1; i < records.size(); ++i) backwards += records[i].recorded_at < records[i - 1].recorded_at;
  BOOST_TEST(backwards == 0);
}

BOOST_AUTO_TEST_CASE(the_cli_exports_a_chain_that_verifies_offline) {
  const std::string dir = (std::filesystem::temp_directory_path() / unique("forgeyard-audit-cli")).string();
  std::filesystem::create_directories(dir);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string out = dir + "/out.txt", chain = dir + "/chain.jsonl";
  BOOST_TEST(run_cli({"audit", "append", tenant, "alice", "deploy", "svc/api", "--details", R"({"b":2,"a":1.50})",
                      "--payload-digest", "00ff", "--payload-ref", "cas://x"},
                     out) == 0);
  BOOST_TEST(slurp(out).find("seq=1\n") != std::string::npos);
  BOOST_TEST(run_cli({"audit", "append", tenant, "bob", "rollback", "svc/api", "--occurred-at", "2026-01-01T00:00:00Z"},
                     out) == 0);
  BOOST_TEST(run_cli({"audit", "append", tenant, "", "x", "y"}, out) == 4);  // refused: empty actor
  BOOST_TEST(run_cli({"audit", "head", tenant}, out) == 0);
  const std::string head = slurp(out);
  const auto at = head.find("anchor=");
  BOOST_REQUIRE(at != std::string::npos);
  const std::string anchor = head.substr(at + 7, head.find('\n', at) - at - 7);
  BOOST_TEST(anchor.rfind("2:", 0) == 0);

  BOOST_TEST(run_cli({"audit", "export", tenant}, chain) == 0);
  const std::string exported = slurp(chain);
  BOOST_TEST(exported.find(R"("details":{"a":1.5,"b":2})") != std::string::npos);
  BOOST_TEST(exported.find(R"("occurred_at":"2026-01-01T00:00:00.000000Z")") != std::string::npos);
  BOOST_TEST(run_cli({"audit", "verify", "--file", chain, "--anchor", anchor}, out) == 0);
  BOOST_TEST(slurp(out).find("ok=true\nchecked=2") != std::string::npos);
  BOOST_TEST(run_cli({"audit", "verify", tenant, "--anchor", anchor}, out) == 0);
  BOOST_TEST(run_cli({"audit", "tail", tenant, "--n", "1"}, out) == 0);
  BOOST_TEST(slurp(out).find("\"seq\":2,") != std::string::npos);
  BOOST_TEST(slurp(out).find("\"seq\":1,") == std::string::npos);

  std::string edited = exported;
  edited.replace(edited.find("\"actor\":\"bob\""), 13, "\"actor\":\"eve\"");
  { std::ofstream(chain) << edited; }
  BOOST_TEST(run_cli({"audit", "verify", "--file", chain}, out) == 1);
  BOOST_TEST(slurp(out).find("first_bad_seq=2") != std::string::npos);
  { std::ofstream(chain) << exported.substr(0, exported.find('\n') + 1); }  // the tail cut
  BOOST_TEST(run_cli({"audit", "verify", "--file", chain}, out) == 0);      // fine on its own ...
  BOOST_TEST(run_cli({"audit", "verify", "--file", chain, "--anchor", anchor}, out) ==
             1);  // ... not against the anchor
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- State + audit + outbox commit together or not at all --------------------------------

namespace {

struct TransitionFixture : AuditFixture {
  std::string table;
  std::string queue = "events";
  TransitionFixture() : table(unique_identifier("orders")) {
    create_versioned_table(table);
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value, note) VALUES ('" + tenant + "', 1, 0, 'new')");
    forgeyard::QueueOptions o;
    o.max_messages = 2;
    store->queues().create(tenant, queue, o);
  }
  forgeyard::Fields key() const { return {{"tenant_id", tenant}, {"id", std::int64_t{1}}}; }

  forgeyard::StateTransition transition(std::int64_t expected, const std::string& note) const {
    forgeyard::StateTransition t;
    t.tenant = tenant;
    t.table = table;
    t.key = key();
    t.expected_version = expected;
    t.changes = {{"note", note}};
    t.audit = event("order." + note, R"({"order":1})");
    t.outbox = forgeyard::StateTransition::Outbox{queue, forgeyard::OutgoingMessage{"order 1 is " + note}};
    return t;
  }

  struct Snapshot {
    std::int64_t version;
    std::string note;
    std::int64_t audit_seq;
    std::int64_t messages;
  };
  Snapshot snapshot() {
    const auto row = store->versioned_rows().get(table, key());
    const auto stats = store->queues().stats(tenant, queue);
    return {row->version, std::get<std::string>(row->values.at("note")), audit().head(tenant).seq,
            stats.ready + stats.in_flight + stats.delayed};
  }
  void check_unchanged(const Snapshot& before) {
    const Snapshot now = snapshot();
    BOOST_TEST(now.version == before.version);
    BOOST_TEST(now.note == before.note);
    BOOST_TEST(now.audit_seq == before.audit_seq);
    BOOST_TEST(now.messages == before.messages);
    BOOST_TEST(audit().verify(tenant).ok);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(atomic_transition, TransitionFixture)

BOOST_AUTO_TEST_CASE(state_audit_and_message_commit_together) {
  const auto r = forgeyard::transition(*store, transition(1, "paid"));
  BOOST_TEST(r.version == 2);
  BOOST_TEST(r.audit.seq == 1);
  BOOST_REQUIRE(r.msg_id.has_value());
  const Snapshot s = snapshot();
  BOOST_TEST(s.version == 2);
  BOOST_TEST(s.note == "paid");
  BOOST_TEST(s.messages == 1);
  BOOST_TEST(audit().read(tenant)[0].action == "order.paid");
  const auto got = store->queues().claim(tenant, queue, "c", 1);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].msg_id == *r.msg_id);
  BOOST_TEST(got[0].payload == "order 1 is paid");
}

BOOST_AUTO_TEST_CASE(a_stale_version_leaves_nothing) {
  forgeyard::transition(*store, transition(1, "paid"));
  const Snapshot before = snapshot();
  FY_CHECK_ERROR(forgeyard::transition(*store, transition(1, "shipped")), ErrorKind::Conflict, "FY002");
  check_unchanged(before);
}

BOOST_AUTO_TEST_CASE(a_full_queue_leaves_nothing) {
  // Fill the class up to its admission limit.
  for (bool full = false; !full;) {
    try {
      store->queues().enqueue(tenant, queue, {"filler"});
    } catch (const forgeyard::Error& e) {
      BOOST_REQUIRE(e.kind() == ErrorKind::QueueFull);
      full = true;
    }
  }
  const Snapshot before = snapshot();
  FY_CHECK_ERROR(forgeyard::transition(*store, transition(1, "paid")), ErrorKind::QueueFull, "FY020");
  check_unchanged(before);
  BOOST_TEST(before.version == 1);
}

BOOST_AUTO_TEST_CASE(bad_audit_input_leaves_nothing) {
  const Snapshot before = snapshot();
  auto t = transition(1, "paid");
  t.audit.details = "[\"not an object\"]";
  FY_CHECK_ERROR(forgeyard::transition(*store, t), ErrorKind::InvalidArgument, "22023");
  t = transition(1, "paid");
  t.audit.actor = "";
  FY_CHECK_ERROR(forgeyard::transition(*store, t), ErrorKind::InvalidArgument, "22023");
  check_unchanged(before);
  BOOST_TEST(forgeyard::transition(*store, transition(1, "paid")).version == 2);  // the row was not held
}

BOOST_AUTO_TEST_CASE(the_row_must_belong_to_the_transitions_tenant) {
  const Snapshot before = snapshot();
  auto t = transition(1, "paid");
  t.key["tenant_id"] = std::string("someone-else");
  FY_CHECK_ERROR(forgeyard::transition(*store, t), ErrorKind::InvalidArgument, "22023");
  check_unchanged(before);
}

BOOST_AUTO_TEST_CASE(a_refused_step_aborts_a_composed_transaction) {
  // The Transaction& form, with the caller catching the error: the event is refused by the
  // client before it reaches the database, yet the transaction is aborted as if the server had
  // refused it, so the compare-and-set before it cannot commit alone.
  const Snapshot before = snapshot();
  auto tx = store->begin();
  auto t = transition(1, "paid");
  t.audit.details = "not json";
  FY_CHECK_ERROR(forgeyard::transition(*tx, t), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(tx->audit().append(tenant, event("after")), ErrorKind::Internal, "25P02");
  FY_CHECK_ERROR(tx->commit(), ErrorKind::Internal, "25P02");
  check_unchanged(before);
}

BOOST_AUTO_TEST_CASE(a_connection_killed_before_commit_leaves_nothing) {
  const Snapshot before = snapshot();
  if (is_postgres()) {
    const std::string app = unique_identifier("fy_victim");
    forgeyard::StoreOptions options;
    options.clock = [this] { return clock.now(); };
    options.prepared_statements = !unnamed_statements;
    auto victim = forgeyard::open(url + "&application_name=" + app, options);
    auto tx = victim->begin();
    forgeyard::transition(*tx, transition(1, "paid"));
    exec_sql("SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity WHERE application_name = '" +
             app + "'");
    const forgeyard::Error e = conformance::expect_error([&] { tx->commit(); });
    BOOST_TEST((e.kind() == ErrorKind::CommitUnknown || e.kind() == ErrorKind::Unavailable));
  } else {
    pid_t child = fork();
    if (child == 0) {
      // Does all three steps in a transaction, then dies before COMMIT.
      try {
        auto s = open_another(1);
        auto tx = s->begin();
        forgeyard::transition(*tx, transition(1, "paid"));
      } catch (...) {
        _exit(4);
      }
      raise(SIGKILL);
      _exit(5);
    }
    int status = 0;
    waitpid(child, &status, 0);
    BOOST_REQUIRE(WIFSIGNALED(status));
  }
  check_unchanged(before);
  BOOST_TEST(forgeyard::transition(*store, transition(1, "paid")).version == 2);
}

BOOST_AUTO_TEST_SUITE_END()
