// Writers of one SQLite file take turns (write_turns.hpp).
#include "sqlite/write_turns.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sqlite3.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <thread>

#include "error_map.hpp"
#include "instruments.hpp"

namespace forgeyard::detail {

namespace {

using SteadyClock = std::chrono::steady_clock;

// "<store>.turns": a ticket line shared by the processes that write the store, mapped by each.
// Every word starts at zero, the empty line. Tickets count up from 0 and are never reused; slot
// `t % kSlots` says who holds ticket t and whether it is still in the line.
constexpr std::uint64_t kMagic = 0x3173'6e72'7574'7966;  // "fyturns1"
constexpr std::uint64_t kSlots = 256;                    // the most processes in the line at once
struct Layout {
  std::uint64_t magic;
  std::uint64_t size;                 // sizeof(Layout): a file of another layout is not used
  alignas(64) std::uint64_t next;     // the next ticket to hand out
  alignas(64) std::uint64_t serving;  // the ticket whose turn it is
  std::uint32_t moved;                // counts the moves of `serving`: the futex word waiters sleep on
  alignas(64) std::uint64_t slots[kSlots];
};
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

// Each process with the file open holds a write lock on one byte of it, kProcessBytes + its
// number: an open file description lock (F_OFD_SETLK), which the kernel drops when the process
// dies. An unlocked byte means whoever had that number is gone, and so are its tickets.
constexpr off_t kProcessBytes = 4096;
constexpr std::uint64_t kMaxProcesses = 1024;

// A slot word: the ticket, its owner's process number and its state. A word never repeats (each
// carries its ticket), so a compare-and-swap on a slot never acts on an older lap's ticket.
enum State : std::uint64_t { kEmpty = 0, kIn = 1, kLeft = 2 };  // in: waiting or holding; left: skip
constexpr std::uint64_t slot_word(std::uint64_t ticket, std::uint64_t owner, State state) {
  return ticket << 16 | owner << 2 | state;
}
constexpr std::uint64_t ticket_of(std::uint64_t word) {
  return word >> 16;
}
constexpr std::uint64_t owner_of(std::uint64_t word) {
  return (word >> 2) & 0x3fff;
}
constexpr State state_of(std::uint64_t word) {
  return static_cast<State>(word & 3);
}
static_assert(kMaxProcesses <= 0x4000);

// How often a waiter looks whether the ticket being served still has a live owner: the longest a
// dead holder keeps the others waiting.
constexpr auto kCheckEvery = std::chrono::milliseconds(10);

// The lines open in this process: their file descriptors and mappings. A child forked without
// exec inherits both, and either keeps the parent's open file, and so its OFD locks: the parent
// would look alive to the other processes for as long as the child lives. The child lets go of
// them at once (munmap and close, safe in a fork handler), and its lines stop being used
// (ProcessLine::usable).
constexpr int kMaxLines = 64;
struct OpenLine {
  std::atomic<int> fd{-1};
  std::atomic<void*> map{nullptr};
};
OpenLine open_lines[kMaxLines];
void let_go_of_lines_in_child() {
  for (auto& line : open_lines) {
    const int fd = line.fd.exchange(-1);
    if (fd < 0) continue;
    ::munmap(line.map.load(), sizeof(Layout));
    ::close(fd);
  }
}
bool track_line(int fd, void* map) {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, let_go_of_lines_in_child) == 0;
  if (!registered) return false;
  for (auto& line : open_lines) {
    int empty = -1;
    if (line.fd.load() != -1) continue;
    line.map.store(map);
    if (line.fd.compare_exchange_strong(empty, fd)) return true;
  }
  return false;
}
void untrack_line(int fd) {
  for (auto& line : open_lines) {
    int mine = fd;
    if (line.fd.compare_exchange_strong(mine, -1)) return;
  }
}

// One lock kind on the file, OFD byte locks (the kernel drops them when the last descriptor of
// the open file closes): byte 0 while a process lays the file out or registers, one byte per
// process number after kProcessBytes.
int ofd_lock(int fd, short type, off_t start, off_t length, bool wait) {
  struct flock range {};
  range.l_type = type;
  range.l_whence = SEEK_SET;
  range.l_start = start;
  range.l_len = length;
  return ::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &range);
}

