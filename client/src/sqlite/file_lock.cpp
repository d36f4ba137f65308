#include "sqlite/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

#include "core/errors.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard::detail {

namespace {
std::string self_command() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "?" : name;
}
}  // namespace

FileLock::FileLock(const std::string& path, const std::string& purpose, std::chrono::milliseconds timeout) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0)
    throw Error(ErrorKind::Unavailable, fy::core::sqlstate::io_error,
                "cannot open lock file " + path + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(fd_);
      throw Error(ErrorKind::Unavailable, fy::core::sqlstate::io_error,
                  "cannot lock " + path + ": " + std::strerror(err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd_);
      throw Error(ErrorKind::Unavailable, fy::core::sqlstate::lock_not_available,
                  "the store is locked for exclusive work by another process: held by " + describe_holder(path),
                  "lock file " + path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string line = "pid " + std::to_string(::getpid()) + " (" + self_command() + ") on " + host + ", " +
                           purpose + ", since unix time " + std::to_string(std::time(nullptr)) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    ssize_t written = ::pwrite(fd_, line.data(), line.size(), 0);
    (void)written;  // the description is informative only
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

std::string FileLock::describe_holder(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "unknown" : line;
}

bool FileLock::held(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool taken = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // also drops the shared lock
  return taken;
}

void check_local_filesystem(const std::string& directory) {
  struct statfs fs {};
  if (::statfs(directory.c_str(), &fs) != 0)
    throw Error(ErrorKind::Unavailable, fy::core::sqlstate::io_error,
                "cannot stat " + directory + ": " + std::strerror(errno));
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x6969UL:      // NFS
    case 0x517BUL:      // SMB
    case 0xFF534D42UL:  // CIFS
    case 0xFE534D42UL:  // SMB2
    case 0x5346414FUL:  // AFS
    case 0x00C36400UL:  // Ceph
    case 0x01021997UL:  // 9p
      throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::invalid_parameter,
                  "refusing a SQLite store on a network filesystem: " + directory,
                  "SQLite's WAL and file locks are unsafe there; use a local disk or the PostgreSQL backend");
    default:
      return;
  }
}

}  // namespace forgeyard::detail
