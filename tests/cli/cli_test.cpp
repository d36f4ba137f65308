// The CLI against its documents: the commands `forgeyard --help` lists are README.md's usage
// block (both ways, then word for word), the exit code of every error kind is what README.md
// and docs/errors.md say, and VERSION is the client's and the extension's version. Plus the
// command line itself on an embedded store: per-command help, boolean flags in both
// spellings, global options after the command, usage errors.
#define BOOST_TEST_MODULE forgeyard cli
#include <boost/test/unit_test.hpp>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli/exit_codes.hpp"
#include "core/core.hpp"
#include "forgeyard/error.hpp"
#include "forgeyard/version.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string source(const std::string& relative) {
  return slurp(std::string(FORGEYARD_SOURCE_DIR) + "/" + relative);
}

struct Run {
  int code = -1;
  std::string out, err;
};

// Runs the CLI with `args` (and no $FORGEYARD_STORE), capturing its output.
Run cli(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
  const std::string out = (dir / ("forgeyard-cli-out-" + tag)).string();
  const std::string err = (dir / ("forgeyard-cli-err-" + tag)).string();
  const std::string in = (dir / ("forgeyard-cli-in-" + tag)).string();
  { std::ofstream(in) << stdin_text; }
  std::vector<std::string> all{"forgeyard"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    unsetenv("FORGEYARD_STORE");
    dup2(::open(in.c_str(), O_RDONLY), 0);
    dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
    execv(FORGEYARD_CLI, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Run r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  for (const auto& p : {out, err, in}) std::filesystem::remove(p);
  return r;
}

// The fenced block after "## CLI" in README.md.
std::string readme_usage_block() {
  const std::string readme = source("README.md");
  const auto section = readme.find("\n## CLI\n");
  BOOST_REQUIRE(section != std::string::npos);
  const auto open = readme.find("```\n", section);
  BOOST_REQUIRE(open != std::string::npos);
  const auto close = readme.find("\n```", open + 4);
  BOOST_REQUIRE(close != std::string::npos);
  return readme.substr(open + 4, close - open - 4 + 1);
}

// "queue create", "maintain", ...: the command of each line of the "Commands:" part of a usage
// text (a line indented by two, not a continuation line).
std::set<std::string> commands_in(const std::string& usage) {
  std::set<std::string> commands;
  std::istringstream in(usage.substr(usage.find("\nCommands:\n") + 1));
  std::string line;
  std::getline(in, line);                                                     // "Commands:"
  const std::regex command_line(R"(^  ([a-z][a-z-]*)( [a-z][a-z-]*)?\b.*)");  // e.g. "event-type register"
  while (std::getline(in, line) && !line.empty()) {
    std::smatch m;
    if (std::regex_match(line, m, command_line)) commands.insert(m[1].str() + m[2].str());
  }
  return commands;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The markdown table whose header is "| exit | meaning |" after `after` in `text`: for each
// error kind named in backquotes, the exit code of its row. Every row's code goes into `codes`.
std::map<std::string, std::vector<int>> kinds_in_table(const std::string& text, const std::string& after,
                                                       std::set<int>& codes) {
  std::map<std::string, std::vector<int>> kinds;
  const auto at = text.find("| exit | meaning |", text.find(after));
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no exit code table after " + after);
  std::istringstream in(text.substr(at));
  std::string line;
  std::getline(in, line);
  std::getline(in, line);  // |---|---|
  const std::regex row(R"(^\| ([0-9]+) \|(.*)\|$)"), quoted("`([A-Za-z]+)`");
  while (std::getline(in, line) && line.starts_with("|")) {
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(std::regex_match(line, m, row), "not a table row: " + line);
    const int code = std::stoi(m[1].str());
    codes.insert(code);
    const std::string meaning = m[2].str();
    for (std::sregex_iterator q(meaning.begin(), meaning.end(), quoted), end; q != end; ++q)
      kinds[(*q)[1].str()].push_back(code);
  }
  return kinds;
}

void check_exit_table(const std::string& document, const std::string& text, const std::string& after) {
  std::set<int> codes;
  const auto kinds = kinds_in_table(text, after, codes);
  std::set<int> cli_codes;
  for (const auto& e : forgeyard::cli::exit_codes()) cli_codes.insert(e.code);
  BOOST_TEST((codes == cli_codes), document << " lists the exit codes the CLI has");
  // ErrorKind runs from StaleFence (0) to Internal, its last value (forgeyard/error.hpp).
  for (int i = 0; i <= static_cast<int>(forgeyard::ErrorKind::Internal); ++i) {
    const auto kind = static_cast<forgeyard::ErrorKind>(i);
    const std::string name(forgeyard::to_string(kind));
    const auto it = kinds.find(name);
    BOOST_TEST_CONTEXT(document << ", error kind " << name) {
      BOOST_REQUIRE_MESSAGE(it != kinds.end(), document << " does not name `" << name << "` in its exit code table");
      BOOST_TEST(it->second.size() == 1u, "named in one row only");
      BOOST_TEST(it->second.front() == forgeyard::cli::exit_code_for(kind));
    }
  }
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// An embedded store of its own for each test case.
struct Sqlite {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("forgeyard-cli-" + std::to_string(getpid()) +
                                                                        "-" + std::to_string(std::random_device{}()));
  std::string url = "sqlite://" + (dir / "store.db").string();
  Sqlite() { std::filesystem::create_directories(dir); }
  ~Sqlite() { std::filesystem::remove_all(dir); }
  Run operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--store", url});
    return cli(args);
  }
};

// "msg_id=7 claim_token=3 ..." -> {"7", "3"}.
std::pair<std::string, std::string> claimed(const std::string& line) {
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(line, m, std::regex("msg_id=([0-9]+) claim_token=([0-9]+)")));
  return {m[1].str(), m[2].str()};
}

std::int64_t parse_usecs(const std::string& text) {  // 30s, 5m, ... as the help prints them
  static const std::map<std::string, std::int64_t> units = {{"us", 1},       {"ms", 1000},      {"s", 1000000},
                                                            {"m", 60000000}, {"h", 3600000000}, {"d", 86400000000}};
  std::size_t end = 0;
  const std::int64_t n = std::stoll(text, &end);
  return n * units.at(text.substr(end));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(documents)

BOOST_AUTO_TEST_CASE(readme_lists_every_command_of_the_help_and_no_other) {
  const Run help = cli({"--help"});
  BOOST_REQUIRE_EQUAL(help.code, 0);
  const std::set<std::string> in_help = commands_in(help.out), in_readme = commands_in(readme_usage_block());
  BOOST_TEST(in_help.size() >= 20u);  // the parser above found them
  std::set<std::string> undocumented, unknown;
  for (const auto& c : in_help)
    if (!in_readme.contains(c)) undocumented.insert(c);
  for (const auto& c : in_readme)
    if (!in_help.contains(c)) unknown.insert(c);
  BOOST_TEST(undocumented.empty(), "commands missing from README.md's usage block: " << join(undocumented));
  BOOST_TEST(unknown.empty(), "README.md's usage block lists commands the CLI does not have: " << join(unknown));
  // Each one is a real command with help of its own.
  for (const auto& c : in_help) {
    std::vector<std::string> args;
    std::istringstream words(c);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--help");
    const Run r = cli(args);
    BOOST_TEST(r.code == 0, c << " --help");
    BOOST_TEST(r.out.find("Usage: forgeyard " + c) != std::string::npos, c << " --help: " << r.out);
  }
}

BOOST_AUTO_TEST_CASE(readme_usage_block_is_the_help_output) {
  // Word for word, so an option or a description can not drift either: paste `forgeyard --help`.
  BOOST_TEST(readme_usage_block() == cli({"--help"}).out);
}

BOOST_AUTO_TEST_CASE(exit_codes_in_readme_and_errors_md_are_the_clis) {
  check_exit_table("README.md", source("README.md"), "\n## CLI\n");
  check_exit_table("docs/errors.md", source("docs/errors.md"), "\n## CLI exit codes\n");
  // The usage text prints the same table.
  const std::string help = cli({"--help"}).out;
  for (const auto& e : forgeyard::cli::exit_codes())
    BOOST_TEST(help.find("\n  " + std::to_string(e.code) + "  " + std::string(e.meaning) + "\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_full_queue_and_a_key_in_progress_exit_5_like_the_other_retry_later_kinds) {
  using forgeyard::ErrorKind;
  for (ErrorKind k : {ErrorKind::QueueFull, ErrorKind::InProgress, ErrorKind::Unavailable, ErrorKind::Timeout,
                      ErrorKind::SerializationFailure, ErrorKind::CommitUnknown})
    BOOST_TEST(forgeyard::cli::exit_code_for(k) == 5, forgeyard::to_string(k));
  BOOST_TEST(forgeyard::cli::exit_code_for(ErrorKind::StaleFence) == 3);
  BOOST_TEST(forgeyard::cli::exit_code_for(ErrorKind::PayloadTooLarge) == 4);
}

BOOST_AUTO_TEST_CASE(version_file_is_the_client_and_the_extension_version) {
  const std::string version = trim(source("VERSION"));
  BOOST_TEST(std::regex_match(version, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+)")));
  std::smatch m;
  const std::string control = source("extension/forgeyard.control");
  BOOST_REQUIRE(std::regex_search(control, m, std::regex(R"(default_version\s*=\s*'([^']*)')")));
  BOOST_TEST(m[1].str() == version, "extension/forgeyard.control's default_version");
  BOOST_TEST(forgeyard::version() == version);
  const Run r = cli({"--version"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out == "client_version=" + version + "\n");  // no store given: none opened
}

// README.md names the current version where it says what the extension provides and which script
// CREATE EXTENSION runs, and lists exactly the install and upgrade scripts that sql/ and sql/src/
// hold (the current full script is generated: README.md names it, sql/ does not hold it).
BOOST_AUTO_TEST_CASE(readme_names_the_current_version_and_every_script) {
  const std::string version = trim(source("VERSION"));
  const std::string readme = source("README.md");
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(readme, m, std::regex(R"(Version ([0-9.]+) of the extension)")));
  BOOST_TEST(m[1].str() == version, "README.md's opening paragraph");
  BOOST_REQUIRE(std::regex_search(readme, m, std::regex(R"(full install script, `forgeyard--([0-9.]+)\.sql`)")));
  BOOST_TEST(m[1].str() == version, "README.md's sql/ row");
  std::set<std::string> named, present;
  const std::regex script(R"(forgeyard--[0-9.]+[0-9](--[0-9.]+[0-9])?\.sql)");
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), script); it != std::sregex_iterator(); ++it)
    named.insert(it->str());
  for (const char* dir : {"/sql", "/sql/src"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(FORGEYARD_SOURCE_DIR) + dir))
      if (std::regex_match(e.path().filename().string(), script)) present.insert(e.path().filename().string());
  present.insert("forgeyard--" + version + ".sql");
  std::set<std::string> missing, unknown;
  std::set_difference(present.begin(), present.end(), named.begin(), named.end(),
                      std::inserter(missing, missing.end()));
  std::set_difference(named.begin(), named.end(), present.begin(), present.end(),
                      std::inserter(unknown, unknown.end()));
  BOOST_TEST(missing.empty(), "scripts in sql/ that README.md does not name: " << join(missing));
  BOOST_TEST(unknown.empty(), "scripts README.md names that sql/ does not hold: " << join(unknown));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(command_line)

BOOST_AUTO_TEST_CASE(help_is_per_command_and_exits_0) {
  const Run top = cli({"--help"});
  BOOST_TEST(top.code == 0);
  BOOST_TEST(top.out.starts_with("usage: forgeyard "));
  BOOST_TEST(cli({"-h"}).out == top.out);
  const Run queue = cli({"queue", "--help"});
  BOOST_TEST(queue.code == 0);
  for (const char* verb : {"create", "send", "claim", "ack", "nack", "stats", "dead", "redrive", "work"})
    BOOST_TEST(queue.out.find(std::string("\n  ") + verb + " ") != std::string::npos, verb);
  const Run send = cli({"queue", "send", "--help"});
  BOOST_TEST(send.code == 0);
  BOOST_TEST(send.out.find("Usage: forgeyard queue send [OPTIONS] TENANT QUEUE PAYLOAD") != std::string::npos);
  BOOST_TEST(send.out.find("--priority P=interactive") != std::string::npos);
  BOOST_TEST(send.err.empty());
}

BOOST_AUTO_TEST_CASE(queue_create_help_shows_the_cores_defaults) {
  const Run r = cli({"queue", "create", "--help"});
  BOOST_REQUIRE_EQUAL(r.code, 0);
  const fy::core::QueueOptions core{};
  auto shown = [&](const std::string& option) {
    std::smatch m;
    BOOST_REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex("--" + option + " [^=]+=([^ \n]+)")), option);
    return m[1].str();
  };
  BOOST_TEST(shown("max-messages") == std::to_string(core.max_messages));
  BOOST_TEST(shown("max-bytes") == std::to_string(core.max_bytes));
  BOOST_TEST(shown("max-payload-bytes") == std::to_string(core.max_payload_bytes));
  BOOST_TEST(shown("max-attempts") == std::to_string(core.max_attempts));
  BOOST_TEST(parse_usecs(shown("visibility")) == core.visibility_usecs);
  BOOST_TEST(parse_usecs(shown("backoff-base")) == core.backoff_base_usecs);
  BOOST_TEST(parse_usecs(shown("backoff-max")) == core.backoff_max_usecs);
  BOOST_TEST(shown("ordering") == (core.partitioned ? "partition" : "none"));
  BOOST_TEST(shown("dead-letter-payload") == (core.keep_dead_payload ? "keep" : "drop"));
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_with_a_message_on_stderr) {
  const Sqlite store;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},                                                     // no command
           {"bogus"},                                              // unknown command
           {"queue"},                                              // a group without its verb
           {"queue", "send", "acme", "q"},                         // an argument missing
           {"queue", "stats", "acme", "q", "extra"},               // one too many
           {"queue", "claim", "acme", "q", "--bogus", "1"},        // unknown option
           {"queue", "claim", "acme", "q", "--max"},               // an option without its value
           {"queue", "claim", "acme", "q", "--max", "x"},          // not a number
           {"lease", "acquire", "acme", "r", "o", "--ttl", "5x"},  // not a duration
           {"queue", "create", "acme", "q", "--ordering", "random"},
           {"cas", "get", "t", "--key", "novalue"},
           {"audit", "tail", "acme", "--n", "0"},
           {"audit", "verify", "--file", (store.dir / "missing.jsonl").string()},
           {"audit", "verify", "acme", "--file", "-"},
           // a duration whose microseconds overflow 64 bits
           {"lease", "acquire", "acme", "r", "o", "--ttl", "9223372036854775807d"},
       }) {
    std::vector<std::string> with_store{"--store", store.url};
    with_store.insert(with_store.end(), args.begin(), args.end());
    const Run r = cli(with_store);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    BOOST_TEST_CONTEXT(shown) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(r.err.starts_with("forgeyard: "), r.err);
      BOOST_TEST(r.out.empty());
    }
  }
}

