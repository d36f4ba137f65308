#include "pg/probes.hpp"

namespace fy::pg::probe {

namespace {
void left_behind(void*) {
  errcontext("an error context frame left behind by forgeyard.boundary_break_stacks");
}
ErrorContextCallback orphan{};  // static storage: it must outlive the probe's frame
}  // namespace

void break_error_stacks(bool exception_stack, bool context_stack) noexcept {
  if (exception_stack) PG_exception_stack = nullptr;
  if (context_stack) {
    orphan.previous = error_context_stack;
    orphan.callback = left_behind;
    orphan.arg = nullptr;
    error_context_stack = &orphan;
  }
}

}  // namespace fy::pg::probe
