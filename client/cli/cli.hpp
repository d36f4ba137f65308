// What the CLI's command files share: the command registry, the lazily opened store, the usage
// error, and the parsers and printers of the text forms (durations, timestamps, COL=VALUE).
// The command line itself is parsed by CLI11; app.cpp builds it from the command files.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "forgeyard/forgeyard.hpp"

namespace forgeyard::cli {

// A usage error found after parsing (a bad duration, a COL=VALUE without "="): exit 2, like the
// parse errors CLI11 finds itself.
struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The global options and the store they name, opened on first use: `audit verify --file` and
// `--version` without a store never open one.
class Context {
 public:
  std::string url;  // --store, else $FORGEYARD_STORE, else "" (the embedded default store)
  StoreOptions options;
  std::string max_lag;  // --max-lag: the read commands' reads are eventual within it
  Store& store();
  // Strong, or eventual within --max-lag (a usage error when that is not a duration).
  ReadClass read() const;
  bool has_store() const { return store_ != nullptr; }

 private:
  std::unique_ptr<Store> store_;
};

// What a leaf command does once its arguments are parsed; returns the exit code.
using Action = std::function<int(Context&)>;

// Leaf subcommands and their actions. The command files register here; app.cpp runs the one
// that was selected.
class Commands {
 public:
  void on(const CLI::App* command, Action action) { actions_[command] = std::move(action); }
  const Action* find(const CLI::App* command) const {
    auto it = actions_.find(command);
    return it == actions_.end() ? nullptr : &it->second;
  }

 private:
  std::map<const CLI::App*, Action> actions_;
};

// One per command group (commands_*.cpp).
void add_storage_commands(CLI::App& app, Commands& commands);  // storage, maintain
void add_ops_commands(CLI::App& app, Commands& commands);      // storage status|doctor|stats, metrics
// storage backup, restore, verify, copy (called by add_storage_commands with the `storage` command).
void add_backup_commands(CLI::App& storage, Commands& commands);
void add_install_command(CLI::App& storage, Commands& commands);  // storage install
void add_restore_commands(CLI::App& app, Commands& commands);     // storage reconcile, restore-status
void add_lease_commands(CLI::App& app, Commands& commands);
void add_cas_commands(CLI::App& app, Commands& commands);
void add_idem_commands(CLI::App& app, Commands& commands);
void add_queue_commands(CLI::App& app, Commands& commands);
void add_flow_commands(CLI::App& queue, Commands& commands);  // queue flow (called by add_queue_commands)
void add_audit_commands(CLI::App& app, Commands& commands);
void add_migrate_commands(CLI::App& app, Commands& commands);   // storage migrate (after storage)
void add_topic_commands(CLI::App& app, Commands& commands);     // event-type, topic
void add_workflow_commands(CLI::App& app, Commands& commands);  // workflow
void add_schedule_commands(CLI::App& app, Commands& commands);  // schedule

// An option that may repeat (--key, --set, --null): one value per occurrence.
CLI::Option* add_repeated(CLI::App& command, const std::string& name, std::vector<std::string>& values,
                          const std::string& description, const std::string& type_name);

// 500ms, 30s, 5m, 2h, 1d (a bare number is seconds).
Duration parse_duration(const std::string& text);
// The shortest of those forms that is exact: 30000000us -> "30s", 300s -> "5m".
std::string format_duration(std::int64_t usecs);
std::int64_t parse_int(const std::string& text, const char* what);
std::string iso(TimePoint t);  // 2026-01-01T00:00:00.000000Z
// COL=VALUE pairs into fields (values as text; `nulls` become NULL).
Fields parse_fields(const std::vector<std::string>& pairs, const std::vector<std::string>& nulls, const char* option);
void print_value(const Value& v);
std::string read_stdin();

}  // namespace forgeyard::cli
