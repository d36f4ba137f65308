#include "pg/clock.hpp"

extern "C" {
PG_MODULE_MAGIC;
void _PG_init(void);
void _PG_init(void) {
  fy::pg::define_settings();
}
}