// A call that fails prints nothing to stdout (not the first half of its line), only its error on
// stderr: a script that reads stdout never takes an empty value for an id. One failing call of
// each command whose line names what the call returns.
BOOST_AUTO_TEST_CASE(a_failed_call_prints_nothing_to_stdout) {
  const Sqlite store;
  BOOST_REQUIRE_EQUAL(store({"queue", "create", "acme", "jobs"}).code, 0);
  const std::vector<std::vector<std::string>> failing{
      {"queue", "send", "acme", "nosuch", "x"},
      {"cas", "update", "nosuch", "1", "--key", "id=1", "--set", "v=2"},
      {"queue", "redrive", "acme", "nosuch"},
      {"topic", "rewind", "acme", "nosuch", "sub", "1h"},
      {"workflow", "start", "acme", "w", "1", "k", "--input", "not json"},
  };
  for (const auto& args : failing) {
    const Run r = store(args);
    const std::string command = args[0] + " " + args[1];
    BOOST_TEST(r.code > 0, command << " exits " << r.code);
    BOOST_TEST(r.out.empty(), command << " printed to stdout: " << r.out);
    BOOST_TEST(!r.err.empty(), command << " printed no error");
  }
  // And the same commands that succeed print their line.
  BOOST_TEST(store({"queue", "send", "acme", "jobs", "x"}).out == "msg_id=1\n");
  BOOST_TEST(store({"queue", "redrive", "acme", "jobs"}).out == "redriven=0\n");
}

