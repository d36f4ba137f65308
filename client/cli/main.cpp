// forgeyard: the command line of the coordination store.
// Exit codes (stable, for scripts):
//   0 done   1 answered "no" (not acquired, not released, no such lease)   2 usage error
//   3 stale fence or version conflict   4 refused (invalid input, denied, not found, ...)
//   5 unavailable, timed out, or full: try again later
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/forgeyard.hpp"

extern char** environ;

namespace {

constexpr const char* usage_text = R"(usage: forgeyard [--store URL] [--unnamed-statements] COMMAND ...

Stores: --store URL or $FORGEYARD_STORE; postgresql://... (the forgeyard extension) or
sqlite:///path; default: the embedded store under $XDG_DATA_HOME/forgeyard (else
~/.local/share/forgeyard). --unnamed-statements: no named prepared statements (PgBouncer
in transaction mode).

Commands:
  storage status                               backend, location, schema, migrations, health
  lease acquire TENANT RESOURCE OWNER [--ttl D]  take the lease (default ttl 30s)
  lease renew TENANT RESOURCE EPOCH [--ttl D]    extend the live grant
  lease release TENANT RESOURCE EPOCH            give it up
  lease status TENANT RESOURCE                   owner, epoch, expiry and state
  lease reap [--max N] [--tenant T]              report grants that expired without release
  cas enable TABLE                               put a table under version control
  cas get TABLE --key COL=VALUE...               a versioned row and its version
  cas update TABLE EXPECTED --key COL=VALUE... --set COL=VALUE... [--null COL]...
                                                 compare-and-set from version EXPECTED
  idem status TENANT SCOPE KEY                   state of an idempotency key
  idem purge [--max N] [--tenant T]              delete keys whose retention ended
  queue create TENANT QUEUE [--max-messages N] [--max-bytes N] [--max-payload-bytes N]
               [--visibility D] [--max-attempts N] [--backoff-base D] [--backoff-max D]
               [--ordering none|partition] [--dead-letter-payload drop|keep]
  queue send TENANT QUEUE PAYLOAD|- [--event-id UUID] [--partition-key K] [--priority P] [--delay D]
  queue claim TENANT QUEUE [--max N] [--visibility D] [--consumer C]
  queue ack TENANT QUEUE MSG_ID CLAIM_TOKEN
  queue nack TENANT QUEUE MSG_ID CLAIM_TOKEN [--error TEXT] [--permanent true]
  queue stats TENANT QUEUE                       depth, bytes, oldest ready age, pressure
  queue dead TENANT QUEUE [--after MSG_ID] [--max N]
  queue redrive TENANT QUEUE [MSG_ID...]         dead letters back into the queue
  maintain [--max N] [--tenant T]                one bounded clean-up pass (purges, retention)
  audit append TENANT ACTOR ACTION RESOURCE [--details JSON] [--payload-digest HEX]
               [--payload-ref REF] [--occurred-at RFC3339] [--event-id UUID]
                                                 append an event; prints its seq and hash
  audit head TENANT                              the chain's last seq and hash (keep it elsewhere)
  audit tail TENANT [--n N]                      the last N events (default 10) as JSON lines
  audit export TENANT [--from SEQ]               the chain as JSON lines (for audit verify --file)
  audit verify TENANT [--from SEQ] [--to SEQ] [--anchor SEQ:HASH]
                                                 recompute the chain in the store
  audit verify --file PATH|- [--anchor SEQ:HASH] check an exported chain without any store
  queue work TENANT QUEUE COMMAND [--batch N] [--visibility D] [--consumer C] [--until-empty true]
                                                 run COMMAND (sh -c) per message, payload on stdin
                                                 and FORGEYARD_MSG_ID etc. in its environment:
                                                 exit 0 acks, exit 100 dead-letters, else retry

Durations: 500ms, 30s, 5m, 2h, 1d.  Values are text; the backend converts them to the
column's type.  Output: key=value lines on stdout; errors on stderr.
Exit codes: 0 done, 1 answered no (also: a chain that does not verify), 2 usage, 3 stale fence or version conflict, 4 refused,
5 unavailable or full: retry later.
)";

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string iso(forgeyard::TimePoint t) {
  const std::int64_t us = forgeyard::unix_usecs(t);
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1'000'000));
  return buf;
}

