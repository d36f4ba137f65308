// The PostgreSQL side of the application's migrations and daemon registry: the app_* functions
// of the extension, and a transaction-scoped advisory lock for the runner.
#pragma once

#include <functional>
#include <memory>

#include "app_schema.hpp"
#include "pool.hpp"
#include "postgres/connection.hpp"

namespace forgeyard::detail {

std::unique_ptr<AppSchemaBackend> make_pg_app_schema(Pool<PgConnection>& pool,
                                                     std::function<void(PgConnection&)> apply_clock);

}  // namespace forgeyard::detail
