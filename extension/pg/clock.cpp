#include "pg/clock.hpp"

namespace fy::pg {

namespace {
char* now_override = nullptr;
}

void define_settings() {
  DefineCustomStringVariable(
      "forgeyard.now_override",
      "Replaces the clock of forgeyard.now() with a fixed timestamptz (empty: the real clock).",
      "For deterministic tests only. Superuser-only; parsed at each call.", &now_override, "",
      PGC_SUSET, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("forgeyard");
}

TimestampTz now() {
  const char* text = now_override;
  if (text == nullptr || text[0] == '\0') return GetCurrentTimestamp();
  return guard([&] {
    return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(text),
                                                   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
  });
}

}  // namespace fy::pg
