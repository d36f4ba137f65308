// The checker must be able to fail: each check gets a correct history (passes) and broken ones
// (a lost message, a double effect, a stale ack, an interleaved stale write, a lost update, a gap)
// and must name the violation.
#define BOOST_TEST_MODULE history checker
#include <boost/test/unit_test.hpp>

#include "checker.hpp"

using history::check_audit;
using history::check_cas;
using history::check_idempotency;
using history::check_leases;
using history::check_queues;
using history::check_workflows;
using history::Op;
using history::Outcome;

namespace {

// A hand-written history on a logical clock: each op takes [t, t + 1].
struct H {
  std::vector<Op> ops;
  std::int64_t t = 0;
  Op& add(std::string kind, std::string key, Outcome outcome = Outcome::Ok,
          std::map<std::string, std::int64_t> args = {}, std::map<std::string, std::int64_t> result = {},
          std::string text = {}) {
    Op op;
    op.kind = std::move(kind);
    op.key = std::move(key);
    op.outcome = outcome;
    op.args = std::move(args);
    op.result = std::move(result);
    op.text = std::move(text);
    op.invoked_us = t;
    op.completed_us = t + 1;
    t += 2;
    ops.push_back(std::move(op));
    return ops.back();
  }
};

bool mentions(const history::CheckReport& r, const std::string& word) {
  for (const auto& v : r.violations)
    if (v.find(word) != std::string::npos) return true;
  return false;
}

// e1 enqueued, claimed, consumed once with its effect; e2 enqueued with an unknown outcome and
// delivered (so it committed); e3 failed and never seen.
H good_queue() {
  H h;
  h.add("enqueue", "e1");
  h.add("enqueue", "e2", Outcome::Unknown);
  h.add("enqueue", "e3", Outcome::Failed);
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 10}});
  h.add("claim", "e2", Outcome::Ok, {}, {{"msg_id", 2}, {"token", 11}});
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 10}}, {{"accepted", 1}});
  h.add("consume", "e2", Outcome::Ok, {{"msg_id", 2}, {"token", 11}}, {{"accepted", 1}});
  h.add("effect", "e1");
  h.add("effect", "e2");
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(queues_pass_a_correct_history_and_resolve_unknown_enqueues) {
  auto r = check_queues(good_queue().ops);
  BOOST_TEST(r.ok(), history::describe(r));
  BOOST_TEST(r.unknown == 1);
  BOOST_TEST(r.unknown_took_effect == 1);
}

BOOST_AUTO_TEST_CASE(queues_catch_a_lost_message) {
  H h = good_queue();
  h.add("enqueue", "e4");  // committed, never delivered, not present
  auto r = check_queues(h.ops);
  BOOST_TEST(!r.ok());
  BOOST_TEST(mentions(r, "lost"));
  h.add("present", "e4");  // still in the queue: not lost
  BOOST_TEST(check_queues(h.ops).ok());
}

BOOST_AUTO_TEST_CASE(queues_catch_two_effects_of_one_event) {
  H h = good_queue();
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 12}});
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 12}}, {{"accepted", 1}});
  h.add("effect", "e1");
  auto r = check_queues(h.ops);
  BOOST_TEST(mentions(r, "2 effects"));
}

BOOST_AUTO_TEST_CASE(queues_catch_an_ack_under_a_stale_token) {
  H h;
  h.add("enqueue", "e1");
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 10}});
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 11}});                   // visibility ran out
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 10}}, {{"accepted", 1}});  // stale: must fail
  h.add("effect", "e1");
  auto r = check_queues(h.ops);
  BOOST_TEST(mentions(r, "stale token 10"));
  // The same ack refused (StaleFence) and the live token acking instead is correct.
  h.ops[3].outcome = Outcome::Failed;
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 11}}, {{"accepted", 1}});
  auto fixed = check_queues(h.ops);
  BOOST_TEST(fixed.ok(), history::describe(fixed));
}

