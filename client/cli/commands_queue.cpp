// queue create | send | claim | ack | nack | stats | dead | redrive | work | flow (docs/sql-api.md,
// "Queues"). `queue work` runs job_runner.cpp, `queue flow` is commands_flow.cpp.
#include <iostream>
#include <optional>

#include "cli.hpp"
#include "core/core.hpp"
#include "job_runner.hpp"

namespace forgeyard::cli {

namespace {
// The queue option defaults are the core's (core/queue_options.hpp, the one source the extension and
// the client use too), so `queue create --help` shows what a queue gets without the option.
struct CreateArgs {
  static constexpr const fy::core::QueueOptions& core = fy::core::default_queue_options;
  std::int64_t max_messages = core.max_messages;
  std::int64_t max_bytes = core.max_bytes;
  std::int64_t max_payload_bytes = core.max_payload_bytes;
  std::string visibility = format_duration(core.visibility_usecs);
  std::int64_t max_attempts = core.max_attempts;
  std::string backoff_base = format_duration(core.backoff_base_usecs);
  std::string backoff_max = format_duration(core.backoff_max_usecs);
  std::string ordering = core.partitioned ? "partition" : "none";
  std::string dead_letter_payload = core.keep_dead_payload ? "keep" : "drop";
  // Flow control (docs/operations.md, "Flow control").
  bool fairness = core.fairness;
  std::string aging = "0s";
  std::int64_t max_in_flight_per_key = 0;
};

struct QueueArgs {
  std::string tenant, queue;
  std::int64_t msg_id = 0, claim_token = 0;
  // send
  std::string payload, event_id, partition_key, fairness_key, resource;
  std::string priority{to_string(OutgoingMessage{}.priority)};
  std::string delay = "0s";
  // claim, dead, redrive
  int max = 1;
  std::string visibility;
  std::string consumer = "cli";
  std::int64_t after = 0;
  int dead_max = 100;
  std::vector<std::int64_t> ids;
  // nack
  std::string error;
  bool permanent = false;
};

struct WorkArgs {
  static inline const WorkerOptions library{};
  std::string tenant, queue, command;
  int batch = library.batch;
  std::string visibility = format_duration(library.visibility.count());
  std::string consumer = "cli-worker";
  bool until_empty = false;
};

void add_target(CLI::App& c, std::string& tenant, std::string& queue) {
  c.add_option("TENANT", tenant, "the tenant")->required();
  c.add_option("QUEUE", queue, "the queue")->required();
}
void add_delivery(CLI::App& c, QueueArgs& a) {
  add_target(c, a.tenant, a.queue);
  c.add_option("MSG_ID", a.msg_id, "the message")->required();
  c.add_option("CLAIM_TOKEN", a.claim_token, "the token of this delivery (from queue claim)")->required();
}
}  // namespace

void add_queue_commands(CLI::App& app, Commands& commands) {
  CLI::App* queue = app.add_subcommand("queue", "durable queues: send, claim, ack, retries, dead letters");
  queue->require_subcommand(1);

  auto o = std::make_shared<CreateArgs>();
  auto a = std::make_shared<QueueArgs>();
  CLI::App* create = queue->add_subcommand("create", "create a queue with these options over the defaults");
  add_target(*create, a->tenant, a->queue);
  create->add_option("--max-messages", o->max_messages, "capacity in messages")->type_name("N")->capture_default_str();
  create->add_option("--max-bytes", o->max_bytes, "capacity in payload bytes")->type_name("N")->capture_default_str();
  create->add_option("--max-payload-bytes", o->max_payload_bytes, "largest payload")
      ->type_name("N")
      ->capture_default_str();
  create->add_option("--visibility", o->visibility, "how long a claim hides a message")
      ->type_name("D")
      ->capture_default_str();
  create->add_option("--max-attempts", o->max_attempts, "deliveries before a dead letter")
      ->type_name("N")
      ->capture_default_str();
  create->add_option("--backoff-base", o->backoff_base, "first retry delay (full jitter)")
      ->type_name("D")
      ->capture_default_str();
  create->add_option("--backoff-max", o->backoff_max, "longest retry delay")->type_name("D")->capture_default_str();
  create->add_option("--ordering", o->ordering, "partition: one message in flight per partition key")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "partition"}).description(""))  // the type name says it
      ->type_name("none|partition");
  create->add_option("--dead-letter-payload", o->dead_letter_payload, "whether dead letters keep their payload")
      ->capture_default_str()
      ->check(CLI::IsMember({"drop", "keep"}).description(""))
      ->type_name("drop|keep");
  create->add_flag("--fairness", o->fairness, "claims interleave fairness keys by weight (queue flow weight)");
  create->add_option("--aging", o->aging, "a ready message climbs a class per this long waited, up to realtime")
      ->type_name("D")
      ->capture_default_str();
  create
      ->add_option("--max-in-flight-per-key", o->max_in_flight_per_key,
                   "messages of one fairness key ready or in flight at a time (0: no limit)")
      ->type_name("N")
      ->capture_default_str();
  commands.on(create, [o, a](Context& ctx) {
    QueueOptions q;
    q.max_messages = o->max_messages;
    q.max_bytes = o->max_bytes;
    q.max_payload_bytes = o->max_payload_bytes;
    q.visibility_timeout = parse_duration(o->visibility);
    q.max_attempts = o->max_attempts;
    q.backoff_base = parse_duration(o->backoff_base);
    q.backoff_max = parse_duration(o->backoff_max);
    q.partition_ordered = o->ordering == "partition";
    q.keep_dead_letter_payload = o->dead_letter_payload == "keep";
    q.fairness = o->fairness;
    q.aging = parse_duration(o->aging);
    if (o->max_in_flight_per_key != 0) q.max_in_flight_per_key = o->max_in_flight_per_key;
    ctx.store().queues().create(a->tenant, a->queue, q);
    std::cout << "created=" << a->queue << "\n";
    return 0;
  });

  CLI::App* send = queue->add_subcommand("send", "enqueue a message; prints its msg_id");
  add_target(*send, a->tenant, a->queue);
  send->add_option("PAYLOAD", a->payload, "the payload, or - to read it from stdin")->required();
  send->add_option("--event-id", a->event_id, "a repeat within the dedup window returns the first msg_id")
      ->type_name("UUID");
  send->add_option("--partition-key", a->partition_key, "the partition of a partition-ordered queue")->type_name("K");
  send->add_option("--priority", a->priority, "emergency, security_control, realtime, interactive, background or bulk")
      ->type_name("P")
      ->capture_default_str();
  send->add_option("--delay", a->delay, "deliver no earlier than this")->type_name("D")->capture_default_str();
  send->add_option("--fairness-key", a->fairness_key, "whose message it is (fair queues, per-key limits)")
      ->type_name("K");
  send->add_option("--resource", a->resource, "the downstream it will hit (queue flow resource, breaker)")
      ->type_name("R");
  commands.on(send, [a](Context& ctx) {
    OutgoingMessage m;
    if (!a->event_id.empty()) m.event_id = a->event_id;
    if (!a->partition_key.empty()) m.partition_key = a->partition_key;
    if (!a->fairness_key.empty()) m.fairness_key = a->fairness_key;
    if (!a->resource.empty()) m.resource = a->resource;
    m.priority = priority_from_string(a->priority);
    m.delay = parse_duration(a->delay);
    m.payload = a->payload == "-" ? read_stdin() : a->payload;
    const std::int64_t msg_id = ctx.store().queues().enqueue(a->tenant, a->queue, m);
    std::cout << "msg_id=" << msg_id << "\n";
    return 0;
  });

  CLI::App* claim = queue->add_subcommand("claim", "claim up to N ready messages, one line each");
  add_target(*claim, a->tenant, a->queue);
  claim->add_option("--max", a->max, "messages at most")->type_name("N")->capture_default_str();
  claim->add_option("--visibility", a->visibility, "how long the claim hides them (default: the queue's)")
      ->type_name("D");
  claim->add_option("--consumer", a->consumer, "who claims (recorded)")->type_name("C")->capture_default_str();
  commands.on(claim, [a](Context& ctx) {
    auto got = ctx.store().queues().claim(
        a->tenant, a->queue, a->consumer, a->max,
        a->visibility.empty() ? std::nullopt : std::optional<Duration>(parse_duration(a->visibility)));
    for (const auto& d : got)
      std::cout << "msg_id=" << d.msg_id << " claim_token=" << d.claim_token << " attempt=" << d.attempt
                << " priority=" << to_string(d.priority) << " partition_key=" << d.partition_key.value_or("")
                << " event_id=" << d.event_id.value_or("") << " payload=" << d.payload << "\n";
    return got.empty() ? 1 : 0;
  });

  CLI::App* ack = queue->add_subcommand("ack", "done with a delivery");
  add_delivery(*ack, *a);
  commands.on(ack, [a](Context& ctx) {
    ctx.store().queues().ack(a->tenant, a->queue, a->msg_id, a->claim_token);
    std::cout << "acked=" << a->msg_id << "\n";
    return 0;
  });

  CLI::App* nack = queue->add_subcommand("nack", "a failed delivery: retry after a backoff, or dead-letter it");
  add_delivery(*nack, *a);
  nack->add_option("--error", a->error, "why it failed (kept with a dead letter)")->type_name("TEXT");
  nack->add_flag("--permanent", a->permanent, "dead-letter it now, whatever the attempt");
  commands.on(nack, [a](Context& ctx) {
    const auto outcome =
        ctx.store().queues().nack(a->tenant, a->queue, a->msg_id, a->claim_token, a->error, a->permanent);
    std::cout << "outcome=" << (outcome == NackOutcome::Dead ? "dead" : "retry") << "\n";
    return 0;
  });

  CLI::App* stats = queue->add_subcommand("stats", "depth, bytes, oldest ready age, pressure");
  add_target(*stats, a->tenant, a->queue);
  commands.on(stats, [a](Context& ctx) {
    auto s = ctx.store().queues().stats(a->tenant, a->queue, ctx.read());
    std::cout << "ready=" << s.ready << "\nin_flight=" << s.in_flight << "\ndelayed=" << s.delayed
              << "\ndead=" << s.dead << "\nbytes=" << s.bytes << "\noldest_ready_age_us="
              << (s.oldest_ready_age ? std::to_string(s.oldest_ready_age->count()) : std::string())
              << "\npressure=" << s.pressure << "\nwaiting=" << s.waiting << "\nretries_delayed=" << s.retries_delayed
              << "\n";
    return 0;
  });

  CLI::App* dead = queue->add_subcommand("dead", "list dead letters, oldest first");
  add_target(*dead, a->tenant, a->queue);
  dead->add_option("--after", a->after, "start after this msg_id (paging)")->type_name("MSG_ID")->capture_default_str();
  dead->add_option("--max", a->dead_max, "dead letters at most")->type_name("N")->capture_default_str();
  commands.on(dead, [a](Context& ctx) {
    auto letters = ctx.store().queues().dead_letters(a->tenant, a->queue, a->after, a->dead_max);
    for (const auto& d : letters)
      std::cout << "msg_id=" << d.msg_id << " attempt=" << d.attempt << " error_class=" << d.error_class
                << " dead_at=" << iso(d.dead_at) << " error=" << d.error << "\n";
    std::cout << "dead=" << letters.size() << "\n";
    return 0;
  });

  CLI::App* redrive = queue->add_subcommand("redrive", "dead letters back into the queue (all, or these)");
  add_target(*redrive, a->tenant, a->queue);
  redrive->add_option("MSG_ID", a->ids, "the dead letters to redrive (default: all)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  commands.on(redrive, [a](Context& ctx) {
    const int redriven = ctx.store().queues().redrive(a->tenant, a->queue, a->ids);
    std::cout << "redriven=" << redriven << "\n";
    return 0;
  });

  auto w = std::make_shared<WorkArgs>();
  CLI::App* work =
      queue->add_subcommand("work",
                            "run COMMAND (sh -c) per message, payload on stdin and FORGEYARD_MSG_ID etc. in its "
                            "environment: exit 0 acks, exit 100 dead-letters, else retry");
  add_target(*work, w->tenant, w->queue);
  work->add_option("COMMAND", w->command, "a shell command")->required();
  work->add_option("--batch", w->batch, "messages per claim")->type_name("N")->capture_default_str();
  work->add_option("--visibility", w->visibility, "how long a claim hides a message (extended while it runs)")
      ->type_name("D")
      ->capture_default_str();
  work->add_option("--consumer", w->consumer, "who claims (recorded)")->type_name("C")->capture_default_str();
  work->add_flag("--until-empty", w->until_empty, "stop once the queue is empty (else until SIGINT or SIGTERM)");
  commands.on(work, [w](Context& ctx) {
    WorkerOptions opts;
    opts.tenant = w->tenant;
    opts.queue = w->queue;
    opts.batch = w->batch;
    opts.visibility = parse_duration(w->visibility);
    opts.consumer = w->consumer;
    opts.stop_when_idle = w->until_empty;
    const WorkerStats s = run_jobs(ctx.store().queues(), opts, w->command);
    std::cout << "acked=" << s.acked << "\nretried=" << s.retried << "\ndead=" << s.dead << "\nextended=" << s.extended
              << "\n";
    return 0;
  });
  add_flow_commands(*queue, commands);
}

}  // namespace forgeyard::cli
