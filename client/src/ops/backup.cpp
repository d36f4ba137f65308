// forgeyard/backup.hpp: the URL decides the backend (as forgeyard::open does); the checks that
// do not depend on it (the backup's manifest and checksums) run first, before anything changes.
#include "forgeyard/backup.hpp"

#include <optional>

#include "core/core.hpp"
#include "forgeyard/error.hpp"
#include "ops/ops.hpp"

namespace forgeyard {

namespace {

// The SQLite file of a URL, or nullopt for a PostgreSQL URL.
std::optional<std::string> sqlite_path(std::string_view url) {
  if (url.empty()) return default_sqlite_path();
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) return std::nullopt;
  if (url.starts_with("sqlite://") && url.size() > 9 && url[9] == '/') return std::string(url.substr(9));
  throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::invalid_parameter,
              "unknown store URL (use postgresql://... or sqlite:///path): " + std::string(url.substr(0, 16)));
}

}  // namespace

BackupResult backup_store(std::string_view url, const std::string& directory, const ProgressFn& progress) {
  if (directory.empty())
    throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::null_value, "the backup directory is empty");
  if (auto path = sqlite_path(url)) return detail::ops::sqlite_backup(*path, directory, progress);
  return detail::ops::postgres_backup(std::string(url), directory, progress);
}

RestoreResult restore_store(std::string_view url, const std::string& directory, const RestoreOptions& options) {
  const fy::core::BackupManifest manifest = detail::ops::read_checked_backup(directory, options.progress);
  if (auto path = sqlite_path(url)) return detail::ops::sqlite_restore(*path, directory, manifest, options);
  return detail::ops::postgres_restore(std::string(url), directory, manifest, options);
}

VerifyReport verify_store(std::string_view url, bool full) {
  if (auto path = sqlite_path(url)) return detail::ops::sqlite_verify(*path, full);
  return detail::ops::postgres_verify(std::string(url), full);
}

CopyResult copy_store(std::string_view from, std::string_view to, const ProgressFn& progress) {
  return detail::ops::copy_between(from.empty() ? "sqlite://" + default_sqlite_path() : std::string(from),
                                   std::string(to), progress);
}

namespace detail::ops {

std::string workflow_gap(const std::string& tenant, const std::string& run, std::int64_t rows, std::int64_t last) {
  return "run " + run + " (tenant " + tenant + ") has " + std::to_string(rows) + " journal rows up to position " +
         std::to_string(last) + ": its positions are not contiguous from 1";
}

std::string workflow_orphan(const std::string& tenant, const std::string& run) {
  return "journal rows of run " + run + " (tenant " + tenant + "), which does not exist";
}

std::string workflow_inconsistent(const std::string& tenant, const std::string& run, const std::string& state,
                                  std::int64_t epoch) {
  return "run " + run + " (tenant " + tenant + ") is " + state + " at epoch " + std::to_string(epoch) +
         ", which its finish time or the claim token sequence contradicts";
}

void verify_audit_chains(Audit& audit, const std::vector<std::string>& tenants, VerifyReport& report) {
  for (const auto& tenant : tenants) {
    const AuditVerification v = audit.verify(tenant);
    if (!v.ok)
      report.findings.push_back(
          {"audit_chains", "tenant " + tenant + ": chain breaks at seq " +
                               (v.first_bad_seq ? std::to_string(*v.first_bad_seq) : std::string("?")) +
                               (v.reason ? " (" + *v.reason + ")" : std::string())});
  }
}

bool reconcile_restored(Store& store) {
  // A restore or copy is a move into a new place: the one reconcile step ends the restored leases,
  // claims and idempotency locks and raises every fencing sequence (forgeyard/restore.hpp).
  store.restore_reconcile();
  return true;
}

}  // namespace detail::ops

}  // namespace forgeyard