timespec to_timespec(SteadyClock::time_point at) {
  // steady_clock is CLOCK_MONOTONIC, the clock FUTEX_WAIT_BITSET measures absolute times on.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

// The line of the processes on one file (the layout above). Only the holder of its process's
// turn calls take() and give_back(), so a process has at most one ticket at a time. It does not
// cross fork(): a child that did not exec closes its copy of the file at once and writes with the
// in-process turns only (as a SQLite connection, it should not be carried across fork() anyway).
class ProcessLine {
 public:
  // Null when the file cannot be opened, created or used; the reason is logged.
  static std::unique_ptr<ProcessLine> open(const std::string& path);
  ~ProcessLine() {
    if (!usable()) return;  // a forked child let go of its copies at the fork
    untrack_line(fd_);
    ::munmap(line_, sizeof(Layout));
    ::close(fd_);  // also drops this process's number
  }

  // False in a child forked from the process that opened the line.
  bool usable() const { return ::getpid() == pid_; }
  bool take(SteadyClock::time_point deadline);
  void give_back() {
    leave(ticket_);
    pass_on(ticket_);
  }

 private:
  ProcessLine(int fd, Layout* line) : fd_(fd), line_(line), pid_(::getpid()) {}
  bool register_process(std::string& why);

  std::atomic_ref<std::uint64_t> next() { return std::atomic_ref(line_->next); }
  std::atomic_ref<std::uint64_t> serving() { return std::atomic_ref(line_->serving); }
  std::atomic_ref<std::uint32_t> moved() { return std::atomic_ref(line_->moved); }
  std::atomic_ref<std::uint64_t> slot(std::uint64_t ticket) { return std::atomic_ref(line_->slots[ticket % kSlots]); }

  // Moves the turn from ticket `from` to the next ticket still in the line. Called by the holder
  // of `from`, or by whoever found that its owner left or died; the compare-and-swap makes a
  // second caller for the same ticket do nothing.
  void pass_on(std::uint64_t from);
  // Passes the turn on from `ticket`, being served, when its owner left without passing it on or died.
  void pass_over_gone(std::uint64_t ticket);
  bool alive(std::uint64_t owner);
  void wait(std::uint32_t seen, SteadyClock::time_point until);
  // Marks this process's `ticket` left; only that word, so a slot that moved on is never touched.
  void leave(std::uint64_t ticket) {
    std::uint64_t mine = slot_word(ticket, me_, kIn);
    slot(ticket).compare_exchange_strong(mine, slot_word(ticket, me_, kLeft));
  }

  int fd_;
  Layout* line_;
  pid_t pid_;
  std::uint64_t me_ = 0;      // this process's number
  std::uint64_t ticket_ = 0;  // this process's ticket while it is in the line
};

std::unique_ptr<ProcessLine> ProcessLine::open(const std::string& path) {
  const std::string file = path + ".turns";
  // Owner-only like the store it sits beside.
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    log().debug("write turns of {} are this process's only: cannot open {}: {}", path, file, std::strerror(errno));
    return nullptr;
  }
  auto refuse = [&](const std::string& why) -> std::unique_ptr<ProcessLine> {
    log().warn(
        "write turns of {} are this process's only (writers of other processes meet SQLite's busy handler): "
        "{} {}",
        path, file, why);
    ::close(fd);
    return nullptr;
  };
  // The first process to open the file lays it out; the others wait for that on byte 0.
  while (ofd_lock(fd, F_WRLCK, 0, 1, true) != 0)
    if (errno != EINTR) return refuse(std::string("cannot be locked: ") + std::strerror(errno));
  struct stat st {};
  std::uint64_t header[2] = {0, 0};
  if (::fstat(fd, &st) != 0) return refuse(std::string("cannot be read: ") + std::strerror(errno));
  if (st.st_size > 0 && ::pread(fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    return refuse("cannot be read");
  if (header[0] == 0) {
    // New, or cut short while it was laid out: zero it and sign it.
    header[0] = kMagic;
    header[1] = sizeof(Layout);
    if (::ftruncate(fd, 0) != 0 || ::ftruncate(fd, sizeof(Layout)) != 0 ||
        ::pwrite(fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
      return refuse(std::string("cannot be laid out: ") + std::strerror(errno));
  } else if (header[0] != kMagic || header[1] != sizeof(Layout) || st.st_size != static_cast<off_t>(sizeof(Layout))) {
    // Another layout (another version of the library): its writers and ours still meet in
    // SQLite's busy handler, as they would without a line.
    return refuse("has another layout");
  }
  void* map = ::mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return refuse(std::string("cannot be mapped: ") + std::strerror(errno));
  auto* layout = static_cast<Layout*>(map);
  // No process holds a number: nobody is in the line, whatever the file says (a line left
  // inconsistent by a crash of the machine starts empty again).
  struct flock anyone {};
  anyone.l_type = F_WRLCK;
  anyone.l_whence = SEEK_SET;
  anyone.l_start = kProcessBytes;
  anyone.l_len = static_cast<off_t>(kMaxProcesses);
  if (::fcntl(fd, F_OFD_GETLK, &anyone) == 0 && anyone.l_type == F_UNLCK) {
    std::atomic_ref(layout->next).store(0);
    std::atomic_ref(layout->serving).store(0);
    for (auto& word : layout->slots) std::atomic_ref(word).store(0);
  }
  std::unique_ptr<ProcessLine> line(new ProcessLine(fd, layout));
  std::string why;
  const bool registered = line->register_process(why) && track_line(fd, map);
  ofd_lock(fd, F_UNLCK, 0, 1, false);
  if (!registered) {
    line.reset();  // closes fd
    log().warn(
        "write turns of {} are this process's only (writers of other processes meet SQLite's busy handler): "
        "{}",
        path, why.empty() ? "no room to track the line across fork()" : why);
    return nullptr;
  }
  return line;
}

bool ProcessLine::register_process(std::string& why) {
  for (std::uint64_t p = 0; p < kMaxProcesses; ++p) {
    if (ofd_lock(fd_, F_WRLCK, kProcessBytes + static_cast<off_t>(p), 1, false) != 0) {
      if (errno == EAGAIN || errno == EACCES) continue;  // another process's number
      why = std::string("cannot lock a process number: ") + std::strerror(errno);
      return false;
    }
    me_ = p;
    // Tickets still marked with this number are a dead process's: they leave the line.
    for (std::uint64_t i = 0; i < kSlots; ++i) {
      std::uint64_t word = std::atomic_ref(line_->slots[i]).load();
      if (state_of(word) != kIn || owner_of(word) != me_) continue;
      if (slot(ticket_of(word)).compare_exchange_strong(word, slot_word(ticket_of(word), me_, kLeft)) &&
          serving().load() == ticket_of(word))
        pass_on(ticket_of(word));
    }
    return true;
  }
  why = std::to_string(kMaxProcesses) + " processes have it open";
  return false;
}

bool ProcessLine::alive(std::uint64_t owner) {
  struct flock byte {};
  byte.l_type = F_WRLCK;
  byte.l_whence = SEEK_SET;
  byte.l_start = kProcessBytes + static_cast<off_t>(owner);
  byte.l_len = 1;
  // If the probe fails, count the owner alive: waiters then run into their timeout, as without a line.
  if (::fcntl(fd_, F_OFD_GETLK, &byte) != 0) return true;
  return byte.l_type != F_UNLCK;
}

void ProcessLine::wait(std::uint32_t seen, SteadyClock::time_point until) {
  // A shared (not FUTEX_PRIVATE) futex: the word is in a shared mapping, woken from any process.
  const timespec at = to_timespec(until);
  ::syscall(SYS_futex, &line_->moved, FUTEX_WAIT_BITSET, seen, &at, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void ProcessLine::pass_on(std::uint64_t from) {
  for (std::uint64_t t = from;; ++t) {
    std::uint64_t expected = t;
    if (!serving().compare_exchange_strong(expected, t + 1)) return;
    moved().fetch_add(1);
    ::syscall(SYS_futex, &line_->moved, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    // Ticket t+1 is in the line (its owner sees `serving` and holds), not taken yet (its taker
    // finds serving == its ticket), or left: then on to the next.
    const std::uint64_t word = slot(t + 1).load();
    if (state_of(word) != kLeft || ticket_of(word) != t + 1) return;
  }
}

void ProcessLine::pass_over_gone(std::uint64_t ticket) {
  std::uint64_t word = slot(ticket).load();
  if (ticket_of(word) != ticket || state_of(word) == kEmpty) return;  // not taken yet
  // Left, but the leaver died before passing the turn on (or is passing it on now: one of us will).
  if (state_of(word) == kLeft) return pass_on(ticket);
  if (alive(owner_of(word))) return;
  if (slot(ticket).compare_exchange_strong(word, slot_word(ticket, owner_of(word), kLeft))) pass_on(ticket);
}

bool ProcessLine::take(SteadyClock::time_point deadline) {
  // Join the line: claim the slot of ticket `next`, then move `next` on. A taker that claimed its
  // slot and died before moving `next` is helped along by the next taker, so every ticket below
  // `next` has its slot filled in.
  auto full_check_at = SteadyClock::now() + kCheckEvery;
  for (;;) {
    std::uint64_t t = next().load();
    std::uint64_t word = slot(t).load();
    if (state_of(word) != kEmpty && ticket_of(word) == t) {
      next().compare_exchange_strong(t, t + 1);
      continue;
    }
    // A slot of a later lap: `t` was read before others took tickets past it; read `next` again.
    if (word != 0 && ticket_of(word) > t) continue;
    // The slot still holds ticket t - kSlots until that one is served: the line is full. (The
    // turn may be past t: a dead taker's claimed ticket was skipped before `next` moved on.)
    // Nobody in a full line holds a ticket to look after a dead holder: those outside do.
    const std::uint64_t s = serving().load();
    if (t >= s + kSlots) {
      const auto now = SteadyClock::now();
      if (now >= deadline) return false;
      if (now >= full_check_at) {
        pass_over_gone(s);
        full_check_at = now + kCheckEvery;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (slot(t).compare_exchange_strong(word, slot_word(t, me_, kIn))) {
      ticket_ = t;
      next().compare_exchange_strong(t, t + 1);
      break;
    }
  }
  // Wait to be served, looking now and then whether the ticket being served is a dead process's.
  auto check_at = SteadyClock::now() + kCheckEvery;
  for (;;) {
    const std::uint32_t seen = moved().load();
    const std::uint64_t s = serving().load();
    if (s == ticket_) return true;
    const auto now = SteadyClock::now();
    if (s > ticket_ || now >= deadline) {
      // Out of time: leave the line. Whoever passes the turn on skips a ticket that left; if the
      // turn came to this one meanwhile, pass it on here (one of the two does, never both).
      if (s > ticket_) log().warn("write turn: ticket {} was passed over while its process waited", ticket_);
      leave(ticket_);
      if (serving().load() == ticket_) pass_on(ticket_);
      return false;
    }
    if (now >= check_at) {
      pass_over_gone(s);
      check_at = now + kCheckEvery;
      continue;
    }
    wait(seen, std::min(deadline, check_at));
  }
}

std::shared_ptr<WriteTurns> WriteTurns::of(const std::string& path) {
  static std::mutex registry_mutex;
  static std::map<std::string, std::weak_ptr<WriteTurns>> registry;
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard lock(registry_mutex);
  std::weak_ptr<WriteTurns>& entry = registry[key];
  std::shared_ptr<WriteTurns> turns = entry.lock();
  if (!turns) {
    turns = std::make_shared<WriteTurns>(key);  // beside the file SQLite opens (a symlink resolved)
    entry = turns;
  }
  return turns;
}

WriteTurns::WriteTurns(const std::string& path) {
  // An in-memory database is this process's alone; a "file:" URI names no plain path to put the
  // line beside. Without the line, writers of other processes meet SQLite's busy handler, which
  // still bounds their wait by the busy timeout (fair it is not).
  if (!path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0) processes_ = ProcessLine::open(path);
}

WriteTurns::~WriteTurns() = default;

bool WriteTurns::take(std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  if (!take_here(deadline)) return false;
  if (!processes_ || !processes_->usable() || processes_->take(deadline)) return true;
  give_back_here();
  return false;
}

void WriteTurns::give_back() {
  if (processes_ && processes_->usable()) processes_->give_back();
  give_back_here();
}

bool WriteTurns::take_here(SteadyClock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!held_ && waiters_.empty()) {
    held_ = true;
    return true;
  }
  const auto me = waiters_.insert(waiters_.end(), false);
  const bool handed = handed_.wait_until(lock, deadline, [&] { return *me; });
  waiters_.erase(me);  // handed: the turn is ours (held_ stayed true); not: out of the line
  return handed;
}

void WriteTurns::give_back_here() {
  std::lock_guard lock(mutex_);
  for (bool& waiter : waiters_)
    if (!waiter) {
      waiter = true;  // handed over: held_ stays true
      handed_.notify_all();
      return;
    }
  held_ = false;
}

WriteTurn::WriteTurn(WriteTurns& turns, std::chrono::milliseconds timeout)
    : turns_(turns), deadline_(SteadyClock::now() + timeout) {
  if (!turns_.take(timeout))
    throw sqlite_error(SQLITE_BUSY, "database is locked (other writers of the file held it past the busy timeout)");
  held_ = true;
}

std::chrono::milliseconds WriteTurn::left() const {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - SteadyClock::now()));
}

void WriteTurn::release() noexcept {
  if (held_) turns_.give_back();
  held_ = false;
}

}  // namespace forgeyard::detail
