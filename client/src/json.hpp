// The little JSON the PostgreSQL backend needs: Fields out as an object, values back by type.
#pragma once

#include <string>

#include "forgeyard/versioned_rows.hpp"

namespace forgeyard::detail {

std::string to_json(const Fields& fields);
// A value read back as (jsonb_typeof, its text); an unknown type is Corruption.
Value value_from_json(const std::string& type, const std::string& text);

}  // namespace forgeyard::detail
