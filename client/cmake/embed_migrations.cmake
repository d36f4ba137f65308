# Writes OUTPUT: a C++ source returning the SQL files in DIR as forgeyard::detail::Migration values.
file(GLOB files RELATIVE "${DIR}" "${DIR}/*.sql")
list(SORT files)
set(body "")
foreach(name IN LISTS files)
  file(READ "${DIR}/${name}" sql)
  string(SUBSTRING "${name}" 0 4 version)
  string(REGEX REPLACE "^0+([0-9])" "\\1" version "${version}")
  string(APPEND body "      {${version}, \"${name}\", R\"fy_sql(${sql})fy_sql\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from migrations/sqlite by client/cmake/embed_migrations.cmake. Do not edit.
#include \"sqlite/migrations.hpp\"

namespace forgeyard::detail {

std::vector<Migration> embedded_sqlite_migrations() {
  return {
${body}  };
}

}  // namespace forgeyard::detail
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
