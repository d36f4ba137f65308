// The workflow rules both backends share (core/workflow.hpp): definitions, the positional step
// comparison, timers, waits for signals, the fence of a journal write.
#include <boost/test/unit_test.hpp>

#include "core/workflow.hpp"
#include "core/errors.hpp"
#include "core_errors.hpp"

namespace wf = fy::core::workflow;

using unit::code_of;

BOOST_AUTO_TEST_SUITE(workflow_rules)

BOOST_AUTO_TEST_CASE(definitions_are_name_at_version) {
  const wf::Definition d = wf::parse_definition("order.v2@12");
  BOOST_TEST(d.workflow == "order.v2");
  BOOST_TEST(d.version == 12);
  BOOST_TEST(wf::parse_definition("a@b@3").workflow == "a@b");  // the last @ separates the version
  for (const char* bad : {"order", "@1", "order@", "order@0", "order@-1", "order@1x", "order@ 1", "order@99999999999"})
    BOOST_TEST(code_of([&] { wf::parse_definition(bad); }) == "22023", bad);
  BOOST_TEST(wf::queue_name("order", 3) == "_wf.order@3");
  BOOST_TEST(wf::is_workflow_queue("_wf.order@3"));
  BOOST_TEST(!wf::is_workflow_queue("_wfx"));
  BOOST_TEST(code_of([] { wf::refuse_reserved_queue("_wf.mine"); }) == "22023");
  BOOST_TEST(code_of([] { wf::refuse_reserved_queue("mine"); }) == "none");
}

BOOST_AUTO_TEST_CASE(a_step_runs_replays_or_is_nondeterminism) {
  const std::int64_t now = 1000;
  BOOST_TEST((wf::decide_step(std::nullopt, "a", "r", 1, now) == wf::StepAnswer::run));
  BOOST_TEST((wf::decide_step(wf::JournalEntry{"a", "done", std::nullopt}, "a", "r", 1, now) == wf::StepAnswer::done));
  BOOST_TEST((wf::decide_step(wf::JournalEntry{"a", "failed", std::nullopt}, "a", "r", 1, now) == wf::StepAnswer::run));
  // A sleep is done only from its end on.
  BOOST_TEST((wf::decide_step(wf::JournalEntry{"nap", "done", now + 1}, "nap", "r", 1, now) == wf::StepAnswer::run));
  BOOST_TEST((wf::decide_step(wf::JournalEntry{"nap", "done", now}, "nap", "r", 1, now) == wf::StepAnswer::done));
  BOOST_TEST(code_of([&] {
               wf::decide_step(wf::JournalEntry{"a", "done", std::nullopt}, "b", "r", 1, now);
             }) == "FY060");
  BOOST_TEST(wf::idempotency_key("r", 2, "charge") == "r:2:charge");
}

BOOST_AUTO_TEST_CASE(a_timer_waits_at_most_a_queue_delay_at_a_time) {
  BOOST_TEST(wf::timer_delay(100, 40) == 60);
  BOOST_TEST(wf::timer_delay(40, 100) == 0);
  BOOST_TEST(wf::timer_delay(fy::core::max_queue_duration_usecs * 3, 0) == fy::core::max_queue_duration_usecs);
  BOOST_TEST(wf::sleep_result("2030-01-01T00:00:00.000000Z") == R"({"until":"2030-01-01T00:00:00.000000Z"})");
}

BOOST_AUTO_TEST_CASE(a_wait_receives_times_out_at_its_first_end_or_waits) {
  const wf::WaitState none{};
  const wf::WaitState here{3, 500};
  BOOST_TEST((wf::decide_wait(std::nullopt, "w", "r", 3, true, none, 100) == wf::WaitAction::receive));
  BOOST_TEST((wf::decide_wait(std::nullopt, "w", "r", 3, false, none, 100) == wf::WaitAction::wait));
  BOOST_TEST((wf::decide_wait(std::nullopt, "w", "r", 3, false, here, 499) == wf::WaitAction::wait));
  BOOST_TEST((wf::decide_wait(std::nullopt, "w", "r", 3, false, here, 500) == wf::WaitAction::time_out));
  BOOST_TEST((wf::decide_wait(std::nullopt, "w", "r", 4, false, here, 900) == wf::WaitAction::wait));  // another wait
  BOOST_TEST((wf::decide_wait(wf::JournalEntry{"w", "done", std::nullopt}, "w", "r", 3, true, none, 100) ==
              wf::WaitAction::replay));
  BOOST_TEST(code_of([&] {
               wf::decide_wait(wf::JournalEntry{"x", "done", std::nullopt}, "w", "r", 3, true, none, 1);
             }) == "FY060");
  // Woken early, the wait keeps its first end; a new one counts from now.
  BOOST_TEST(wf::wait_end(here, 3, 200, 1000) == 500);
  BOOST_TEST(wf::wait_end(here, 4, 200, 1000) == 1200);
  // What a wait is journaled with reads back the same.
  const std::string received = wf::signal_result({"received", std::string(R"({"by":"ann"})")});
  BOOST_TEST(received == R"({"payload":{"by":"ann"},"status":"received"})");
  const wf::SignalAnswer back = wf::parse_signal_result(received);
  BOOST_TEST(back.status == "received");
  BOOST_TEST((back.payload == std::optional<std::string>(R"({"by":"ann"})")));
  BOOST_TEST(!wf::parse_signal_result(wf::signal_result({"timed_out", std::nullopt})).payload);
  BOOST_TEST(code_of([] { wf::parse_signal_result("{}"); }) == "XX001");
}

