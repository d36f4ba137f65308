// The SQLite store holds every tenant's data: its file, its -wal and -shm files and its lock file
// are created owner-only (0600), whatever the umask lets through.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "forgeyard/store.hpp"

namespace fs = std::filesystem;

namespace {
unsigned mode_of(const fs::path& p) {
  struct stat st {};
  BOOST_REQUIRE_MESSAGE(::stat(p.c_str(), &st) == 0, "missing " << p.string());
  return st.st_mode & 0777;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(sqlite_permissions)

BOOST_AUTO_TEST_CASE(store_wal_shm_lock_and_turns_files_are_owner_only) {
  std::string pattern = (fs::temp_directory_path() / "forgeyard-perm.XXXXXX").string();
  BOOST_REQUIRE(mkdtemp(pattern.data()) != nullptr);
  const fs::path dir = pattern;
  const fs::path db = dir / "store.db";
  mode_t old_umask = ::umask(022);  // the common default, which lets SQLite's 0644 through
  {
    auto store = forgeyard::open("sqlite://" + db.string());
    BOOST_TEST(store->status().healthy);
    BOOST_TEST(mode_of(db) == 0600u);
    BOOST_TEST(mode_of(fs::path(db.string() + "-wal")) == 0600u);
    BOOST_TEST(mode_of(fs::path(db.string() + "-shm")) == 0600u);
  }
  // The lock file of exclusive work (opening a store takes it to migrate).
  BOOST_TEST(mode_of(fs::path(db.string() + ".lock")) == 0600u);
  // The line of the writers of every process (write_turns.hpp).
  BOOST_TEST(mode_of(fs::path(db.string() + ".turns")) == 0600u);
  ::umask(old_umask);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
