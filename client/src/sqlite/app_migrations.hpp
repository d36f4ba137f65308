// The SQLite side of the application's migrations and daemon registry: tables of
// migrations/sqlite/0005_app_migrations.sql; the runner holds the store's exclusive file lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "app_schema.hpp"
#include "pool.hpp"
#include "sqlite/db.hpp"

namespace forgeyard::detail {

std::unique_ptr<AppSchemaBackend> make_sqlite_app_schema(Pool<Db>& pool, std::string lock_path,
                                                         std::function<std::int64_t()> now_usecs);

}  // namespace forgeyard::detail