BOOST_AUTO_TEST_CASE(boolean_flags_work_bare_and_with_the_old_value) {
  const Sqlite run;
  BOOST_REQUIRE_EQUAL(run({"queue", "create", "acme", "jobs", "--max-attempts", "5"}).code, 0);
  auto nack = [&](std::vector<std::string> flag) {
    BOOST_REQUIRE_EQUAL(run({"queue", "send", "acme", "jobs", "x"}).code, 0);
    const Run c = run({"queue", "claim", "acme", "jobs"});
    BOOST_REQUIRE_EQUAL(c.code, 0);
    const auto [msg, token] = claimed(c.out);
    std::vector<std::string> args{"queue", "nack", "acme", "jobs", msg, token};
    args.insert(args.end(), flag.begin(), flag.end());
    const Run r = run(args);
    BOOST_TEST(r.code == 0, r.err);
    return r.out;
  };
  BOOST_TEST(nack({"--permanent"}) == "outcome=dead\n");
  BOOST_TEST(nack({"--permanent", "true"}) == "outcome=dead\n");
  BOOST_TEST(nack({"--permanent=true"}) == "outcome=dead\n");
  BOOST_TEST(nack({"--permanent", "false"}) == "outcome=retry\n");
  BOOST_TEST(nack({}) == "outcome=retry\n");
  BOOST_TEST(nack({"--error", "boom"}) == "outcome=retry\n");

  // --until-empty bare, before the positionals (it must not take TENANT as its value) and after.
  BOOST_REQUIRE_EQUAL(run({"queue", "create", "acme", "work"}).code, 0);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"queue", "work", "--until-empty", "acme", "work", "exit 0"},
           {"queue", "work", "acme", "work", "exit 0", "--until-empty"},
           {"queue", "work", "acme", "work", "exit 0", "--until-empty", "true"},
       }) {
    BOOST_REQUIRE_EQUAL(run({"queue", "send", "acme", "work", "job"}).code, 0);
    const Run r = run(args);
    BOOST_TEST(r.code == 0, r.err);
    BOOST_TEST(r.out == "acked=1\nretried=0\ndead=0\nextended=0\n");
  }
}

