// Exclusive work on a SQLite store (migrations now; backup and restore later) holds an
// exclusive flock on "<store>.lock". The kernel releases it when the process dies, and the
// holder writes who it is into the file so that a process that cannot get it can say so.
#pragma once

#include <chrono>
#include <string>

namespace forgeyard::detail {

class FileLock {
 public:
  // Waits up to `timeout` for the exclusive lock; then throws Unavailable naming the holder.
  FileLock(const std::string& path, const std::string& purpose, std::chrono::milliseconds timeout);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Who holds (or last held) the lock, as its holder wrote it.
  static std::string describe_holder(const std::string& path);
  // Whether a process holds the lock now (a shared probe; writes nothing).
  static bool held(const std::string& path);

 private:
  int fd_ = -1;
};

// Refuses a directory on a network filesystem (NFS, SMB/CIFS, AFS, Ceph, 9p): their locking
// cannot keep SQLite's WAL safe.
void check_local_filesystem(const std::string& directory);

}  // namespace forgeyard::detail
