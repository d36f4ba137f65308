// Topics: publish to one subscription and to four, each against one client enqueue of the same
// payload in the same run (the targets: >= 0.9x and >= 0.6x; docs/performance.md#topics). The
// payload is stored once per event, so four subscriptions cost four small message rows, not four
// payloads. Usage: topic_bench [--pg URL] [--iterations N] [--threads T]
#include <cstdio>
#include <string>

#include "forgeyard/forgeyard.hpp"
#include "harness.hpp"

namespace {

using bench::Config;
using bench::measure;

const std::string tenant = "bench";
const std::string payload(256, 'p');  // a small event

forgeyard::QueueOptions big() {
  forgeyard::QueueOptions o;
  o.max_messages = 10'000'000;
  o.max_bytes = std::int64_t{1} << 40;
  return o;
}

void run(forgeyard::Store& store, const Config& c, const char* backend) {
  auto& queues = store.queues();
  auto& topics = store.topics();
  queues.create(tenant, "enqueue", big());
  topics.register_event_type(tenant, "bench.event", 1);
  topics.create(tenant, "one");
  topics.create(tenant, "four");
  forgeyard::SubscriptionOptions sub;
  sub.queue = big();
  topics.subscribe(tenant, "one", "one_s0", sub);
  for (int s = 0; s < 4; ++s) topics.subscribe(tenant, "four", "four_s" + std::to_string(s), sub);
  forgeyard::Event e;
  e.event_type = "bench.event";
  e.payload = payload;
  // Interleaved rounds, so drift in the machine's load hits all three alike.
  double enq = 0, one = 0, four = 0;
  Config round = c;
  round.iterations = c.iterations / 4;
  for (int r = 0; r < 4; ++r) {
    enq += measure(round, [&](int, int) { queues.enqueue(tenant, "enqueue", {payload}); });
    one += measure(round, [&](int, int) { topics.publish(tenant, "one", e); });
    four += measure(round, [&](int, int) { topics.publish(tenant, "four", e); });
  }
  bench::report("publish, 1 subscription", backend, c, one / 4, enq / 4);
  bench::report("publish, 4 subscriptions", backend, c, four / 4, enq / 4);
  std::printf("%-28s %-10s (baseline: one client enqueue of the same %zu-byte payload; targets 0.9x and 0.6x)\n", "",
              backend, payload.size());
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = Config::parse(argc, argv, "topic_bench");
  if (!c.pg_url.empty()) {
    bench::Pg raw(c.pg_url);
    raw.exec(
        "SELECT forgeyard.topic_drop('bench', t) FROM unnest(ARRAY['one','four']) t;"
        "SELECT forgeyard.queue_drop('bench', 'enqueue');"
        "DELETE FROM forgeyard.event_types WHERE tenant_id = 'bench'");
    forgeyard::StoreOptions so;
    so.pool.max_connections = c.threads;
    auto store = forgeyard::open(c.pg_url, so);
    run(*store, c, "postgresql");
  }
  auto store = forgeyard::open("sqlite://" + c.sqlite_dir + "/store.db");
  run(*store, c, "sqlite");
  return 0;
}
