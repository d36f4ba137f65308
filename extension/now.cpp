// forgeyard.now(): the clock every function and view uses.
#include "pg/clock.hpp"

FY_FUNCTION(fy_now) {
  return TimestampTzGetDatum(fy::pg::now());
}