forgeyard::Duration parse_duration(const std::string& s) {
  std::size_t end = 0;
  long long n = 0;
  try {
    n = std::stoll(s, &end);
  } catch (const std::exception&) {
    throw Usage("bad duration: " + s);
  }
  const std::string unit = s.substr(end);
  using namespace std::chrono;
  static const std::map<std::string, microseconds> units = {
      {"us", microseconds(1)}, {"ms", milliseconds(1)}, {"s", seconds(1)},
      {"m", minutes(1)},       {"h", hours(1)},         {"d", hours(24)}};
  auto it = units.find(unit.empty() ? "s" : unit);
  if (it == units.end()) throw Usage("bad duration unit in " + s + " (use ms, s, m, h, d)");
  return forgeyard::Duration(n * it->second.count());
}

std::int64_t parse_int(const std::string& s, const char* what) {
  std::size_t end = 0;
  try {
    long long v = std::stoll(s, &end);
    if (end == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw Usage(std::string("bad ") + what + ": " + s);
}

// Positional arguments plus --name value options (a name may repeat).
struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;

  std::string take_option(const std::string& name, const std::string& fallback) {
    std::vector<std::string> all = take_all(name);
    return all.empty() ? fallback : all.back();
  }
  std::vector<std::string> take_all(const std::string& name) {
    std::vector<std::string> values;
    auto [first, last] = options.equal_range(name);
    for (auto it = first; it != last; ++it) values.push_back(it->second);
    options.erase(first, last);
    return values;
  }
  void expect(std::size_t n, const char* shape) const {
    if (positional.size() != n) throw Usage(std::string("expected: ") + shape);
  }
  void no_more_options() const {
    if (!options.empty()) throw Usage("unknown option --" + options.begin()->first);
  }
};

int storage_status(forgeyard::Store& store) {
  forgeyard::StorageStatus s = store.status();
  std::cout << "backend=" << s.backend << "\nlocation=" << s.location << "\nschema_version=" << s.schema_version
            << "\nmigrations_applied=" << s.migrations_applied << "\nmigrations_pending=" << s.migrations_pending
            << "\nhealthy=" << (s.healthy ? "true" : "false") << "\ndetail=" << s.detail << "\n";
  return s.healthy ? 0 : 1;
}

int lease_command(forgeyard::Store& store, const std::string& verb, Args& a) {
  forgeyard::Leases& leases = store.leases();
  if (verb == "acquire") {
    const auto ttl = parse_duration(a.take_option("ttl", "30s"));
    a.no_more_options();
    a.expect(3, "lease acquire TENANT RESOURCE OWNER [--ttl D]");
    auto g = leases.acquire(a.positional[0], a.positional[1], a.positional[2], ttl);
    std::cout << "acquired=" << (g.acquired ? "true" : "false") << "\nepoch=" << g.epoch << "\nholder=" << g.holder
              << "\nexpires_at=" << iso(g.expires_at) << "\n";
    return g.acquired ? 0 : 1;
  }
  if (verb == "renew") {
    const auto ttl = parse_duration(a.take_option("ttl", "30s"));
    a.no_more_options();
    a.expect(3, "lease renew TENANT RESOURCE EPOCH [--ttl D]");
    auto expires = leases.renew(a.positional[0], a.positional[1], parse_int(a.positional[2], "epoch"), ttl);
    std::cout << "expires_at=" << iso(expires) << "\n";
    return 0;
  }
  if (verb == "release") {
    a.no_more_options();
    a.expect(3, "lease release TENANT RESOURCE EPOCH");
    bool released = leases.release(a.positional[0], a.positional[1], parse_int(a.positional[2], "epoch"));
    std::cout << "released=" << (released ? "true" : "false") << "\n";
    return released ? 0 : 1;
  }
  if (verb == "status") {
    a.no_more_options();
    a.expect(2, "lease status TENANT RESOURCE");
    auto info = leases.get(a.positional[0], a.positional[1]);
    if (!info) {
      std::cout << "state=none\n";
      return 1;
    }
    std::cout << "state=" << forgeyard::to_string(info->state) << "\nowner=" << info->owner
              << "\nepoch=" << info->epoch << "\nacquired_at=" << iso(info->acquired_at)
              << "\nexpires_at=" << iso(info->expires_at) << "\n";
    return 0;
  }
  if (verb == "reap") {
    const int max = static_cast<int>(parse_int(a.take_option("max", "100"), "--max"));
    std::string tenant = a.take_option("tenant", "");
    a.no_more_options();
    a.expect(0, "lease reap [--max N] [--tenant T]");
    auto reaped = leases.reap(max, tenant.empty() ? std::nullopt : std::optional<std::string>(tenant));
    for (const auto& r : reaped)
      std::cout << "tenant=" << r.tenant << " resource=" << r.resource << " epoch=" << r.epoch
                << " holder=" << r.holder << " expired_at=" << iso(r.expired_at) << "\n";
    std::cout << "reaped=" << reaped.size() << "\n";
    return 0;
  }
  throw Usage("unknown lease command: " + verb);
}

// COL=VALUE pairs into fields (values as text; --null COL for NULL).
forgeyard::Fields parse_fields(const std::vector<std::string>& pairs, const std::vector<std::string>& nulls,
                               const char* option) {
  forgeyard::Fields fields;
  for (const std::string& p : pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) throw Usage(std::string("--") + option + " takes COL=VALUE, not " + p);
    fields[p.substr(0, eq)] = p.substr(eq + 1);
  }
  for (const std::string& c : nulls) fields[c] = nullptr;
  return fields;
}