BOOST_AUTO_TEST_CASE(queue_flow_sets_limits_and_shows_them_as_lines_and_as_json) {
  const Sqlite run;
  BOOST_REQUIRE_EQUAL(run({"queue", "create", "acme", "fair", "--fairness", "--max-in-flight-per-key", "2"}).code, 0);
  BOOST_TEST(run({"queue", "flow", "weight", "acme", "fair", "vip", "3"}).out == "weight=3\n");
  BOOST_TEST(run({"queue", "flow", "admission", "acme", "fair", "--rate", "10", "--per", "1m"}).out ==
             "admission_limit=10/1m\n");
  BOOST_TEST(run({"queue", "flow", "resource", "acme", "smtp", "--max-in-flight", "4"}).out == "resource=smtp\n");
  BOOST_TEST(run({"queue", "flow", "breaker", "acme", "smtp", "--failure-rate", "0.5"}).out ==
             "breaker=closed\nfailures=0\ncalls=0\n");
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE_EQUAL(run({"queue", "send", "acme", "fair", "x", "--fairness-key", "vip"}).code, 0);
  const Run shown = run({"queue", "flow", "show", "acme"});
  BOOST_TEST(shown.code == 0, shown.err);
  BOOST_TEST(shown.out.find("kind=admission_limit queue=fair subject= limit=\"10 per 00:01:00\" available=7\n") !=
                 std::string::npos,
             shown.out);
  BOOST_TEST(shown.out.find("kind=key_limit queue=fair subject=vip limit=\"max_in_flight_per_key 2\" available=0 "
                            "in_flight=2 counted=3 delayed=1\n") != std::string::npos,
             shown.out);
  BOOST_TEST(shown.out.find("kind=fairness_weight queue=fair subject=vip limit=\"weight 3\"\n") != std::string::npos);
  BOOST_TEST(shown.out.find("kind=breaker queue= subject=smtp") != std::string::npos);
  BOOST_TEST(shown.out.ends_with("limits=5\n"), shown.out);
  const Run json = run({"queue", "flow", "show", "acme", "--json"});
  BOOST_TEST(json.code == 0, json.err);
  std::istringstream in(json.out);
  boost::property_tree::ptree tree;
  boost::property_tree::read_json(in, tree);
  BOOST_TEST(tree.get_child("limits").size() == 5u);
  BOOST_TEST(tree.get_child("limits").front().second.get<std::string>("kind") == "admission_limit");
  // Bad input: the store's InvalidArgument exit code, nothing changed.
  const Run bad = run({"queue", "flow", "weight", "acme", "fair", "vip", "0"});
  BOOST_TEST(bad.code == forgeyard::cli::exit_code_for(forgeyard::ErrorKind::InvalidArgument));
  BOOST_TEST(bad.err.find("weight must be between 1 and 1000") != std::string::npos, bad.err);
  BOOST_TEST(run({"queue", "flow", "show", "acme"}).out.find("limit=\"weight 3\"") != std::string::npos);
  BOOST_TEST(run({"queue", "flow", "breaker", "acme", "smtp", "--off"}).out == "breaker=none\n");
  BOOST_TEST(run({"queue", "flow", "admission", "acme", "fair", "--off"}).out == "admission_limit=none\n");
  BOOST_TEST(run({"queue", "flow", "show", "acme"}).out.ends_with("limits=3\n"));
}

