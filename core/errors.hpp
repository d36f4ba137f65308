// The SQLSTATEs the shared core raises, its error type, and the table of forgeyard's own FY codes
// (docs/errors.md lists the same codes; a unit test keeps the two in step).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fy::core {

// SQLSTATEs of docs/errors.md that the shared logic and the SQLite shim raise. Five characters each.
namespace sqlstate {
inline constexpr char stale_fence[] = "FY001";
inline constexpr char version_conflict[] = "FY002";
inline constexpr char idempotency_in_progress[] = "FY010";
inline constexpr char idempotency_mismatch[] = "FY011";
inline constexpr char queue_full[] = "FY020";
inline constexpr char payload_too_large[] = "FY021";
inline constexpr char append_only[] = "FY030";
inline constexpr char tenant_denied[] = "FY040";
inline constexpr char schema_unsupported[] = "FY050";
inline constexpr char nondeterminism[] = "FY060";
inline constexpr char serialization_failure[] = "40001";
inline constexpr char string_too_long[] = "22001";
inline constexpr char null_value[] = "22004";
inline constexpr char invalid_parameter[] = "22023";
inline constexpr char invalid_text_representation[] = "22P02";
inline constexpr char insufficient_privilege[] = "42501";
inline constexpr char undefined_column[] = "42703";
inline constexpr char undefined_object[] = "42704";
inline constexpr char duplicate_object[] = "42710";
inline constexpr char undefined_table[] = "42P01";
inline constexpr char feature_not_supported[] = "0A000";
inline constexpr char lock_not_available[] = "55P03";
inline constexpr char io_error[] = "58030";
inline constexpr char no_data_found[] = "P0002";
inline constexpr char internal_error[] = "XX000";
inline constexpr char data_corrupted[] = "XX001";
}  // namespace sqlstate

// forgeyard's own codes (class FY), each with the name it has in sqlstate:: above. A new FY code
// goes here and into docs/errors.md#sqlstate-to-error-kind together.
struct FyCode {
  const char* code;
  const char* name;
};
inline constexpr FyCode fy_codes[] = {
    {sqlstate::stale_fence, "stale_fence"},
    {sqlstate::version_conflict, "version_conflict"},
    {sqlstate::idempotency_in_progress, "idempotency_in_progress"},
    {sqlstate::idempotency_mismatch, "idempotency_mismatch"},
    {sqlstate::queue_full, "queue_full"},
    {sqlstate::payload_too_large, "payload_too_large"},
    {sqlstate::append_only, "append_only"},
    {sqlstate::tenant_denied, "tenant_denied"},
    {sqlstate::schema_unsupported, "schema_unsupported"},
    {sqlstate::nondeterminism, "nondeterminism"},
};

// An error with a SQLSTATE. The extension re-raises it as ereport(ERROR); the shim turns it
// into the client's forgeyard::Error. Both keep the code, message and detail unchanged.
class Error : public std::runtime_error {
 public:
  Error(std::string_view code, const std::string& message, std::string detail = {})
      : std::runtime_error(message), detail_(std::move(detail)) {
    code_.assign(code.substr(0, 5));
  }
  const std::string& sqlstate() const noexcept { return code_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string code_;
  std::string detail_;
};

// Bad input to the shared logic: 22023 with the message.
[[noreturn]] inline void invalid_parameter(const std::string& message) {
  throw Error(sqlstate::invalid_parameter, message);
}

}  // namespace fy::core
