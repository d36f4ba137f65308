// Times backup_store, verify_store (full) and restore_store (into an empty target; it verifies
// too) for a store holding 20,000 audit events and 5,000 ready messages. Usage:
//   backup_timing SOURCE_URL EMPTY_TARGET_URL NEW_BACKUP_DIR
// SOURCE_URL must be a new store (SQLite file, or a database with only CREATE EXTENSION).
// There is no hand-written baseline for a whole-store backup: these are times, not ratios
// (docs/performance.md#backup-restore-verify-and-copy-one-run-for-scale).
#include <chrono>
#include <iostream>

#include "forgeyard/forgeyard.hpp"

namespace {
using Mono = std::chrono::steady_clock;
double seconds_since(Mono::time_point start) {
  return std::chrono::duration<double>(Mono::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: backup_timing SOURCE_URL EMPTY_TARGET_URL NEW_BACKUP_DIR\n";
    return 2;
  }
  const std::string source = argv[1], target = argv[2], directory = argv[3];
  {
    auto store = forgeyard::open(source);
    store->queues().create("bench", "q", forgeyard::QueueOptions{});
    for (int batch = 0; batch < 20; ++batch) {
      std::vector<forgeyard::AuditEvent> events;
      for (int i = 0; i < 1000; ++i) events.push_back({"alice", "deploy", "service/" + std::to_string(i)});
      store->audit().append_batch("bench", events);
    }
    auto tx = store->begin();
    for (int i = 0; i < 5000; ++i) tx->queues().enqueue("bench", "q", {forgeyard::Bytes(200, 'x')});
    tx->commit();
  }
  auto start = Mono::now();
  const auto backup = forgeyard::backup_store(source, directory);
  std::cout << "backup_seconds=" << seconds_since(start) << " bytes=" << backup.bytes << "\n";
  start = Mono::now();
  const auto verify = forgeyard::verify_store(source, true);
  std::cout << "verify_full_seconds=" << seconds_since(start) << " ok=" << verify.ok() << "\n";
  start = Mono::now();
  const auto restore = forgeyard::restore_store(target, directory);
  std::cout << "restore_seconds=" << seconds_since(start) << " ok=" << restore.verify.ok() << "\n";
  return verify.ok() && restore.verify.ok() ? 0 : 1;
}
