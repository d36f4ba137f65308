// event-type register, topic create | drop | list | subscribe | unsubscribe | publish | rewind |
// lag (docs/sql-api.md, "Topics"). A subscription's consumers use the queue commands on it.
#include <iostream>
#include <map>
#include <optional>

#include "cli.hpp"

namespace forgeyard::cli {

namespace {

struct TopicArgs {
  std::string tenant, topic, subscription;
  // event-type register
  std::string event_type;
  int version = 1;
  std::string retention_class = "operational";
  // topic create
  int max_subscriptions = TopicOptions{}.max_subscriptions;
  std::string retention = "0s";
  std::string dedup_window = "1d";
  // subscribe
  std::vector<std::string> event_types;  // TYPE or TYPE:MIN-MAX
  std::string on_full = "reject";
  std::string start = "now";
  std::int64_t max_messages = QueueOptions{}.max_messages;
  std::string ordering = "none";
  // publish
  std::string payload, event_id, partition_key;
  std::string priority{to_string(Event{}.priority)};
  // rewind
  std::string ago;
};

RetentionClass retention_class_from(const std::string& s) {
  for (RetentionClass c :
       {RetentionClass::Ephemeral, RetentionClass::Short, RetentionClass::Operational, RetentionClass::Audit})
    if (to_string(c) == s) return c;
  throw Usage("--retention-class must be ephemeral, short, operational or audit");
}

// TYPE (every version) or TYPE:MIN-MAX.
std::pair<std::string, VersionRange> parse_event_type(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return {text, VersionRange{}};
  const std::string range = text.substr(colon + 1);
  const auto dash = range.find('-');
  if (dash == std::string::npos) throw Usage("--event-type takes TYPE or TYPE:MIN-MAX, got " + text);
  VersionRange r;
  r.min = static_cast<int>(parse_int(range.substr(0, dash), "--event-type MIN"));
  r.max = static_cast<int>(parse_int(range.substr(dash + 1), "--event-type MAX"));
  return {text.substr(0, colon), r};
}

}  // namespace

void add_topic_commands(CLI::App& app, Commands& commands) {
  auto a = std::make_shared<TopicArgs>();

  CLI::App* types = app.add_subcommand("event-type", "the registry of event types and versions topics accept");
  types->require_subcommand(1);
  CLI::App* reg = types->add_subcommand("register", "register (TYPE, VERSION) for a tenant");
  reg->add_option("TENANT", a->tenant, "the tenant")->required();
  reg->add_option("TYPE", a->event_type, "the event type")->required();
  reg->add_option("VERSION", a->version, "the version (1..1000000)")->required();
  reg->add_option("--retention-class", a->retention_class, "ephemeral, short, operational or audit")
      ->type_name("C")
      ->capture_default_str();
  commands.on(reg, [a](Context& ctx) {
    ctx.store().topics().register_event_type(a->tenant, a->event_type, a->version,
                                             retention_class_from(a->retention_class));
    std::cout << "registered=" << a->event_type << "/" << a->version << "\n";
    return 0;
  });

  CLI::App* topic = app.add_subcommand("topic", "durable pub/sub: topics, subscriptions, publish, replay, lag");
  topic->require_subcommand(1);
  auto add_target = [&](CLI::App& c) {
    c.add_option("TENANT", a->tenant, "the tenant")->required();
    c.add_option("TOPIC", a->topic, "the topic")->required();
  };

  CLI::App* create = topic->add_subcommand("create", "create a topic");
  add_target(*create);
  create->add_option("--max-subscriptions", a->max_subscriptions, "fan-out bound (1..256)")
      ->type_name("N")
      ->capture_default_str();
  create->add_option("--retention", a->retention, "how long events stay replayable")
      ->type_name("D")
      ->capture_default_str();
  create->add_option("--dedup-window", a->dedup_window, "a repeated event_id returns the first event")
      ->type_name("D")
      ->capture_default_str();
  commands.on(create, [a](Context& ctx) {
    TopicOptions o;
    o.max_subscriptions = a->max_subscriptions;
    o.retention = parse_duration(a->retention);
    o.dedup_window = parse_duration(a->dedup_window);
    ctx.store().topics().create(a->tenant, a->topic, o);
    std::cout << "created=" << a->topic << "\n";
    return 0;
  });

  CLI::App* drop = topic->add_subcommand("drop", "drop a topic, its events and its subscriptions");
  add_target(*drop);
  commands.on(drop, [a](Context& ctx) {
    const bool dropped = ctx.store().topics().drop(a->tenant, a->topic);
    std::cout << "dropped=" << (dropped ? "true" : "false") << "\n";
    return dropped ? 0 : 1;
  });

  CLI::App* list = topic->add_subcommand("list", "the topics of a tenant, one line each");
  list->add_option("TENANT", a->tenant, "the tenant")->required();
  commands.on(list, [a](Context& ctx) {
    const auto topics = ctx.store().topics().list(a->tenant);
    for (const auto& t : topics) {
      std::cout << "topic=" << t.topic << " max_subscriptions=" << t.options.max_subscriptions
                << " retention=" << format_duration(t.options.retention.count()) << " subscriptions=";
      for (std::size_t i = 0; i < t.subscriptions.size(); ++i) std::cout << (i ? "," : "") << t.subscriptions[i];
      std::cout << "\n";
    }
    std::cout << "topics=" << topics.size() << "\n";
    return 0;
  });

  CLI::App* subscribe = topic->add_subcommand("subscribe", "create a subscription: a queue fed by the topic");
  add_target(*subscribe);
  subscribe->add_option("SUBSCRIPTION", a->subscription, "its name (the queue's)")->required();
  add_repeated(*subscribe, "--event-type", a->event_types, "accept only this type (repeat; TYPE:MIN-MAX for versions)",
               "T");
  subscribe->add_option("--on-full", a->on_full, "reject the publish, or dead-letter the event here")
      ->capture_default_str()
      ->check(CLI::IsMember({"reject", "dead_letter"}).description(""))
      ->type_name("reject|dead_letter");
  subscribe->add_option("--start", a->start, "oldest: first the retained events")
      ->capture_default_str()
      ->check(CLI::IsMember({"now", "oldest"}).description(""))
      ->type_name("now|oldest");
  subscribe->add_option("--max-messages", a->max_messages, "the queue's capacity in messages")
      ->type_name("N")
      ->capture_default_str();
  subscribe->add_option("--ordering", a->ordering, "partition: one message in flight per partition key")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "partition"}).description(""))
      ->type_name("none|partition");
  commands.on(subscribe, [a](Context& ctx) {
    SubscriptionOptions o;
    o.queue.max_messages = a->max_messages;
    o.queue.partition_ordered = a->ordering == "partition";
    o.on_full = a->on_full == "dead_letter" ? OnFull::DeadLetter : OnFull::Reject;
    o.start = a->start == "oldest" ? StartAt::Oldest : StartAt::Now;
    if (!a->event_types.empty()) {
      o.event_types.emplace();
      for (const auto& t : a->event_types) o.event_types->insert(parse_event_type(t));
    }
    ctx.store().topics().subscribe(a->tenant, a->topic, a->subscription, o);
    std::cout << "subscribed=" << a->subscription << "\n";
    return 0;
  });

  CLI::App* unsubscribe = topic->add_subcommand("unsubscribe", "drop a subscription and its queue");
  add_target(*unsubscribe);
  unsubscribe->add_option("SUBSCRIPTION", a->subscription, "the subscription")->required();
  commands.on(unsubscribe, [a](Context& ctx) {
    const bool removed = ctx.store().topics().unsubscribe(a->tenant, a->topic, a->subscription);
    std::cout << "unsubscribed=" << (removed ? "true" : "false") << "\n";
    return removed ? 0 : 1;
  });

  CLI::App* publish = topic->add_subcommand("publish", "publish an event; prints its event_seq");
  add_target(*publish);
  publish->add_option("TYPE", a->event_type, "a registered event type")->required();
  publish->add_option("VERSION", a->version, "a registered version of it")->required();
  publish->add_option("PAYLOAD", a->payload, "the payload, or - to read it from stdin")->required();
  publish->add_option("--event-id", a->event_id, "a repeat within the dedup window returns the first event_seq")
      ->type_name("UUID");
  publish->add_option("--partition-key", a->partition_key, "for partition-ordered subscriptions")->type_name("K");
  publish->add_option("--priority", a->priority, "the class of the subscriptions' messages")
      ->type_name("P")
      ->capture_default_str();
  commands.on(publish, [a](Context& ctx) {
    Event e;
    e.event_type = a->event_type;
    e.version = a->version;
    if (!a->event_id.empty()) e.event_id = a->event_id;
    if (!a->partition_key.empty()) e.partition_key = a->partition_key;
    e.priority = priority_from_string(a->priority);
    e.payload = a->payload == "-" ? read_stdin() : a->payload;
    const std::int64_t seq = ctx.store().topics().publish(a->tenant, a->topic, e);
    std::cout << "event_seq=" << seq << "\n";
    return 0;
  });

  CLI::App* rewind = topic->add_subcommand("rewind", "deliver the retained events of the last AGO again");
  add_target(*rewind);
  rewind->add_option("SUBSCRIPTION", a->subscription, "the subscription")->required();
  rewind->add_option("AGO", a->ago, "how far back, e.g. 1h")->required();
  commands.on(rewind, [a](Context& ctx) {
    const TimePoint since = std::chrono::time_point_cast<Duration>(Clock::now()) - parse_duration(a->ago);
    const auto redelivered = ctx.store().topics().rewind(a->tenant, a->topic, a->subscription, since);
    std::cout << "redelivered=" << redelivered << "\n";
    return 0;
  });

  CLI::App* lag = topic->add_subcommand("lag", "per subscription: backlog, in flight, oldest unacked, dead");
  add_target(*lag);
  commands.on(lag, [a](Context& ctx) {
    for (const auto& l : ctx.store().topics().lag(a->tenant, a->topic, ctx.read()))
      std::cout << "subscription=" << l.subscription << " backlog=" << l.backlog << " in_flight=" << l.in_flight
                << " dead=" << l.dead << " oldest_unacked_age_us="
                << (l.oldest_unacked_age ? std::to_string(l.oldest_unacked_age->count()) : std::string())
                << " pressure=" << l.pressure << "\n";
    return 0;
  });
}

}  // namespace forgeyard::cli