BOOST_AUTO_TEST_CASE(queues_catch_an_undone_ack_and_a_token_that_goes_back) {
  H h;
  h.add("enqueue", "e1");
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 10}});
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 10}}, {{"accepted", 1}});
  h.add("effect", "e1");
  BOOST_TEST(check_queues(h.ops).ok(), history::describe(check_queues(h.ops)));
  // The ack returned ok, yet the message is handed out again (a failover lost the commit).
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 11}});
  BOOST_TEST(mentions(check_queues(h.ops), "the ack was undone"));
  // A claim after another one (the first never acked) with a lower token.
  H back;
  back.add("enqueue", "e2");
  back.add("claim", "e2", Outcome::Ok, {}, {{"msg_id", 2}, {"token", 20}});
  back.add("claim", "e2", Outcome::Ok, {}, {{"msg_id", 2}, {"token", 19}});
  back.add("consume", "e2", Outcome::Ok, {{"msg_id", 2}, {"token", 19}}, {{"accepted", 1}});
  back.add("effect", "e2");
  BOOST_TEST(mentions(check_queues(back.ops), "tokens went back"));
  back.ops[2].result["token"] = 21;
  back.ops[3].args["token"] = 21;
  BOOST_TEST(check_queues(back.ops).ok(), history::describe(check_queues(back.ops)));
}

BOOST_AUTO_TEST_CASE(queues_catch_a_delivery_nobody_committed) {
  H h;
  h.add("enqueue", "e1", Outcome::Failed);
  h.add("claim", "e1", Outcome::Ok, {}, {{"msg_id", 1}, {"token", 10}});
  h.add("consume", "e1", Outcome::Ok, {{"msg_id", 1}, {"token", 10}}, {{"accepted", 1}});
  h.add("effect", "e1");
  auto r = check_queues(h.ops);
  BOOST_TEST(mentions(r, "no committed producer"));
}

namespace {
// r: owner a holds epoch 1, writes twice; b acquires epoch 2 after a's lease ran out, writes.
H good_leases() {
  H h;
  h.add("acquire", "r", Outcome::Ok, {}, {{"acquired", 1}, {"epoch", 1}}, "a");
  h.add("write", "r", Outcome::Ok, {{"epoch", 1}, {"wid", 1}}, {}, "a");
  h.add("write", "r", Outcome::Unknown, {{"epoch", 1}, {"wid", 2}}, {}, "a");
  h.add("acquire", "r", Outcome::Ok, {}, {{"acquired", 1}, {"epoch", 2}}, "b");
  h.add("write", "r", Outcome::Ok, {{"epoch", 2}, {"wid", 3}}, {}, "b");
  h.add("write_seen", "r", Outcome::Ok, {{"seq", 1}, {"epoch", 1}, {"wid", 1}}, {}, "a");
  h.add("write_seen", "r", Outcome::Ok, {{"seq", 2}, {"epoch", 1}, {"wid", 2}}, {}, "a");
  h.add("write_seen", "r", Outcome::Ok, {{"seq", 3}, {"epoch", 2}, {"wid", 3}}, {}, "b");
  return h;
}
}  // namespace

BOOST_AUTO_TEST_CASE(leases_pass_a_correct_history) {
  auto r = check_leases(good_leases().ops);
  BOOST_TEST(r.ok(), history::describe(r));
  BOOST_TEST(r.unknown_took_effect == 1);
}

BOOST_AUTO_TEST_CASE(leases_catch_an_interleaved_stale_write) {
  H h = good_leases();
  // a's write under epoch 1, invoked after epoch 2 was granted, accepted after b's write.
  h.add("write", "r", Outcome::Ok, {{"epoch", 1}, {"wid", 4}}, {}, "a");
  h.add("write_seen", "r", Outcome::Ok, {{"seq", 4}, {"epoch", 1}, {"wid", 4}}, {}, "a");
  auto r = check_leases(h.ops);
  BOOST_TEST(mentions(r, "two holders interleave"));
  BOOST_TEST(mentions(r, "stale write 4"));
}

BOOST_AUTO_TEST_CASE(leases_catch_an_epoch_granted_twice_and_epochs_going_back) {
  H h = good_leases();
  h.add("acquire", "r", Outcome::Ok, {}, {{"acquired", 1}, {"epoch", 2}}, "c");
  h.add("acquire", "r", Outcome::Ok, {}, {{"acquired", 1}, {"epoch", 1}}, "a");
  auto r = check_leases(h.ops);
  BOOST_TEST(mentions(r, "granted to both"));
  BOOST_TEST(mentions(r, "granted after epoch 2"));
}

