// Writers of one SQLite file take turns (write_turns.hpp).
#include "sqlite/write_turns.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sqlite3.h>
#include <sys/file.h>
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

timespec to_timespec(SteadyClock::time_point at) {
  // steady_clock is CLOCK_MONOTONIC, the clock FUTEX_WAIT_BITSET measures absolute times on.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

}  // namespace

// The line of the processes on one file (the layout above). Only the holder of its process's
// turn calls take() and give_back(), so a process has at most one ticket at a time. Like a SQLite
// connection, it does not cross fork(): a child that did not exec would share the parent's number.
class ProcessLine {
 public:
  // Null when the file cannot be opened, created or used; the reason is logged.
  static std::unique_ptr<ProcessLine> open(const std::string& path);
  ~ProcessLine() {
    ::munmap(line_, sizeof(Layout));
    ::close(fd_);  // also drops this process's number
  }

  bool take(SteadyClock::time_point deadline);
  void give_back() {
    slot(ticket_).store(slot_word(ticket_, me_, kLeft));
    pass_on(ticket_);
  }

 private:
  ProcessLine(int fd, Layout* line) : fd_(fd), line_(line) {}
  bool register_process();

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

  int fd_;
  Layout* line_;
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
    log().debug("write turns of {} are this process's only: {} {}", path, file, why);
    ::close(fd);
    return nullptr;
  };
  // The first process to open the file lays it out; the others wait for that under the flock.
  while (::flock(fd, LOCK_EX) != 0)
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
  std::unique_ptr<ProcessLine> line(new ProcessLine(fd, static_cast<Layout*>(map)));
  const bool registered = line->register_process();
  ::flock(fd, LOCK_UN);
  if (!registered) {
    log().debug("write turns of {} are this process's only: {} processes have it open", path, kMaxProcesses);
    return nullptr;
  }
  return line;
}

bool ProcessLine::register_process() {
  for (std::uint64_t p = 0; p < kMaxProcesses; ++p) {
    struct flock byte {};
    byte.l_type = F_WRLCK;
    byte.l_whence = SEEK_SET;
    byte.l_start = kProcessBytes + static_cast<off_t>(p);
    byte.l_len = 1;
    if (::fcntl(fd_, F_OFD_SETLK, &byte) != 0) continue;
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
  return false;
}

bool ProcessLine::alive(std::uint64_t owner) {
  if (owner == me_) return false;  // this process's own ticket is not the one being asked about
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
  for (;;) {
    std::uint64_t t = next().load();
    std::uint64_t word = slot(t).load();
    if (state_of(word) != kEmpty && ticket_of(word) == t) {
      next().compare_exchange_strong(t, t + 1);
      continue;
    }
    // The slot still holds ticket t - kSlots until that one is served: the line is full. (The
    // turn may be past t: a dead taker's claimed ticket was skipped before `next` moved on.)
    if (t >= serving().load() + kSlots) {
      if (SteadyClock::now() >= deadline) return false;
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
      slot(ticket_).store(slot_word(ticket_, me_, kLeft));
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
    turns = std::make_shared<WriteTurns>(path);
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
  if (!processes_ || processes_->take(deadline)) return true;
  give_back_here();
  return false;
}

void WriteTurns::give_back() {
  if (processes_) processes_->give_back();
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

WriteTurn::WriteTurn(WriteTurns& turns, std::chrono::milliseconds timeout) : turns_(turns) {
  if (!turns_.take(timeout))
    throw sqlite_error(SQLITE_BUSY, "database is locked (other writers of the file held it past the busy timeout)");
  held_ = true;
}

void WriteTurn::release() noexcept {
  if (held_) turns_.give_back();
  held_ = false;
}

}  // namespace forgeyard::detail