void print_value(const forgeyard::Value& v) {
  std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) std::cout << "NULL";
        else if constexpr (std::is_same_v<T, bool>) std::cout << (x ? "true" : "false");
        else std::cout << x;
      },
      v);
}

int cas_command(forgeyard::Store& store, const std::string& verb, Args& a) {
  auto& rows = store.versioned_rows();
  const forgeyard::Fields key = parse_fields(a.take_all("key"), {}, "key");
  if (verb == "enable") {
    a.no_more_options();
    a.expect(1, "cas enable TABLE");
    rows.enable(a.positional[0]);
    std::cout << "versioned=" << a.positional[0] << "\n";
    return 0;
  }
  if (verb == "get") {
    a.no_more_options();
    a.expect(1, "cas get TABLE --key COL=VALUE...");
    auto row = rows.get(a.positional[0], key);
    if (!row) {
      std::cout << "found=false\n";
      return 1;
    }
    std::cout << "entity_version=" << row->version << "\n";
    for (const auto& [column, value] : row->values) {
      std::cout << column << "=";
      print_value(value);
      std::cout << "\n";
    }
    return 0;
  }
  if (verb == "update") {
    const forgeyard::Fields changes = parse_fields(a.take_all("set"), a.take_all("null"), "set");
    a.no_more_options();
    a.expect(2, "cas update TABLE EXPECTED --key COL=VALUE... --set COL=VALUE...");
    const std::int64_t version =
        rows.update(a.positional[0], key, parse_int(a.positional[1], "expected version"), changes);
    std::cout << "entity_version=" << version << "\n";
    return 0;
  }
  throw Usage("unknown cas command: " + verb);
}

int idem_command(forgeyard::Store& store, const std::string& verb, Args& a) {
  auto& idem = store.idempotency();
  if (verb == "status") {
    a.no_more_options();
    a.expect(3, "idem status TENANT SCOPE KEY");
    auto s = idem.status({a.positional[0], a.positional[1], a.positional[2]});
    if (!s) {
      std::cout << "status=none\n";
      return 1;
    }
    std::cout << "status=" << s->status << "\nattempt=" << s->attempt
              << "\nrecovery_point=" << s->recovery_point.value_or("") << "\nlocked_until=" << iso(s->locked_until)
              << "\nexpires_at=" << iso(s->expires_at) << "\n";
    return 0;
  }
  if (verb == "purge") {
    const int max = static_cast<int>(parse_int(a.take_option("max", "1000"), "--max"));
    std::string tenant = a.take_option("tenant", "");
    a.no_more_options();
    a.expect(0, "idem purge [--max N] [--tenant T]");
    const int purged = idem.purge(max, tenant.empty() ? std::nullopt : std::optional<std::string>(tenant));
    std::cout << "purged=" << purged << "\n";
    return 0;
  }
  throw Usage("unknown idem command: " + verb);
}

std::string read_stdin() {
  std::string all, line;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) all.append(buf, n);
  return all;
}

void print_delivery(const forgeyard::Delivery& d) {
  std::cout << "msg_id=" << d.msg_id << " claim_token=" << d.claim_token << " attempt=" << d.attempt
            << " priority=" << forgeyard::to_string(d.priority) << " partition_key=" << d.partition_key.value_or("")
            << " event_id=" << d.event_id.value_or("") << " payload=" << d.payload << "\n";
}