BOOST_AUTO_TEST_CASE(leases_catch_a_lost_accepted_write) {
  H h = good_leases();
  h.add("write", "r", Outcome::Ok, {{"epoch", 2}, {"wid", 5}}, {}, "b");
  BOOST_TEST(mentions(check_leases(h.ops), "lost"));
}

namespace {
H good_cas() {
  H h;
  h.add("cas", "row1", Outcome::Ok, {{"expected", 1}}, {{"version", 2}}, "u1");
  h.add("cas", "row1", Outcome::Failed, {{"expected", 1}}, {}, "u2");  // Conflict
  h.add("cas", "row1", Outcome::Unknown, {{"expected", 2}}, {}, "u3");
  h.add("cas", "row1", Outcome::Unknown, {{"expected", 3}}, {}, "u4");
  h.add("cas_final", "row1", Outcome::Ok, {}, {{"version", 3}}, "u1,u3");
  return h;
}
}  // namespace

BOOST_AUTO_TEST_CASE(cas_passes_one_chain_and_resolves_unknowns_by_reading) {
  auto r = check_cas(good_cas().ops);
  BOOST_TEST(r.ok(), history::describe(r));
  BOOST_TEST(r.unknown_took_effect == 1);
  BOOST_TEST(r.unknown_had_no_effect == 1);
}

BOOST_AUTO_TEST_CASE(cas_catches_a_lost_update) {
  H h = good_cas();
  h.ops[1].outcome = Outcome::Ok;  // u2 also "committed" from version 1, but the row kept u1
  auto r = check_cas(h.ops);
  BOOST_TEST(mentions(r, "lost update"));
}

BOOST_AUTO_TEST_CASE(cas_catches_a_version_that_skips_or_a_failed_update_applied) {
  H h = good_cas();
  h.ops.back().result["version"] = 5;
  BOOST_TEST(mentions(check_cas(h.ops), "one chain"));
  H g = good_cas();
  g.ops.back().text = "u1,u2";
  auto r = check_cas(g.ops);
  BOOST_TEST(mentions(r, "failed"));
}

BOOST_AUTO_TEST_CASE(workflows_pass_runs_done_once_and_resolve_unknown_starts) {
  H h;
  h.add("wf_start", "a", Outcome::Unknown);
  h.add("wf_start", "a", Outcome::Ok);
  h.add("wf_start", "b", Outcome::Unknown);  // never made: resolved by reading
  h.add("wf_start", "c", Outcome::Failed);
  h.add("wf_run", "a", Outcome::Ok, {{"steps", 2}}, {}, "completed");
  h.add("wf_run", "d", Outcome::Ok, {{"steps", 2}}, {}, "pending");  // started by another history
  h.add("wf_effect", "a/0");
  h.add("wf_effect", "a/1");
  h.add("wf_effect", "d/0");
  auto r = check_workflows(h.ops);
  BOOST_TEST(r.ok(), history::describe(r));
  BOOST_TEST(r.unknown == 2);
  BOOST_TEST(r.unknown_took_effect == 1);
  BOOST_TEST(r.unknown_had_no_effect == 1);
}

BOOST_AUTO_TEST_CASE(workflows_catch_a_step_twice_a_step_skipped_and_a_lost_or_ghost_run) {
  H h;
  h.add("wf_start", "twice", Outcome::Ok);
  h.add("wf_run", "twice", Outcome::Ok, {{"steps", 2}}, {}, "completed");
  h.add("wf_effect", "twice/0");
  h.add("wf_effect", "twice/0");
  h.add("wf_effect", "twice/1");
  h.add("wf_run", "skip", Outcome::Ok, {{"steps", 3}}, {}, "completed");
  h.add("wf_effect", "skip/0");
  h.add("wf_effect", "skip/2");
  h.add("wf_start", "lost", Outcome::Ok);
  h.add("wf_start", "ghost", Outcome::Failed);
  h.add("wf_run", "ghost", Outcome::Ok, {{"steps", 1}}, {}, "pending");
  h.add("wf_effect", "orphan/0");
  auto r = check_workflows(h.ops);
  const std::string all = history::describe(r);
  BOOST_TEST(r.violations.size() == 6u, all);
  BOOST_TEST(all.find("step 0 of run twice took effect 2 times") != std::string::npos, all);
  BOOST_TEST(all.find("run skip has the effect of step 2 but not of step 1") != std::string::npos, all);
  BOOST_TEST(all.find("completed run skip has 2 of its 3 step effects") != std::string::npos, all);
  BOOST_TEST(all.find("run lost answered started but does not exist") != std::string::npos, all);
  BOOST_TEST(all.find("run ghost exists though every start failed") != std::string::npos, all);
  BOOST_TEST(all.find("run orphan has step effects but does not exist") != std::string::npos, all);
}

