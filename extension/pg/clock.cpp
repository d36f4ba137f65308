#include "pg/clock.hpp"

namespace fy::pg {

namespace {
char* now_override = nullptr;
}

void define_settings() {
  DefineCustomStringVariable("forgeyard.now_override",
                             "Replaces the clock of forgeyard.now() with a fixed timestamptz (empty: the real clock).",
                             "For deterministic tests only. Superuser-only; parsed at each call.", &now_override, "",
                             PGC_SUSET, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("forgeyard");
}

TimestampTz now() {
  const char* text = now_override;
  if (text == nullptr || text[0] == '\0') return GetCurrentTimestamp();
  const TimestampTz t = guard([&]() noexcept {
    return DatumGetTimestampTz(
        DirectFunctionCall3(timestamptz_in, CStringGetDatum(text), ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
  });
  // 'infinity' and the last years of the range would overflow now + duration and the epoch
  // (microseconds since 1970): a bad value, like one that does not parse.
  constexpr TimestampTz latest = END_TIMESTAMP - 36525 * USECS_PER_DAY;
  if (TIMESTAMP_NOT_FINITE(t) || t > latest)
    throw core::Error(core::sqlstate::invalid_parameter, "forgeyard.now_override is out of range",
                      "it must be a finite timestamptz at least 100 years before the end of the timestamptz range");
  return t;
}

}  // namespace fy::pg
