#include "pg/memory.hpp"

extern "C" {
#include "executor/executor.h"
}

#include <algorithm>

namespace fy::pg {

ScratchContext::ScratchContext() {
  context_ = guard([]() noexcept {
    return AllocSetContextCreate(CurrentMemoryContext, "forgeyard scratch", ALLOCSET_DEFAULT_SIZES);
  });
  watch();
  previous_ = MemoryContextSwitchTo(context_);
}

ScratchContext::~ScratchContext() {
  if (context_ == nullptr) return;  // deleted with its parent
  MemoryContextSwitchTo(previous_);
  resetting_ = true;
  MemoryContextDelete(context_);
}

void ScratchContext::reset() {
  if (context_ == nullptr) throw core::Error(core::sqlstate::internal_error, "a scratch context outlived its parent");
  resetting_ = true;
  guard([&]() noexcept { MemoryContextReset(context_); });
  resetting_ = false;
  watch();  // reset callbacks fire once
  MemoryContextSwitchTo(context_);
}

// A reset callback fires when the context is reset or deleted: by us, or with its parent.
void ScratchContext::watch() noexcept {
  callback_.func = on_reset;
  callback_.arg = this;
  MemoryContextRegisterResetCallback(context_, &callback_);
}

void ScratchContext::on_reset(void* self) noexcept {
  auto* scratch = static_cast<ScratchContext*>(self);
  if (!scratch->resetting_) scratch->context_ = nullptr;
}

namespace {
ExecutorEnd_hook_type previous_executor_end = nullptr;
bool sampling = false;
std::int64_t baseline = 0;
std::int64_t peak = 0;

std::int64_t allocated() noexcept {
  return static_cast<std::int64_t>(MemoryContextMemAllocated(TopMemoryContext, true));
}

// Before the executor frees the statement's own memory, so that it is counted too.
void sample_at_end(QueryDesc* query) {
  peak = std::max(peak, allocated());
  if (previous_executor_end != nullptr)
    previous_executor_end(query);
  else
    standard_ExecutorEnd(query);
}
}  // namespace

MemoryPeak::MemoryPeak() {
  if (sampling) throw core::Error(core::sqlstate::internal_error, "a memory sampler is already running");
  sampling = true;
  previous_executor_end = ExecutorEnd_hook;
  ExecutorEnd_hook = sample_at_end;
  baseline = peak = allocated();
}

MemoryPeak::~MemoryPeak() {
  ExecutorEnd_hook = previous_executor_end;
  previous_executor_end = nullptr;
  sampling = false;
}

std::int64_t MemoryPeak::peak_growth() const {
  return std::max(peak, allocated()) - baseline;
}

}  // namespace fy::pg
