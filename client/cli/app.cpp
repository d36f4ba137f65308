// Builds the command tree, parses with CLI11 and runs the selected command. `forgeyard --help`
// prints an overview generated from the same tree (README.md's CLI block is that output, which
// tests/cli checks); `forgeyard COMMAND --help` is CLI11's help of that command.
#include "app.hpp"

#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "forgeyard/version.hpp"

namespace forgeyard::cli {

namespace {

constexpr std::size_t width = 100;          // of the overview
constexpr std::size_t description_at = 47;  // the column of a command's description

constexpr std::string_view stores_text =
    R"(Stores: --store URL or $FORGEYARD_STORE; postgresql://... (the forgeyard extension) or
sqlite:///path; default: the embedded store under $XDG_DATA_HOME/forgeyard (else
~/.local/share/forgeyard). --unnamed-statements: no named prepared statements (PgBouncer
in transaction mode). --replica URL (repeatable) with --max-lag DURATION: the read commands
may read from a streaming replica at most that far behind, else from the primary.
)";

constexpr std::string_view values_text =
    R"(Durations: 500ms, 30s, 5m, 2h, 1d.  Values are text; the backend converts them to the
column's type.  Output: key=value lines on stdout; errors on stderr.  Flags also take the
old spelling with a value: --until-empty true, --permanent true.
)";

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// "queue create TENANT QUEUE [--max-messages N] ...", one word per positional or option.
std::vector<std::string> synopsis(const CLI::App& command, const std::string& path) {
  std::vector<std::string> words{path};
  for (const CLI::Option* o : command.get_options()) {
    if (!o->get_positional()) continue;
    std::string word = o->get_name(true, false);
    if (o->get_expected_max() > 1) word += "...";
    words.push_back(o->get_required() ? word : "[" + word + "]");
  }
  for (const CLI::Option* o : command.get_options()) {
    if (o->get_positional() || o == command.get_help_ptr()) continue;
    std::string word = "--" + o->get_lnames().front();
    if (!o->get_type_name().empty()) word += " " + o->get_type_name();  // none for a flag
    if (!o->get_required()) {
      word.insert(0, 1, '[');
      word += ']';
    }
    if (o->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll) word += "...";
    words.push_back(word);
  }
  return words;
}

// Appends `words` from column `at`, wrapping at `width` to column `indent`; returns the column.
std::size_t append_wrapped(std::string& out, const std::vector<std::string>& words, std::size_t at,
                           std::size_t indent) {
  bool first = true;
  for (const std::string& w : words) {
    if (!first && at + 1 + w.size() > width) {
      out += "\n" + std::string(indent, ' ');
      at = indent;
    } else if (!first) {
      out += ' ';
      ++at;
    }
    out += w;
    at += w.size();
    first = false;
  }
  return at;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void add_command_line(std::string& out, const CLI::App& command, const std::string& path) {
  out += "  ";
  const std::vector<std::string> words = synopsis(command, path);
  // Continuation lines start under the first argument ("queue create " -> column 15).
  std::size_t at = append_wrapped(out, words, 2, 2 + path.size() + 1);
  if (at + 2 > description_at) {
    out += "\n" + std::string(description_at, ' ');
  } else {
    out += std::string(description_at - at, ' ');
  }
  append_wrapped(out, split_words(command.get_description()), description_at, description_at);
  out += "\n";
}

// A leaf command's line, or the lines of its subcommands ("storage migrate status").
void add_command_lines(std::string& out, const CLI::App& command, const std::string& path) {
  const auto subcommands = subcommands_of(command);
  if (subcommands.empty()) add_command_line(out, command, path);
  for (const CLI::App* sub : subcommands) add_command_lines(out, *sub, path + " " + sub->get_name());
}

// `forgeyard --help`: every command on one line or a few, generated from the tree.
std::string overview(const CLI::App& app) {
  std::string out =
      "usage: forgeyard [--store URL] [--unnamed-statements] [--replica URL --max-lag D] COMMAND ...\n"
      "       forgeyard COMMAND --help      that command's arguments, options and defaults\n"
      "       forgeyard [--store URL] --version\n\n";
  out += stores_text;
  out += "\nCommands:\n";
  for (const CLI::App* group : subcommands_of(app)) add_command_lines(out, *group, group->get_name());
  out += "\n";
  out += values_text;
  out += "Exit codes:\n";
  for (const ExitCode& e : exit_codes()) out += "  " + std::to_string(e.code) + "  " + std::string(e.meaning) + "\n";
  return out;
}

class OverviewFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (app->get_parent() == nullptr) return overview(*app);
    return CLI::Formatter::make_help(app, std::move(name), mode);
  }
};

// The spelling before CLI11, `--until-empty true`, becomes `--until-empty=true`, so that the
// flags stay flags: a bare `--until-empty` never takes the next argument as its value.
std::vector<std::string> fold_old_flag_values(const std::vector<std::string>& argv) {
  std::vector<std::string> args;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    const bool flag = arg == "--until-empty" || arg == "--permanent";
    if (flag && i + 1 < argv.size() && (argv[i + 1] == "true" || argv[i + 1] == "false")) arg += "=" + argv[++i];
    args.push_back(std::move(arg));
  }
  return args;
}