BOOST_AUTO_TEST_CASE(idempotency_passes_one_effect_and_catches_two) {
  H h;
  h.add("idem", "k1", Outcome::Unknown);
  h.add("idem", "k1", Outcome::Ok, {}, {{"replay", 1}});
  h.add("idem", "k2", Outcome::Failed);
  h.add("idem_effect", "k1");
  auto r = check_idempotency(h.ops);
  BOOST_TEST(r.ok(), history::describe(r));
  h.add("idem_effect", "k1");
  BOOST_TEST(mentions(check_idempotency(h.ops), "2 effects"));
  H lost;
  lost.add("idem", "k3", Outcome::Ok);
  BOOST_TEST(mentions(check_idempotency(lost.ops), "no effect"));
}

namespace {
H good_audit() {
  H h;
  h.add("audit_append", "t", Outcome::Ok, {}, {{"seq", 1}}, "ev1");
  h.add("audit_append", "t", Outcome::Unknown, {}, {}, "ev2");
  h.add("audit_append", "t", Outcome::Failed, {}, {}, "ev3");
  h.add("audit_seen", "t", Outcome::Ok, {{"seq", 1}}, {}, "ev1");
  h.add("audit_seen", "t", Outcome::Ok, {{"seq", 2}}, {}, "ev2");
  h.add("audit_verify", "t", Outcome::Ok, {}, {{"ok", 1}, {"checked", 2}, {"head_seq", 2}});
  return h;
}
}  // namespace

BOOST_AUTO_TEST_CASE(audit_passes_a_gap_free_verified_chain) {
  auto r = check_audit(good_audit().ops);
  BOOST_TEST(r.ok(), history::describe(r));
}

BOOST_AUTO_TEST_CASE(audit_catches_a_gap_a_bad_chain_and_a_lost_append) {
  H gap = good_audit();
  gap.ops[4].args["seq"] = 3;
  BOOST_TEST(mentions(check_audit(gap.ops), "gap"));
  H bad = good_audit();
  bad.ops.back().result["ok"] = 0;
  BOOST_TEST(mentions(check_audit(bad.ops), "does not verify"));
  H lost = good_audit();
  lost.add("audit_append", "t", Outcome::Ok, {}, {{"seq", 3}}, "ev4");
  BOOST_TEST(mentions(check_audit(lost.ops), "not in the chain"));
}

BOOST_AUTO_TEST_CASE(a_streamed_history_reads_back_with_unfinished_ops_unknown) {
  const std::string path = "history-stream-test.log";
  std::remove(path.c_str());
  {
    history::Recorder rec(7, path);
    Op a;
    a.kind = "enqueue";
    a.key = "e1";
    rec.ok(rec.invoke(a), {{"msg_id", 3}});
    Op b;
    b.kind = "enqueue";
    b.key = "e2";
    rec.invoke(b);  // never completes, as if the process was killed here
  }
  auto ops = history::Recorder::load(path, 7);
  std::remove(path.c_str());
  BOOST_TEST_REQUIRE(ops.size() == 2u);
  BOOST_TEST(ops[0].outcome == Outcome::Ok);
  BOOST_TEST(ops[0].res("msg_id") == 3);
  BOOST_TEST(ops[1].outcome == Outcome::Unknown);
  BOOST_TEST(ops[1].error == "killed");
  BOOST_TEST(ops[1].process == 7);
}
