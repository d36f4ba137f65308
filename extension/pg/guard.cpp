#include "pg/guard.hpp"

#include <cstring>
#include <new>

namespace fy::pg {

const char* PgError::what() const noexcept {
  return data_ != nullptr && data_->message != nullptr ? data_->message : "PostgreSQL error";
}

void throw_pg_error(MemoryContext context) {
  // Called right after PG_CATCH: copy the error out of ErrorContext, then clear the error stack.
  MemoryContextSwitchTo(context);
  ErrorData* data = CopyErrorData();
  FlushErrorState();
  throw PgError(data);
}

namespace {
// Copies without allocating: palloc could raise while a C++ exception is being handled.
void copy_text(char* out, std::size_t size, const char* in) {
  if (in == nullptr) in = "";
  std::strncpy(out, in, size - 1);
  out[size - 1] = '\0';
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
  ErrorData* pg_error = nullptr;
  int code = ERRCODE_INTERNAL_ERROR;
  char message[1024];
  char detail[1024];
  detail[0] = '\0';
  try {
    return impl(fcinfo);
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
  if (pg_error != nullptr) ReThrowError(pg_error);
  ereport(ERROR, (errcode(code), errmsg_internal("%s", message),
                  detail[0] != '\0' ? errdetail_internal("%s", detail) : 0));
  pg_unreachable();
}

}  // namespace fy::pg
