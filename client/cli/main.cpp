// forgeyard: the command line of the coordination store.
// Exit codes (stable, for scripts):
//   0 done   1 answered "no" (not acquired, not released, no such lease)   2 usage error
//   3 stale fence or version conflict   4 refused (invalid input, denied, not found, ...)
//   5 unavailable or timed out: try again later
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "forgeyard/forgeyard.hpp"

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

Durations: 500ms, 30s, 5m, 2h, 1d.  Values are text; the backend converts them to the
column's type.  Output: key=value lines on stdout; errors on stderr.
Exit codes: 0 done, 1 answered no, 2 usage, 3 stale fence or version conflict, 4 refused,
5 unavailable (retry).
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

int exit_code_for(const forgeyard::Error& e) {
  using forgeyard::ErrorKind;
  switch (e.kind()) {
    case ErrorKind::StaleFence:
    case ErrorKind::Conflict: return 3;
    case ErrorKind::Unavailable:
    case ErrorKind::Timeout:
    case ErrorKind::SerializationFailure:
    case ErrorKind::CommitUnknown: return 5;
    default: return 4;
  }
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
    if (args.positional.size() < 2) throw Usage("missing command");
    const std::string group = args.positional[0], verb = args.positional[1];
    args.positional.erase(args.positional.begin(), args.positional.begin() + 2);
    if (group != "storage" && group != "lease" && group != "cas" && group != "idem")
      throw Usage("unknown command: " + group);
    if (group == "storage" && verb != "status") throw Usage("unknown storage command: " + verb);
    auto store = forgeyard::open(url, options);
    if (group == "storage") {
      args.no_more_options();
      return storage_status(*store);
    }
    if (group == "cas") return cas_command(*store, verb, args);
    if (group == "idem") return idem_command(*store, verb, args);
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
