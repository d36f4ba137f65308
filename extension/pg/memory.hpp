// Short-lived memory contexts per unit of work (docs/architecture.md, "The boundary"), and the
// peak-memory sampler the regression suite measures them with.
#pragma once

#include <cstdint>

#include "pg/guard.hpp"

namespace fy::pg {

// A child of the current memory context, switched into for as long as it lives. A loop over
// pages or rows calls reset() at the start of each one, so what one unit palloc'd goes with it
// and the loop's memory stays that of one unit however long the input. The destructor switches
// back to the context current at construction and deletes the child; when a PostgreSQL error
// unwinds through guard() both contexts are still alive, so that is safe. If the parent was
// deleted first (e.g. by SPI_finish), the child went with it and the destructor does nothing.
// Values needed after the next reset() must be copied out (into C++ values) first.
class ScratchContext {
 public:
  ScratchContext();
  ~ScratchContext();
  ScratchContext(const ScratchContext&) = delete;
  ScratchContext& operator=(const ScratchContext&) = delete;

  // Frees everything allocated in the context and switches into it again.
  void reset();

 private:
  static void on_reset(void* self) noexcept;
  void watch() noexcept;

  MemoryContext context_ = nullptr;
  MemoryContext previous_ = nullptr;
  MemoryContextCallback callback_{};
  bool resetting_ = false;
};

// While alive, samples the backend's memory (the sum pg_backend_memory_contexts shows: every
// context under TopMemoryContext) at the end of every statement the executor runs, nested ones
// included. peak_growth() is the largest sample minus the sample at construction. For the
// regression suite's probes only: one at a time.
class MemoryPeak {
 public:
  MemoryPeak();
  ~MemoryPeak();
  MemoryPeak(const MemoryPeak&) = delete;
  MemoryPeak& operator=(const MemoryPeak&) = delete;

  std::int64_t peak_growth() const;
};

}  // namespace fy::pg
