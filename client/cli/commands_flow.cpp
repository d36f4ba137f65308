// queue flow show | admission | weight | resource | breaker: flow control's limits, read and set
// (docs/operations.md, "Flow control"; docs/sql-api.md for the functions underneath).
#include <iostream>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

namespace {

struct FlowArgs {
  std::string tenant, queue, subject;
  bool json = false, off = false;
  // admission, resource
  std::int64_t rate = 0;
  std::string per = "1s";
  std::int64_t burst = 0, max_in_flight = 0;
  // weight
  int weight = 1;
  // breaker
  BreakerOptions breaker;
  std::string open_for = format_duration(BreakerOptions{}.open_for.count());
};

void print_text(const std::vector<FlowLimit>& rows) {
  for (const FlowLimit& r : rows) {
    std::cout << "kind=" << r.kind << " queue=" << r.queue.value_or("") << " subject=" << r.subject.value_or("")
              << " limit=" << json_string(r.limit);
    for (const auto& [name, v] :
         {std::pair{"available", r.available}, std::pair{"in_flight", r.in_flight}, std::pair{"counted", r.counted},
          std::pair{"delayed", r.delayed}, std::pair{"refused", r.refused}})
      if (v) std::cout << " " << name << "=" << *v;
    if (r.state) std::cout << " state=" << *r.state;
    if (r.since) std::cout << " since=" << iso(*r.since);
    std::cout << "\n";
  }
  std::cout << "limits=" << rows.size() << "\n";
}

void print_json(const std::vector<FlowLimit>& rows) {
  JsonWriter w;
  w.begin_object().key("limits").begin_array();
  auto optional = [&](const char* name, const auto& v) {
    w.key(name);
    if (v)
      w.value(*v);
    else
      w.null();
  };
  for (const FlowLimit& r : rows) {
    w.begin_object();
    optional("queue", r.queue);
    w.field("kind", r.kind);
    optional("subject", r.subject);
    w.field("limit", r.limit);
    optional("available", r.available);
    optional("in_flight", r.in_flight);
    optional("counted", r.counted);
    optional("delayed", r.delayed);
    optional("refused", r.refused);
    optional("state", r.state);
    optional("since", r.since ? std::optional<std::string>(iso(*r.since)) : std::nullopt);
    w.end_object();
  }
  w.end_array().end_object();
  std::cout << w.str() << "\n";
}

}  // namespace

void add_flow_commands(CLI::App& queue, Commands& commands) {
  CLI::App* flow = queue.add_subcommand(
      "flow", "flow control: show the limits and what they hold; set admission limits, weights, resources, breakers");
  flow->require_subcommand(1);
  auto a = std::make_shared<FlowArgs>();

  CLI::App* show = flow->add_subcommand("show", "every limit of the tenant and what it holds now");
  show->add_option("TENANT", a->tenant, "the tenant")->required();
  show->add_flag("--json", a->json, "one JSON object instead of key=value lines");
  commands.on(show, [a](Context& ctx) {
    const auto rows = ctx.store().queues().flow_state(a->tenant);
    if (a->json)
      print_json(rows);
    else
      print_text(rows);
    return 0;
  });

  CLI::App* admission = flow->add_subcommand("admission", "limit a queue's producers to RATE enqueues per PER");
  admission->add_option("TENANT", a->tenant, "the tenant")->required();
  admission->add_option("QUEUE", a->queue, "the queue")->required();
  admission->add_option("--rate", a->rate, "enqueues per interval")->type_name("N");
  admission->add_option("--per", a->per, "the interval")->type_name("D")->capture_default_str();
  admission->add_flag("--off", a->off, "remove the limit");
  commands.on(admission, [a](Context& ctx) {
    std::optional<RateLimit> limit;
    if (!a->off) limit = RateLimit{a->rate, parse_duration(a->per)};
    ctx.store().queues().admission_limit(a->tenant, a->queue, limit);
    std::cout << "admission_limit=" << (limit ? std::to_string(a->rate) + "/" + a->per : "none") << "\n";
    return 0;
  });

  CLI::App* weight = flow->add_subcommand("weight", "a fairness key's share in a fair queue (1 by default)");
  weight->add_option("TENANT", a->tenant, "the tenant")->required();
  weight->add_option("QUEUE", a->queue, "the queue (option fairness)")->required();
  weight->add_option("KEY", a->subject, "the fairness key")->required();
  weight->add_option("WEIGHT", a->weight, "1..1000")->required();
  commands.on(weight, [a](Context& ctx) {
    ctx.store().queues().fairness_weight(a->tenant, a->queue, a->subject, a->weight);
    std::cout << "weight=" << a->weight << "\n";
    return 0;
  });

  CLI::App* resource = flow->add_subcommand(
      "resource", "what a resource allows its messages across the tenant's queues (no option: remove its limits)");
  resource->add_option("TENANT", a->tenant, "the tenant")->required();
  resource->add_option("RESOURCE", a->subject, "the resource (enqueue's resource)")->required();
  resource->add_option("--rate", a->rate, "deliveries per interval")->type_name("N");
  resource->add_option("--per", a->per, "the rate's interval")->type_name("D")->capture_default_str();
  resource->add_option("--burst", a->burst, "deliveries at once (default: the rate)")->type_name("N");
  resource->add_option("--max-in-flight", a->max_in_flight, "deliveries out at a time")->type_name("N");
  commands.on(resource, [a](Context& ctx) {
    ResourceLimits limits;
    if (a->rate != 0) limits.rate = RateLimit{a->rate, parse_duration(a->per)};
    limits.burst = a->burst;
    if (a->max_in_flight != 0) limits.max_in_flight = a->max_in_flight;
    ctx.store().queues().resource_limit(a->tenant, a->subject, limits);
    std::cout << "resource=" << a->subject << "\n";
    return 0;
  });

  CLI::App* breaker = flow->add_subcommand("breaker", "give a resource a circuit breaker, or remove it (--off)");
  breaker->add_option("TENANT", a->tenant, "the tenant")->required();
  breaker->add_option("RESOURCE", a->subject, "the resource")->required();
  breaker->add_option("--failure-rate", a->breaker.failure_rate, "of the window's outcomes, to open")
      ->type_name("F")
      ->capture_default_str();
  breaker->add_option("--minimum-calls", a->breaker.minimum_calls, "outcomes seen before it may open")
      ->type_name("N")
      ->capture_default_str();
  breaker->add_option("--window", a->breaker.window, "the last this many outcomes")
      ->type_name("N")
      ->capture_default_str();
  breaker->add_option("--open-for", a->open_for, "how long it stays open")->type_name("D")->capture_default_str();
  breaker->add_option("--half-open-calls", a->breaker.half_open_calls, "trial deliveries; all must succeed")
      ->type_name("N")
      ->capture_default_str();
  breaker->add_flag("--off", a->off, "remove the breaker");
  commands.on(breaker, [a](Context& ctx) {
    std::optional<BreakerOptions> options;
    if (!a->off) {
      options = a->breaker;
      options->open_for = parse_duration(a->open_for);
    }
    ctx.store().queues().breaker_configure(a->tenant, a->subject, options);
    if (!options) {
      std::cout << "breaker=none\n";
      return 0;
    }
    const BreakerStatus s = ctx.store().queues().breaker_state(a->tenant, a->subject);
    std::cout << "breaker=" << s.state << "\nfailures=" << s.failures << "\ncalls=" << s.calls << "\n";
    return 0;
  });
}

}  // namespace forgeyard::cli
