// Compare-and-set by entity version (docs/sql-api.md#compare-and-set).
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace forgeyard {

// A column value as both backends can carry it. On PostgreSQL, JSON objects and arrays read
// back as their JSON text; on SQLite, booleans are stored as integers.
using Value = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string>;
// Column name -> value.
using Fields = std::map<std::string, Value>;

struct VersionedRow {
  Fields values;
  std::int64_t version = 0;  // the expected version of the next update
};

class FORGEYARD_API VersionedRows {
 public:
  virtual ~VersionedRows() = default;
  // Puts a table with `entity_version bigint NOT NULL DEFAULT 1` under version control: every
  // UPDATE must then move entity_version from expected to expected + 1, from any path.
  virtual void enable(std::string_view table) = 0;
  // Updates the row named by `key` (its primary key or unique columns, tenant_id included
  // where the table has one) from `expected`; returns the new version. Conflict (FY002) if the
  // row is at another version; NotFound (P0002) if no row matches.
  virtual std::int64_t update(std::string_view table, const Fields& key, std::int64_t expected,
                              const Fields& changes) = 0;
  // The row named by `key` with its version, or nullopt.
  virtual std::optional<VersionedRow> get(std::string_view table, const Fields& key, ReadClass read = {}) = 0;
};

}  // namespace forgeyard
