// storage backup, restore and verify (docs/operations.md#backup-and-restore). They work on the
// store's URL, not on an opened store: a restore replaces the store itself.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.hpp"
#include "exit_codes.hpp"
#include "json_writer.hpp"
#include "output.hpp"

namespace forgeyard::cli {

namespace {

void print_verify(Output& out, const VerifyReport& r, const std::string& prefix) {
  std::string checks, checks_json = "[";
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    checks += (i ? "," : "") + r.checks[i];
    checks_json += (i ? ", " : "") + json_string(r.checks[i]);
  }
  out.raw(prefix + "checks", checks_json + "]", {checks});
  std::string counts_json = "{";
  std::vector<std::string> count_lines;
  for (const auto& [table, n] : r.counts) {
    counts_json += (counts_json.size() > 1 ? ", " : "") + json_string(table) + ": " + std::to_string(n);
    count_lines.push_back(table + ":" + std::to_string(n));
  }
  out.raw(prefix + "count", counts_json + "}", count_lines);
  std::string findings_json = "[";
  std::vector<std::string> finding_lines;
  for (std::size_t i = 0; i < r.findings.size(); ++i) {
    findings_json += std::string(i ? ", " : "") + "{\"check\": " + json_string(r.findings[i].check) +
                     ", \"detail\": " + json_string(r.findings[i].detail) + "}";
    finding_lines.push_back(r.findings[i].check + ": " + r.findings[i].detail);
  }
  out.raw(prefix + "finding", findings_json + "]", finding_lines);
  out.flag(prefix + "ok", r.ok());
}

}  // namespace

void add_backup_commands(CLI::App& storage, Commands& commands) {
  struct Args {
    std::string directory;
    bool replace = false;
    bool quick = false;
    bool full = false;
    bool json = false;
  };
  auto a = std::make_shared<Args>();

  CLI::App* backup = storage.add_subcommand("backup", "snapshot + manifest.json into a new directory");
  backup->add_option("DIR", a->directory, "the backup directory (absent or empty)")->required();
  backup->add_flag("--json", a->json, "print one JSON object");
  commands.on(backup, [a](Context& ctx) {
    const BackupResult r = backup_store(ctx.url, a->directory, progress_on_stderr());
    Output out(a->json);
    out.field("directory", r.directory);
    out.field("backend", r.backend);
    out.field("schema_version", r.schema_version);
    if (!r.server_version.empty()) out.field("server_version", r.server_version);
    out.field("created_at", r.created_at);
    out.field("files", r.files);
    out.field("bytes", static_cast<std::int64_t>(r.bytes));
    out.field("audit_chains", r.audit_chains);
    out.print();
    return static_cast<int>(exit_done);
  });

  CLI::App* restore = storage.add_subcommand("restore", "check a backup, then restore it into the store");
  restore->add_option("DIR", a->directory, "a directory written by storage backup")->required();
  restore->add_flag("--replace", a->replace, "overwrite a store that is not empty");
  restore->add_flag("--json", a->json, "print one JSON object");
  commands.on(restore, [a](Context& ctx) {
    RestoreOptions options;
    options.replace = a->replace;
    options.progress = progress_on_stderr();
    const RestoreResult r = restore_store(ctx.url, a->directory, options);
    Output out(a->json);
    out.field("backend", r.backend);
    out.field("backup_schema_version", r.backup_schema_version);
    out.field("schema_version", r.schema_version);
    out.field("backup_created_at", r.backup_created_at);
    out.flag("migrated", r.migrated);
    out.flag("replaced", r.replaced);
    out.flag("reconciled", r.reconciled);
    print_verify(out, r.verify, "verify_");
    out.print();
    if (!r.reconciled)
      std::cerr << "forgeyard: reconcile did not run: run `forgeyard storage reconcile` before starting workers\n";
    return static_cast<int>(r.verify.ok() ? exit_done : exit_no);
  });

  auto to = std::make_shared<std::string>();
  CLI::App* copy = storage.add_subcommand("copy", "copy all into an empty store of the other backend");
  copy->add_option("--to", *to, "the target store URL (sqlite:///... or postgresql://...)")
      ->required()
      ->type_name("URL");
  copy->add_flag("--json", a->json, "print one JSON object");
  commands.on(copy, [a, to](Context& ctx) {
    const CopyResult r = copy_store(ctx.url, *to, progress_on_stderr());
    Output out(a->json);
    std::string rows_json = "{";
    std::vector<std::string> row_lines;
    for (const auto& [table, n] : r.rows) {
      rows_json += (rows_json.size() > 1 ? ", " : "") + json_string(table) + ": " + std::to_string(n);
      row_lines.push_back(table + ":" + std::to_string(n));
    }
    out.raw("copied", rows_json + "}", row_lines);
    out.flag("reconciled", r.reconciled);
    print_verify(out, r.verify, "verify_");
    out.print();
    if (!r.reconciled)
      std::cerr << "forgeyard: reconcile did not run: run `forgeyard storage reconcile` on the target\n";
    return static_cast<int>(r.verify.ok() ? exit_done : exit_no);
  });

  CLI::App* verify = storage.add_subcommand("verify", "consistency checks; exit 1 on any finding");
  auto* quick = verify->add_flag("--quick", a->quick, "schema, constraints and row counts (the default)");
  verify->add_flag("--full", a->full, "also every audit chain, versioned table, queue counter and message state")
      ->excludes(quick);
  verify->add_flag("--json", a->json, "print one JSON object");
  commands.on(verify, [a](Context& ctx) {
    const VerifyReport r = verify_store(ctx.url, a->full);
    Output out(a->json);
    out.field("level", r.full ? "full" : "quick");
    print_verify(out, r, "");
    out.print();
    return static_cast<int>(r.ok() ? exit_done : exit_no);
  });
}

}  // namespace forgeyard::cli