// Runs `command` with sh -c, the payload on its stdin and the delivery in its environment. The
// environment is built before fork (the child of a threaded process only calls exec).
int run_command(const std::string& command, const forgeyard::Delivery& d, const std::string& tenant,
                const std::string& queue) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "FORGEYARD_", 10) != 0) env.emplace_back(*e);
  env.push_back("FORGEYARD_TENANT=" + tenant);
  env.push_back("FORGEYARD_QUEUE=" + queue);
  env.push_back("FORGEYARD_MSG_ID=" + std::to_string(d.msg_id));
  env.push_back("FORGEYARD_ATTEMPT=" + std::to_string(d.attempt));
  env.push_back("FORGEYARD_PRIORITY=" + std::string(forgeyard::to_string(d.priority)));
  env.push_back("FORGEYARD_PARTITION_KEY=" + d.partition_key.value_or(""));
  env.push_back("FORGEYARD_EVENT_ID=" + d.event_id.value_or(""));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  int in[2];
  if (pipe(in) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  close(in[0]);
  std::size_t written = 0;
  while (written < d.payload.size()) {
    const ssize_t n = write(in[1], d.payload.data() + written, d.payload.size() - written);
    if (n <= 0) break;  // the command does not read its input (EPIPE; SIGPIPE is ignored): fine
    written += static_cast<std::size_t>(n);
  }
  close(in[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::atomic<bool> stop_signal{false};
extern "C" void on_stop_signal(int) { stop_signal = true; }

int queue_command(forgeyard::Store& store, const std::string& verb, Args& a) {
  auto& queues = store.queues();
  if (verb == "create") {
    forgeyard::QueueOptions o;
    o.max_messages = parse_int(a.take_option("max-messages", std::to_string(o.max_messages)), "--max-messages");
    o.max_bytes = parse_int(a.take_option("max-bytes", std::to_string(o.max_bytes)), "--max-bytes");
    o.max_payload_bytes =
        parse_int(a.take_option("max-payload-bytes", std::to_string(o.max_payload_bytes)), "--max-payload-bytes");
    o.visibility_timeout = parse_duration(a.take_option("visibility", "30s"));
    o.max_attempts = parse_int(a.take_option("max-attempts", std::to_string(o.max_attempts)), "--max-attempts");
    o.backoff_base = parse_duration(a.take_option("backoff-base", "1s"));
    o.backoff_max = parse_duration(a.take_option("backoff-max", "5m"));
    const std::string ordering = a.take_option("ordering", "none");
    if (ordering != "none" && ordering != "partition") throw Usage("--ordering must be none or partition");
    o.partition_ordered = ordering == "partition";
    const std::string dead = a.take_option("dead-letter-payload", "drop");
    if (dead != "drop" && dead != "keep") throw Usage("--dead-letter-payload must be drop or keep");
    o.keep_dead_letter_payload = dead == "keep";
    a.no_more_options();
    a.expect(2, "queue create TENANT QUEUE [options]");
    queues.create(a.positional[0], a.positional[1], o);
    std::cout << "created=" << a.positional[1] << "\n";
    return 0;
  }
  if (verb == "send") {
    forgeyard::OutgoingMessage m;
    const std::string event_id = a.take_option("event-id", ""), key = a.take_option("partition-key", "");
    if (!event_id.empty()) m.event_id = event_id;
    if (!key.empty()) m.partition_key = key;
    m.priority = forgeyard::priority_from_string(a.take_option("priority", "interactive"));
    m.delay = parse_duration(a.take_option("delay", "0s"));
    a.no_more_options();
    a.expect(3, "queue send TENANT QUEUE PAYLOAD|-");
    m.payload = a.positional[2] == "-" ? read_stdin() : a.positional[2];
    const std::int64_t id = queues.enqueue(a.positional[0], a.positional[1], m);
    std::cout << "msg_id=" << id << "\n";
    return 0;
  }
  if (verb == "claim") {
    const int max = static_cast<int>(parse_int(a.take_option("max", "1"), "--max"));
    const std::string v = a.take_option("visibility", "");
    const std::string consumer = a.take_option("consumer", "cli");
    a.no_more_options();
    a.expect(2, "queue claim TENANT QUEUE [--max N] [--visibility D] [--consumer C]");
    auto got = queues.claim(a.positional[0], a.positional[1], consumer, max,
                            v.empty() ? std::nullopt : std::optional<forgeyard::Duration>(parse_duration(v)));
    for (const auto& d : got) print_delivery(d);
    return got.empty() ? 1 : 0;
  }
  if (verb == "ack") {
    a.no_more_options();
    a.expect(4, "queue ack TENANT QUEUE MSG_ID CLAIM_TOKEN");
    queues.ack(a.positional[0], a.positional[1], parse_int(a.positional[2], "msg_id"),
               parse_int(a.positional[3], "claim_token"));
    std::cout << "acked=" << a.positional[2] << "\n";
    return 0;
  }
  if (verb == "nack") {
    const std::string error = a.take_option("error", "");
    const bool permanent = a.take_option("permanent", "false") == "true";
    a.no_more_options();
    a.expect(4, "queue nack TENANT QUEUE MSG_ID CLAIM_TOKEN [--error TEXT] [--permanent true]");
    const auto outcome = queues.nack(a.positional[0], a.positional[1], parse_int(a.positional[2], "msg_id"),
                                     parse_int(a.positional[3], "claim_token"), error, permanent);
    std::cout << "outcome=" << (outcome == forgeyard::NackOutcome::Dead ? "dead" : "retry") << "\n";
    return 0;
  }
  if (verb == "stats") {
    a.no_more_options();
    a.expect(2, "queue stats TENANT QUEUE");
    auto s = queues.stats(a.positional[0], a.positional[1]);
    std::cout << "ready=" << s.ready << "\nin_flight=" << s.in_flight << "\ndelayed=" << s.delayed
              << "\ndead=" << s.dead << "\nbytes=" << s.bytes << "\noldest_ready_age_us="
              << (s.oldest_ready_age ? std::to_string(s.oldest_ready_age->count()) : std::string()) << "\npressure="
              << s.pressure << "\n";
    return 0;
  }
  if (verb == "dead") {
    const std::int64_t after = parse_int(a.take_option("after", "0"), "--after");
    const int max = static_cast<int>(parse_int(a.take_option("max", "100"), "--max"));
    a.no_more_options();
    a.expect(2, "queue dead TENANT QUEUE [--after MSG_ID] [--max N]");
    auto dead = queues.dead_letters(a.positional[0], a.positional[1], after, max);
    for (const auto& d : dead)
      std::cout << "msg_id=" << d.msg_id << " attempt=" << d.attempt << " error_class=" << d.error_class
                << " dead_at=" << iso(d.dead_at) << " error=" << d.error << "\n";
    std::cout << "dead=" << dead.size() << "\n";
    return 0;
  }
  if (verb == "redrive") {
    a.no_more_options();
    if (a.positional.size() < 2) throw Usage("expected: queue redrive TENANT QUEUE [MSG_ID...]");
    std::vector<std::int64_t> ids;
    for (std::size_t i = 2; i < a.positional.size(); ++i) ids.push_back(parse_int(a.positional[i], "msg_id"));
    std::cout << "redriven=" << queues.redrive(a.positional[0], a.positional[1], ids) << "\n";
    return 0;
  }
  if (verb == "work") {
    forgeyard::WorkerOptions o;
    o.batch = static_cast<int>(parse_int(a.take_option("batch", "10"), "--batch"));
    o.visibility = parse_duration(a.take_option("visibility", "30s"));
    o.consumer = a.take_option("consumer", "cli-worker");
    o.stop_when_idle = a.take_option("until-empty", "false") == "true";
    a.no_more_options();
    a.expect(3, "queue work TENANT QUEUE COMMAND");
    o.tenant = a.positional[0];
    o.queue = a.positional[1];
    const std::string command = a.positional[2];
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGPIPE, SIG_IGN);  // a command that does not read its payload must not kill the runner
    std::stop_source stop;
    std::jthread watcher([&](std::stop_token done) {
      while (!done.stop_requested() && !stop_signal) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stop.request_stop();
    });
    auto stats = forgeyard::run_worker(
        queues, o,
        [&](const forgeyard::Delivery& d) {
          const int code = run_command(command, d, o.tenant, o.queue);
          if (code == 0) return forgeyard::HandlerResult::ack();
          if (code == 100) return forgeyard::HandlerResult::fail("command exited with 100");
          return forgeyard::HandlerResult::retry("command exited with " + std::to_string(code));
        },
        stop.get_token());
    watcher.request_stop();
    std::cout << "acked=" << stats.acked << "\nretried=" << stats.retried << "\ndead=" << stats.dead
              << "\nextended=" << stats.extended << "\n";
    return 0;
  }
  throw Usage("unknown queue command: " + verb);
}

int exit_code_for(const forgeyard::Error& e) {
  using forgeyard::ErrorKind;
  switch (e.kind()) {
    case ErrorKind::StaleFence:
    case ErrorKind::Conflict: return 3;
    case ErrorKind::Unavailable:
    case ErrorKind::Timeout:
    case ErrorKind::SerializationFailure:
    case ErrorKind::CommitUnknown: return 5;
    default: return e.retryable() ? 5 : 4;  // QueueFull, InProgress: later
  }
}

// SEQ:HEX, as `audit head` prints it.
std::optional<forgeyard::AuditHead> parse_anchor(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw Usage("--anchor takes SEQ:HASH");
  std::optional<forgeyard::Bytes> hash = forgeyard::from_hex(text.substr(colon + 1));
  if (!hash) throw Usage("--anchor: the hash must be hex");
  return forgeyard::AuditHead{parse_int(text.substr(0, colon), "--anchor seq"), *hash};
}

int print_verification(const forgeyard::AuditVerification& v) {
  std::cout << "ok=" << (v.ok ? "true" : "false") << "\nchecked=" << v.checked << "\n";
  if (v.first_bad_seq) std::cout << "first_bad_seq=" << *v.first_bad_seq << "\n";
  if (v.reason) std::cout << "reason=" << *v.reason << "\n";
  return v.ok ? 0 : 1;
}

// audit verify --file: needs no store at all.
int audit_verify_file(Args& a) {
  const std::string path = a.take_option("file", "");
  const auto anchor = parse_anchor(a.take_option("anchor", ""));
  a.expect(0, "audit verify --file PATH|- [--anchor SEQ:HASH]");
  a.no_more_options();
  if (path == "-") return print_verification(forgeyard::verify_audit_export(std::cin, anchor));
  std::ifstream in(path);
  if (!in) throw Usage("cannot read " + path);
  return print_verification(forgeyard::verify_audit_export(in, anchor));
}

int audit_command(forgeyard::Store& store, const std::string& verb, Args& a) {
  auto& audit = store.audit();
  if (verb == "append") {
    forgeyard::AuditEvent e;
    const std::string details = a.take_option("details", ""), digest = a.take_option("payload-digest", "");
    const std::string ref = a.take_option("payload-ref", ""), occurred = a.take_option("occurred-at", "");
    const std::string event_id = a.take_option("event-id", "");
    a.expect(4, "audit append TENANT ACTOR ACTION RESOURCE [--details JSON] ...");
    a.no_more_options();
    e.actor = a.positional[1];
    e.action = a.positional[2];
    e.resource = a.positional[3];
    if (!details.empty()) e.details = details;
    if (!digest.empty()) {
      e.payload_digest = forgeyard::from_hex(digest);
      if (!e.payload_digest) throw Usage("--payload-digest must be hex");
    }
    if (!ref.empty()) e.payload_ref = ref;
    if (!occurred.empty()) {
      e.occurred_at = forgeyard::parse_time(occurred);
      if (!e.occurred_at) throw Usage("--occurred-at must be an RFC 3339 timestamp");
    }
    if (!event_id.empty()) e.event_id = event_id;
    const forgeyard::AuditHead h = audit.append(a.positional[0], e);
    std::cout << "seq=" << h.seq << "\nhash=" << forgeyard::to_hex(h.hash) << "\n";
    return 0;
  }
  if (verb == "head") {
    a.expect(1, "audit head TENANT");
    a.no_more_options();
    const forgeyard::AuditHead h = audit.head(a.positional[0]);
    std::cout << "seq=" << h.seq << "\nhash=" << forgeyard::to_hex(h.hash) << "\nanchor=" << h.seq << ":"
              << forgeyard::to_hex(h.hash) << "\n";
    return 0;
  }
  if (verb == "tail") {
    const std::int64_t n = parse_int(a.take_option("n", "10"), "--n");
    a.expect(1, "audit tail TENANT [--n N]");
    a.no_more_options();
    if (n < 1 || n > 10000) throw Usage("--n must be between 1 and 10000");
    const std::int64_t last = audit.head(a.positional[0]).seq;
    if (last == 0) return 0;
    for (std::int64_t from = std::max<std::int64_t>(1, last - n + 1); from <= last;) {
      const auto page = audit.read(a.positional[0], from, static_cast<int>(last - from + 1));
      if (page.empty()) break;
      for (const auto& r : page) std::cout << forgeyard::audit_export_line(r) << "\n";
      from = page.back().seq + 1;
    }
    return 0;
  }
  if (verb == "export") {
    std::int64_t from = parse_int(a.take_option("from", "1"), "--from");
    a.expect(1, "audit export TENANT [--from SEQ]");
    a.no_more_options();
    for (;;) {  // a page may come back short when its events are large: stop at an empty one
      const auto page = audit.read(a.positional[0], from, 10000);
      if (page.empty()) break;
      for (const auto& r : page) std::cout << forgeyard::audit_export_line(r) << "\n";
      from = page.back().seq + 1;
    }
    std::cout.flush();
    return std::cout ? 0 : 4;
  }
  if (verb == "verify") {
    const std::int64_t from = parse_int(a.take_option("from", "1"), "--from");
    const std::string to = a.take_option("to", "");
    const auto anchor = parse_anchor(a.take_option("anchor", ""));
    a.expect(1, "audit verify TENANT [--from SEQ] [--to SEQ] [--anchor SEQ:HASH]");
    a.no_more_options();
    return print_verification(audit.verify(a.positional[0], from,
                                           to.empty() ? std::nullopt : std::optional(parse_int(to, "--to")), anchor));
  }
  throw Usage("unknown audit command: " + verb);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  forgeyard::StoreOptions options;
  std::string url = std::getenv("FORGEYARD_STORE") != nullptr ? std::getenv("FORGEYARD_STORE") : "";
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "-h" || arg == "--help") {
        std::cout << usage_text;
        return 0;
      }
      if (arg == "--unnamed-statements") {
        options.prepared_statements = false;
        continue;
      }
      if (arg == "--version") {
        std::cout << "forgeyard 0.1.0\n";
        return 0;
      }
      if (arg.starts_with("--")) {
        if (i + 1 >= argc) throw Usage("option " + arg + " needs a value");
        if (arg == "--store")
          url = argv[++i];
        else
          args.options.emplace(arg.substr(2), argv[++i]);
        continue;
      }
      args.positional.push_back(arg);
    }
    if (args.positional.empty()) throw Usage("missing command");
    if (args.positional[0] == "maintain") args.positional.insert(args.positional.begin() + 1, "run");
    if (args.positional.size() < 2) throw Usage("missing command");
    const std::string group = args.positional[0], verb = args.positional[1];
    args.positional.erase(args.positional.begin(), args.positional.begin() + 2);
    if (group != "storage" && group != "lease" && group != "cas" && group != "idem" && group != "queue" &&
        group != "maintain" && group != "audit")
      throw Usage("unknown command: " + group);
    if (group == "storage" && verb != "status") throw Usage("unknown storage command: " + verb);
    if (group == "audit" && verb == "verify" && args.options.count("file") > 0) return audit_verify_file(args);
    auto store = forgeyard::open(url, options);
    if (group == "storage") {
      args.no_more_options();
      return storage_status(*store);
    }
    if (group == "cas") return cas_command(*store, verb, args);
    if (group == "idem") return idem_command(*store, verb, args);
    if (group == "queue") return queue_command(*store, verb, args);
    if (group == "audit") return audit_command(*store, verb, args);
    if (group == "maintain") {
      const int max = static_cast<int>(parse_int(args.take_option("max", "1000"), "--max"));
      const std::string tenant = args.take_option("tenant", "");
      args.no_more_options();
      for (const auto& [task, rows] :
           store->maintain(max, tenant.empty() ? std::nullopt : std::optional<std::string>(tenant)))
        std::cout << task << "=" << rows << "\n";
      return 0;
    }
    return lease_command(*store, verb, args);
  } catch (const Usage& e) {
    std::cerr << "forgeyard: " << e.what() << "\n\n" << usage_text;
    return 2;
  } catch (const forgeyard::Error& e) {
    std::cerr << "forgeyard: " << e.what() << " [" << forgeyard::to_string(e.kind()) << ", SQLSTATE "
              << e.sqlstate() << "]";
    if (!e.detail().empty()) std::cerr << "\n  detail: " << e.detail();
    std::cerr << "\n";
    return exit_code_for(e);
  }
}