BOOST_AUTO_TEST_CASE(global_options_may_follow_the_command_and_arguments_may_be_named_like_commands) {
  const Sqlite store;
  const Run acquired = cli({"lease", "acquire", "acme", "queue", "status", "--store", store.url, "--ttl", "1m"});
  BOOST_TEST(acquired.code == 0, acquired.err);
  BOOST_TEST(acquired.out.starts_with("acquired=true\n"));
  BOOST_TEST(acquired.out.find("\nholder=status\n") != std::string::npos);
  const Run status = cli({"--store", store.url, "lease", "status", "acme", "queue"});
  BOOST_TEST(status.code == 0);
  BOOST_TEST(status.out.starts_with("state=live\nowner=status\n"), status.out);
  // The last of a repeated option wins, as before CLI11.
  BOOST_TEST(cli({"--store", store.url, "lease", "reap", "--max", "x", "--max", "5"}).out == "reaped=0\n");
}

BOOST_AUTO_TEST_CASE(version_with_a_store_names_the_store_and_its_schema) {
  const Sqlite run;
  const Run r = run({"--version"});
  BOOST_TEST(r.code == 0, r.err);
  const Run s = run({"storage", "status"});
  std::smatch m;
  BOOST_REQUIRE(std::regex_search(s.out, m, std::regex("schema_version=([^\n]*)\n")));
  BOOST_TEST(r.out == "client_version=" + std::string(forgeyard::version()) +
                          "\nbackend=sqlite\nschema_version=" + m[1].str() + "\n");
  // $FORGEYARD_STORE names a store too.
  setenv("FORGEYARD_STORE", run.url.c_str(), 1);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open((run.dir / "env.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    execl(FORGEYARD_CLI, "forgeyard", "--version", static_cast<char*>(nullptr));
    _exit(127);
  }
  unsetenv("FORGEYARD_STORE");
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  BOOST_TEST(slurp((run.dir / "env.txt").string()) == r.out);
}

BOOST_AUTO_TEST_CASE(storage_reconcile_after_a_copy_reports_in_key_value_and_json) {
  const Sqlite run;
  BOOST_REQUIRE_EQUAL(run({"lease", "acquire", "acme", "job", "w1", "--ttl", "1h"}).code, 0);
  const Run ok = run({"storage", "restore-status"});
  BOOST_TEST(ok.code == 0, ok.err);
  BOOST_TEST(ok.out.find("state=ok\nneeds_reconcile=false\n") == 0u, ok.out);
  // A copy of the closed store opened in another place is a restore.
  const std::string copy = (run.dir / "copy.db").string();
  std::filesystem::copy_file(run.dir / "store.db", copy);
  const std::vector<std::string> at_copy{"--store", "sqlite://" + copy};
  auto on_copy = [&](std::vector<std::string> args) {
    args.insert(args.begin(), at_copy.begin(), at_copy.end());
    return cli(args);
  };
  const Run restored = on_copy({"storage", "restore-status", "--json"});
  BOOST_TEST(restored.code == 1);
  BOOST_TEST(restored.out.find("{\"state\":\"restored\",\"needs_reconcile\":true,") == 0u, restored.out);
  BOOST_TEST(on_copy({"storage", "status"}).code == 1);
  const Run bad = on_copy({"storage", "reconcile", "--anchor", "acme"});
  BOOST_TEST(bad.code == 2);
  BOOST_TEST(bad.err.find("--anchor must be TENANT=SEQ:HASH") != std::string::npos, bad.err);
  const Run r = on_copy({"storage", "reconcile"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("restore_detected=true\nleases_expired=1\ndeliveries_released=0\n") == 0u, r.out);
  BOOST_TEST(r.out.find("operations_audit=_forgeyard.operations seq=1 hash=") != std::string::npos, r.out);
  const Run again = on_copy({"storage", "reconcile", "--json", "--anchor", "acme=3:" + std::string(64, 'a')});
  BOOST_TEST(again.code == 1);  // the anchor is beyond the chain: a finding
  BOOST_TEST(again.out.find("{\"restore_detected\":false,\"leases_expired\":0,") == 0u, again.out);
  BOOST_TEST(again.out.find("\"audit_chains\":[{\"tenant\":\"acme\",\"head_seq\":0,\"cut_to\":3,") != std::string::npos,
             again.out);
  BOOST_TEST(on_copy({"storage", "status"}).code == 0);
  BOOST_TEST(run({"storage", "restore-status"}).code == 0);  // the original never moved
}

BOOST_AUTO_TEST_SUITE_END()

// storage migrate: exit codes and the --json shape, read back by a JSON parser.
namespace {

boost::property_tree::ptree parse_json(const std::string& text) {
  boost::property_tree::ptree tree;
  std::istringstream in(text);
  boost::property_tree::read_json(in, tree);  // throws on anything that is not JSON
  return tree;
}

std::vector<boost::property_tree::ptree> items(const boost::property_tree::ptree& tree, const std::string& key) {
  std::vector<boost::property_tree::ptree> out;
  for (const auto& [name, child] : tree.get_child(key)) out.push_back(child);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(storage_migrate_exit_codes_and_json) {
  const Sqlite run;
  const std::string dir = (run.dir / "migrations").string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/0001_create.sql") << "CREATE TABLE things (id integer PRIMARY KEY, old text);\n";
  std::ofstream(dir + "/0002_drop_old.sql") << "-- forgeyard: phase=contract\nALTER TABLE things DROP COLUMN old;\n";

  Run r = run({"storage", "migrate", "status", "--dir", dir, "--app", "billing", "--json"});
  BOOST_TEST(r.code == 1, r.err);  // pending
  auto j = parse_json(r.out);
  BOOST_TEST(j.get<std::string>("app") == "billing");
  BOOST_TEST(j.get<int>("pending") == 2);
  BOOST_TEST(j.get<int>("applied") == 0);
  BOOST_REQUIRE(items(j, "migrations").size() == 2u);
  BOOST_TEST(items(j, "migrations")[1].get<std::string>("phase") == "contract");
  BOOST_TEST(items(j, "migrations")[0].get<std::string>("state") == "pending");

  r = run({"storage", "migrate", "plan", "--dir", dir, "--app", "billing", "--json"});
  BOOST_TEST(r.code == 1, r.err);  // the contract is held back
  j = parse_json(r.out);
  BOOST_TEST(j.get<int>("will_run") == 1);
  BOOST_TEST(j.get<int>("held_back") == 1);
  BOOST_TEST(items(j, "steps")[1].get<std::string>("reason").find("--allow-contract") != std::string::npos);

  r = run({"storage", "migrate", "apply", "--dir", dir, "--app", "billing", "--app-version", "7.1", "--json"});
  BOOST_TEST(r.code == 1, r.err);
  j = parse_json(r.out);
  BOOST_REQUIRE(items(j, "applied").size() == 1u);
  BOOST_TEST(items(j, "applied")[0].get<std::string>("name") == "0001_create.sql");
  BOOST_TEST(items(j, "applied")[0].get<std::string>("sha256").size() == 64u);
  BOOST_TEST(items(j, "held_back").size() == 1u);
  BOOST_TEST(r.err.find("applying migrations") != std::string::npos);  // progress on stderr

  r = run({"storage", "migrate", "apply", "--dir", dir, "--app", "billing", "--allow-contract"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("migration.0002=applied contract 0002_drop_old.sql") != std::string::npos, r.out);

  r = run({"storage", "migrate", "status", "--dir", dir, "--app", "billing", "--json"});
  BOOST_TEST(r.code == 0, r.err);
  j = parse_json(r.out);
  BOOST_TEST(j.get<int>("applied") == 2);
  BOOST_TEST(j.get<int>("applied_through") == 2);
  BOOST_TEST(items(j, "migrations")[0].get<std::string>("app_version") == "7.1");
  BOOST_TEST(items(j, "migrations")[0].get<std::string>("file_sha256") ==
             items(j, "migrations")[0].get<std::string>("recorded_sha256"));
  r = run({"storage", "migrate", "status", "--dir", dir, "--app", "billing"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.starts_with("app=billing\napplied_through=2\napplied=2\npending=0\nchanged=0\n"), r.out);

  // A changed applied file: status answers 1 and names it, apply refuses (4) and runs nothing.
  std::ofstream(dir + "/0001_create.sql") << "CREATE TABLE things (id integer PRIMARY KEY, other text);\n";
  r = run({"storage", "migrate", "status", "--dir", dir, "--app", "billing", "--json"});
  BOOST_TEST(r.code == 1);
  j = parse_json(r.out);
  BOOST_TEST(j.get<int>("changed") == 1);
  BOOST_TEST(items(j, "migrations")[0].get<std::string>("state") == "changed");
  r = run({"storage", "migrate", "apply", "--dir", dir, "--app", "billing"});
  BOOST_TEST(r.code == 4);
  BOOST_TEST(r.err.find("SQLSTATE 22023") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("0001_create.sql") != std::string::npos, r.err);

  // Usage errors: 2.
  BOOST_TEST(run({"storage", "migrate", "status"}).code == 2);
  BOOST_TEST(run({"storage", "migrate", "apply", "--dir", dir, "--lock-wait", "soon"}).code == 2);
  BOOST_TEST(run({"storage", "migrate", "status", "--dir", dir, "--app", ""}).code == 4);
  BOOST_TEST(run({"storage", "migrate", "status", "--dir", dir + "/none"}).code == 4);
}