// client_version, and with a store the extension's version (PostgreSQL) or the last applied
// migration (SQLite), as `storage status` reports them.
int print_version(Context& ctx) {
  std::cout << "client_version=" << version() << "\n";
  if (ctx.url.empty()) return 0;
  const StorageStatus s = ctx.store().status();
  std::cout << "backend=" << s.backend << "\n"
            << (s.backend == "postgresql" ? "extension_version=" : "schema_version=") << s.schema_version << "\n";
  if (!s.schema_version.empty()) return 0;
  std::cerr << "forgeyard: " << s.detail << "\n";
  return exit_no;
}

int usage_error(const CLI::App& app, const std::string& message) {
  // help() of the root describes the deepest command that was selected, else the overview.
  std::cerr << "forgeyard: " << message << "\n\n" << app.help();
  return exit_usage;
}

// The command tree, the options it fills and the actions of its leaf commands.
struct CommandLine {
  Context ctx;
  Commands commands;
  bool show_version = false;
  CLI::App app{"forgeyard: the command line of the coordination store", "forgeyard"};

  CommandLine() {
    // Inherited by every command below: global options may follow the command, a repeated option
    // keeps its last value (as before CLI11), and one command per level, so that a positional
    // argument named like a command ("queue", "status") stays an argument.
    app.fallthrough();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.require_subcommand(0, 1);
    app.add_option("--store", ctx.url, "the store's URL")->type_name("URL")->envname("FORGEYARD_STORE");
    app.add_flag_callback(
        "--unnamed-statements", [this] { ctx.options.prepared_statements = false; },
        "no named prepared statements (PgBouncer in transaction mode)");
    add_repeated(app, "--replica", ctx.options.replicas,
                 "a streaming replica of the store, for reads with --max-lag (repeat for more)", "URL");
    app.add_option("--max-lag", ctx.max_lag,
                   "read commands may read from a replica whose replay lag is at most this (e.g. 5s); "
                   "default: the primary")
        ->type_name("DURATION");
    app.add_flag("--version", show_version, "the client's version, and the store's with --store");
    add_storage_commands(app, commands);
    add_migrate_commands(app, commands);
    add_ops_commands(app, commands);
    add_restore_commands(app, commands);
    add_lease_commands(app, commands);
    add_cas_commands(app, commands);
    add_idem_commands(app, commands);
    add_queue_commands(app, commands);
    add_topic_commands(app, commands);
    add_workflow_commands(app, commands);
    add_schedule_commands(app, commands);
    add_audit_commands(app, commands);
    app.formatter(std::make_shared<OverviewFormatter>());  // the root only: commands keep CLI11's
  }

  // An exit code when parsing ends the run (help, a usage error), else -1.
  int parse(std::vector<std::string> args) {
    std::vector<const char*> argp;
    argp.reserve(args.size());
    for (const std::string& a : args) argp.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argp.size()), argp.data());
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();
      return exit_done;
    } catch (const CLI::CallForAllHelp&) {
      std::cout << app.help("", CLI::AppFormatMode::All);
      return exit_done;
    } catch (const CLI::ParseError& e) {
      return usage_error(app, e.what());
    }
    return -1;
  }

  // The leaf command selected, or the root when none was.
  const CLI::App* selected() const {
    const CLI::App* command = &app;
    while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
    return command;
  }
};

}  // namespace

int parse_only(const std::vector<std::string>& args, std::string& selected) {
  CommandLine line;
  std::vector<std::string> argv{"forgeyard"};
  argv.insert(argv.end(), args.begin(), args.end());
  const int code = line.parse(fold_old_flag_values(argv));
  if (code >= 0) return code;
  if (line.show_version) {
    selected = "--version";
    return -1;
  }
  const CLI::App* command = line.selected();
  if (line.commands.find(command) == nullptr) return usage_error(line.app, "missing command");
  selected.clear();
  for (const CLI::App* c = command; c->get_parent() != nullptr; c = c->get_parent())
    selected = c->get_name() + (selected.empty() ? "" : " " + selected);
  return -1;
}

int run(int argc, char** argv) {
  CommandLine line;
  const int code = line.parse(fold_old_flag_values(std::vector<std::string>(argv, argv + argc)));
  if (code >= 0) return code;
  try {
    if (line.show_version) return print_version(line.ctx);
    const Action* action = line.commands.find(line.selected());
    if (action == nullptr) throw Usage("missing command");
    return (*action)(line.ctx);
  } catch (const Usage& e) {
    return usage_error(line.app, e.what());
  } catch (const Error& e) {
    std::cerr << "forgeyard: " << e.what() << " [" << to_string(e.kind()) << ", SQLSTATE " << e.sqlstate() << "]";
    if (!e.detail().empty()) std::cerr << "\n  detail: " << e.detail();
    std::cerr << "\n";
    return exit_code_for(e.kind());
  }
}

}  // namespace forgeyard::cli
