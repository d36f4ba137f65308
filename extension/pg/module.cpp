#include "pg/clock.hpp"

extern "C" {
PG_MODULE_MAGIC;
// PostgreSQL calls a module's _PG_init by that reserved name.
void _PG_init(void);   // NOLINT(bugprone-reserved-identifier)
void _PG_init(void) {  // NOLINT(bugprone-reserved-identifier)
  fy::pg::define_settings();
}
}
