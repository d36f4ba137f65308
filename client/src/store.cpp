// forgeyard::open: the URL decides the backend.
#include "forgeyard/store.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "backends.hpp"
#include "core/errors.hpp"
#include "forgeyard/error.hpp"

namespace forgeyard {

std::string default_sqlite_path() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] == '/')
    return std::string(xdg) + "/forgeyard/forgeyard.db";
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') {
    const passwd* pw = getpwuid(getuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  if (home == nullptr || home[0] == '\0')
    throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::invalid_parameter,
                "no XDG_DATA_HOME or HOME to place the default store in");
  return std::string(home) + "/.local/share/forgeyard/forgeyard.db";
}

std::unique_ptr<Store> open(std::string_view url, const StoreOptions& options) {
  if (url.empty()) return detail::open_sqlite(default_sqlite_path(), options);
  if (url.starts_with("postgresql://") || url.starts_with("postgres://"))
    return detail::open_postgres(std::string(url), options);
  if (url.starts_with("sqlite://")) {
    std::string path(url.substr(9));
    if (path.empty() || path[0] != '/')
      throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::invalid_parameter,
                  "a SQLite URL needs an absolute path: sqlite:///path/to/store.db");
    return detail::open_sqlite(path, options);
  }
  throw Error(ErrorKind::InvalidArgument, fy::core::sqlstate::invalid_parameter,
              "unknown store URL scheme (use postgresql://... or sqlite:///path): " + std::string(url.substr(0, 16)));
}

}  // namespace forgeyard
