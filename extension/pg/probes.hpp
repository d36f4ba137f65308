// The PostgreSQL halves of the boundary probes in extension/boundary.cpp (regression suite only).
#pragma once

#include "pg/guard.hpp"

namespace fy::pg::probe {

// Leaves PG_exception_stack (null: the next ERROR would be promoted to FATAL) and/or
// error_context_stack (an extra frame) changed, as a broken body would; invoke() must notice.
void break_error_stacks(bool exception_stack, bool context_stack) noexcept;

}  // namespace fy::pg::probe
