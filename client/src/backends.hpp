// The two backends behind forgeyard::open().
#pragma once

#include <memory>
#include <string>

#include "forgeyard/store.hpp"

namespace forgeyard::detail {

std::unique_ptr<Store> open_postgres(const std::string& url, const StoreOptions& options);
std::unique_ptr<Store> open_sqlite(const std::string& path, const StoreOptions& options);

}  // namespace forgeyard::detail
