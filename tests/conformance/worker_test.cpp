// The worker helper and the CLI's job runner, on every backend.
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "backend.hpp"
#include "check.hpp"

using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(worker, conformance::Backend)

BOOST_AUTO_TEST_CASE(the_worker_acks_retries_and_dead_letters_by_the_handlers_result) {
  store->queues().create(tenant, "jobs", {});
  for (const char* p : {"ok-1", "flaky", "ok-2", "poison", "ok-3"}) store->queues().enqueue(tenant, "jobs", {p});
  forgeyard::WorkerOptions options;
  options.tenant = tenant;
  options.queue = "jobs";
  options.batch = 2;
  options.stop_when_idle = true;
  std::vector<std::string> seen;
  auto handler = [&](const forgeyard::Delivery& d) {
    seen.push_back(d.payload);
    if (d.payload == "poison") return forgeyard::HandlerResult::fail("cannot parse");
    if (d.payload == "flaky" && d.attempt == 1) throw std::runtime_error("timeout talking to the bank");
    return forgeyard::HandlerResult::ack();
  };
  auto stats = forgeyard::run_worker(store->queues(), options, handler, {});
  BOOST_TEST(stats.acked == 3u);
  BOOST_TEST(stats.dead == 1u);
  BOOST_TEST(stats.retried == 1u);
  BOOST_TEST(seen.size() == 5u);
  clock.advance(5min);  // past the retry's backoff
  stats = forgeyard::run_worker(store->queues(), options, handler, {});
  BOOST_TEST(stats.acked == 1u);
  auto s = store->queues().stats(tenant, "jobs");
  BOOST_TEST(s.ready + s.in_flight + s.delayed == 0);
  BOOST_TEST(s.dead == 1);
  BOOST_TEST(store->queues().dead_letters(tenant, "jobs")[0].error == "cannot parse");
}

BOOST_AUTO_TEST_CASE(the_worker_keeps_its_whole_batch_alive_while_handlers_run_long) {
  store->queues().create(tenant, "slow", {});
  store->queues().enqueue(tenant, "slow", {"long job 1"});
  store->queues().enqueue(tenant, "slow", {"long job 2"});  // waits its turn in the batch
  forgeyard::WorkerOptions options;
  options.tenant = tenant;
  options.queue = "slow";
  options.batch = 2;
  options.visibility = 900ms;
  options.stop_when_idle = true;
  auto other = open_another(1);
  bool stolen = false;
  auto stats = forgeyard::run_worker(store->queues(), options,
                                     [&](const forgeyard::Delivery&) {
                                       for (int i = 0; i < 4; ++i) {
                                         std::this_thread::sleep_for(400ms);
                                         clock.advance(400ms);  // time passes for the store too
                                         stolen = stolen || !other->queues().claim(tenant, "slow", "thief", 1).empty();
                                       }
                                       return forgeyard::HandlerResult::ack();
                                     },
                                     {});
  BOOST_TEST(stats.extended >= 2u);
  BOOST_TEST(!stolen);  // 3.2 s of work on a 0.9 s visibility: nobody else got either message
  BOOST_TEST(stats.acked == 2u);
  BOOST_TEST(stats.stale == 0u);
}

BOOST_AUTO_TEST_CASE(a_lapsed_delivery_in_a_batch_does_not_stop_the_worker) {
  store->queues().create(tenant, "lapse", {});
  store->queues().enqueue(tenant, "lapse", {"m1"});
  store->queues().enqueue(tenant, "lapse", {"m2"});
  forgeyard::WorkerOptions options;
  options.tenant = tenant;
  options.queue = "lapse";
  options.batch = 2;
  options.visibility = 10s;
  options.stop_when_idle = true;
  auto other = open_another(1);
  std::vector<forgeyard::Delivery> taken;
  auto stats =
      forgeyard::run_worker(store->queues(), options,
                            [&](const forgeyard::Delivery& d) {
                              if (d.payload == "m1") {
                                clock.advance(11s);  // both deliveries lapse, and another consumer takes them over
                                taken = other->queues().claim(tenant, "lapse", "other", 2);
                              }
                              return forgeyard::HandlerResult::ack();
                            },
                            {});
  BOOST_TEST(taken.size() == 2u);
  BOOST_TEST(stats.stale == 2u);  // its late acks were refused, one by one, and the loop went on
  BOOST_TEST(stats.acked == 0u);
  for (const auto& d : taken) other->queues().ack(tenant, "lapse", d.msg_id, d.claim_token);
  BOOST_TEST(store->queues().stats(tenant, "lapse").in_flight == 0);
}

BOOST_AUTO_TEST_CASE(a_stop_request_ends_the_loop_and_acks_what_was_handled) {
  store->queues().create(tenant, "stop", {});
  for (int i = 0; i < 3; ++i) store->queues().enqueue(tenant, "stop", {"m"});
  std::stop_source stop;
  forgeyard::WorkerOptions options;
  options.tenant = tenant;
  options.queue = "stop";
  options.batch = 3;
  int handled = 0;
  auto stats = forgeyard::run_worker(
      store->queues(), options,
      [&](const forgeyard::Delivery&) {
        if (++handled == 3) stop.request_stop();
        return forgeyard::HandlerResult::ack();
      },
      stop.get_token());
  BOOST_TEST(stats.acked == 3u);
  BOOST_TEST(store->queues().stats(tenant, "stop").in_flight == 0);
}

BOOST_AUTO_TEST_CASE(the_cli_sends_while_its_worker_runs) {
  // `queue work` is a local job runner: `queue send` from other processes must get through
  // while it runs, and SIGTERM stops it cleanly.
  store->queues().create(tenant, "cli", {});
  const std::string out = (std::filesystem::temp_directory_path() / ("forgeyard-worker-" + unique("out"))).string();
  const pid_t worker =
      spawn_cli({"queue", "work", tenant, "cli", "cat >> " + out + "; echo >> " + out, "--batch", "1"});
  for (int i = 0; i < 5; ++i) {
    int status = 0;
    waitpid(spawn_cli({"queue", "send", tenant, "cli", "job-" + std::to_string(i)}), &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  int lines = 0;
  for (int wait = 0; wait < 200 && lines < 5; ++wait) {  // up to 20 s for the worker to drain them
    std::this_thread::sleep_for(100ms);
    std::ifstream in(out);
    lines = 0;
    for (std::string line; std::getline(in, line);) lines += line.rfind("job-", 0) == 0 ? 1 : 0;
  }
  BOOST_TEST(lines == 5);
  kill(worker, SIGTERM);
  int status = 0;
  waitpid(worker, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  auto s = store->queues().stats(tenant, "cli");
  BOOST_TEST(s.ready + s.in_flight == 0);
  std::filesystem::remove(out);
}

BOOST_AUTO_TEST_CASE(the_cli_runner_survives_a_command_that_ignores_its_payload) {
  forgeyard::QueueOptions o;
  o.max_payload_bytes = 1 << 20;
  store->queues().create(tenant, "big", o);
  store->queues().enqueue(tenant, "big", {std::string(300000, 'x')});  // more than a pipe holds
  const int code = run_cli({"queue", "work", tenant, "big", "exit 0", "--until-empty", "true"});
  BOOST_TEST(code == 0);  // exited normally: not killed by SIGPIPE
  auto s = store->queues().stats(tenant, "big");
  BOOST_TEST(s.ready + s.in_flight == 0);  // and the message was acked
}

BOOST_AUTO_TEST_SUITE_END()
