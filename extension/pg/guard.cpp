#include "pg/guard.hpp"

extern "C" {
#include "mb/pg_wchar.h"
}

#include <algorithm>
#include <cstring>
#include <new>

namespace fy::pg {

namespace {
// The memory context current when the innermost invoke() was entered. A PgError's ErrorData is
// copied there: it outlives every context the C++ body creates and deletes (pg::ScratchContext).
MemoryContext error_context = nullptr;
}  // namespace

const char* PgError::what() const noexcept {
  return data_ != nullptr && data_->message != nullptr ? data_->message : "PostgreSQL error";
}

void throw_pg_error(MemoryContext context) {
  // Called right after PG_CATCH: copy the error out of ErrorContext, then clear the error stack.
  MemoryContextSwitchTo(error_context != nullptr ? error_context : context);
  ErrorData* data = CopyErrorData();
  FlushErrorState();
  MemoryContextSwitchTo(context);
  throw PgError(data);
}

namespace {
// Copies without allocating: palloc could raise while a C++ exception is being handled. A text
// longer than the buffer is cut at a character boundary of the database encoding, never inside one.
void copy_text(char* out, std::size_t size, const char* in) {
  if (in == nullptr) in = "";
  const std::size_t length = std::strlen(in);
  std::size_t n = length;
  if (n > size - 1) {
    const int clip = static_cast<int>(std::min<std::size_t>(length, 1 << 30));
    n = static_cast<std::size_t>(pg_mbcliplen(in, clip, static_cast<int>(size - 1)));
  }
  std::memcpy(out, in, n);
  out[n] = '\0';
}

// A SQLSTATE PostgreSQL can carry: five characters of 0-9 A-Z, and not class 00 (success).
// Anything else would be packed by MAKE_SQLSTATE into a garbage code.
bool is_error_sqlstate(const std::string& s) {
  if (s.size() != 5) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) return false;
  return !(s[0] == '0' && s[1] == '0');
}
}  // namespace

Datum invoke(FunctionCallInfo fcinfo, Datum (*impl)(FunctionCallInfo)) {
  // What the body must leave as it found it. A body that returns (or throws) with either changed
  // would leave the next ERROR to longjmp into a dead frame or call a dead callback.
  sigjmp_buf* const exception_stack = PG_exception_stack;
  ErrorContextCallback* const context_stack = error_context_stack;
  const MemoryContext outer_error_context = error_context;
  error_context = CurrentMemoryContext;
  ErrorData* pg_error = nullptr;
  int code = ERRCODE_INTERNAL_ERROR;
  char message[1024];
  char detail[1024];
  message[0] = '\0';
  detail[0] = '\0';
  bool returned = false;
  Datum result = 0;
  try {
    result = impl(fcinfo);
    returned = true;
  } catch (const PgError& e) {
    pg_error = e.data();
  } catch (const core::Error& e) {
    const std::string& s = e.sqlstate();
    if (is_error_sqlstate(s)) code = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
    copy_text(message, sizeof message, e.what());
    copy_text(detail, sizeof detail, e.detail().c_str());
  } catch (const std::bad_alloc&) {
    code = ERRCODE_OUT_OF_MEMORY;
    copy_text(message, sizeof message, "out of memory in forgeyard");
  } catch (const std::exception& e) {
    copy_text(message, sizeof message, e.what());
  } catch (...) {
    copy_text(message, sizeof message, "unknown C++ exception in forgeyard");
  }
  // The C++ stack is unwound: it is safe to longjmp from here.
  error_context = outer_error_context;
  const bool jump_changed = PG_exception_stack != exception_stack;
  const bool context_changed = error_context_stack != context_stack;
  if (jump_changed || context_changed) {
    PG_exception_stack = exception_stack;
    error_context_stack = context_stack;
    const char* lost = pg_error != nullptr && pg_error->message != nullptr ? pg_error->message : message;
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                    errmsg_internal("forgeyard: a function body returned with PostgreSQL's %s changed",
                                    jump_changed && context_changed ? "exception stack and error context stack"
                                    : jump_changed                  ? "exception stack (PG_exception_stack)"
                                                                    : "error context stack (error_context_stack)"),
                    lost[0] != '\0' ? errdetail_internal("the error it raised: %s", lost) : 0));
  }
  if (returned) return result;
  if (pg_error != nullptr) ReThrowError(pg_error);
  ereport(ERROR,
          (errcode(code), errmsg_internal("%s", message), detail[0] != '\0' ? errdetail_internal("%s", detail) : 0));
  pg_unreachable();
}

}  // namespace fy::pg