BOOST_AUTO_TEST_CASE(a_journal_write_needs_the_running_runs_live_epoch) {
  BOOST_TEST(code_of([] { wf::check_owner({"running", 7, true}, 7, "r"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_owner({"running", 8, true}, 7, "r"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_owner({"sleeping", 7, true}, 7, "r"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_owner({"running", 7, false}, 7, "r"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_current_step(1, std::string("a"), "a", "f"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_current_step(0, std::nullopt, "a", "f"); }) == "22023");
  BOOST_TEST(code_of([] { wf::check_current_step(2, std::string("b"), "a", "f"); }) == "22023");
}

BOOST_AUTO_TEST_CASE(start_options_and_states_are_checked) {
  wf::StartOptions o;
  wf::set_start_option(o, "priority", "string", "bulk");
  BOOST_TEST(o.priority == 5);
  wf::set_start_option(o, "deadline", "string", "1 day");
  BOOST_TEST((o.deadline == std::optional<std::string>("1 day")));
  BOOST_TEST(code_of([&] { wf::set_start_option(o, "parent", "string", "nope"); }) == "22023");
  BOOST_TEST(code_of([&] { wf::set_start_option(o, "deadline", "number", "3"); }) == "22023");
  BOOST_TEST(code_of([&] { wf::set_start_option(o, "colour", "string", "red"); }) == "22023");
  BOOST_TEST(code_of([] { wf::check_state("parked"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_state("done"); }) == "22023");
  BOOST_TEST(code_of([] { wf::check_state(std::string(65, 'x')); }) == "22001");
  BOOST_TEST(wf::is_finished("parked"));
  BOOST_TEST(!wf::is_finished("waiting"));
  BOOST_TEST(wf::is_retryable("failed"));
  BOOST_TEST(!wf::is_retryable("completed"));
  BOOST_TEST(wf::canonical(R"({ "b": 1.50, "a": [true] })", "input") == R"({"a":[true],"b":1.5})");
  BOOST_TEST(code_of([] { wf::canonical("{", "input"); }) == "22023");
}

BOOST_AUTO_TEST_CASE(sagas_undo_newest_first_and_children_tell_their_parent_once) {
  BOOST_TEST(code_of([] { wf::check_owner({"compensating", 7, true}, 7, "r", "compensating"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_owner({"compensating", 7, true}, 7, "r"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_owner({"running", 7, true}, 7, "r", "compensating"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_owner({"compensating", 7, true}, 7, "r", "owned"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_owner({"running", 7, true}, 7, "r", "owned"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_owner({"sleeping", 7, true}, 7, "r", "owned"); }) == "FY001");
  BOOST_TEST(code_of([] { wf::check_next_compensation(3, 3, "r"); }) == "none");
  BOOST_TEST(code_of([] { wf::check_next_compensation(3, 1, "r"); }) == "22023");
  BOOST_TEST(code_of([] { wf::check_next_compensation(std::nullopt, 1, "r"); }) == "22023");
  BOOST_TEST(wf::compensation_key("r", 2, "pay") == "r:2:pay:compensate");
  BOOST_TEST(wf::keeps_error("compensation_failed"));
  for (const char* s : {"completed", "failed", "cancelled", "timed_out", "parked"}) BOOST_TEST(!wf::keeps_error(s));
  for (const char* s : {"failed", "cancelled", "timed_out"}) BOOST_TEST(wf::ends_with_compensation(s));
  for (const char* s : {"completed", "parked", "compensation_failed"}) BOOST_TEST(!wf::ends_with_compensation(s));
  BOOST_TEST(wf::is_retryable("compensation_failed"));
  BOOST_TEST(wf::tells_parent("completed"));
  BOOST_TEST(wf::tells_parent("compensation_failed"));
  BOOST_TEST(!wf::tells_parent("parked"));
  BOOST_TEST(!wf::tells_parent("compensating"));
  BOOST_TEST(wf::child_signal("r") == "child:r");
  BOOST_TEST(wf::child_payload("completed", std::string(R"({ "b": 2, "a": 1 })"), std::nullopt) ==
             R"({"error":null,"result":{"a":1,"b":2},"state":"completed"})");
  BOOST_TEST(wf::child_payload("failed", std::nullopt, std::string("say \"no\"")) ==
             R"({"error":"say \"no\"","result":null,"state":"failed"})");
  // A child's result of any size reaches its parent.
  const std::string big = "\"" + std::string(wf::max_json_bytes, 'x') + "\"";
  BOOST_TEST(wf::child_payload("completed", big, std::nullopt).size() > wf::max_json_bytes);
}

BOOST_AUTO_TEST_SUITE_END()
