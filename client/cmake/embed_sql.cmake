# Writes OUTPUT: a C++ source returning the PL/pgSQL edition's scripts that sql/generate.py wrote
# into DIR (DIR/plpgsql/*.sql) as forgeyard::detail::EditionScripts, for `storage install`.
file(GLOB files RELATIVE "${DIR}/plpgsql" "${DIR}/plpgsql/*.sql")
list(SORT files)
set(body "")
foreach(name IN LISTS files)
  file(READ "${DIR}/plpgsql/${name}" sql)
  string(FIND "${sql}" ")fy_sql\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${name} contains the raw string delimiter )fy_sql\"")
  endif()
  string(APPEND body "      {\"${name}\", R\"fy_sql(${sql})fy_sql\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from sql/src and extension/*.sql by sql/generate.py and client/cmake/embed_sql.cmake. Do not edit.
#include \"ops/install_scripts.hpp\"

namespace forgeyard::detail {

std::vector<EditionScript> embedded_plpgsql_scripts() {
  return {
${body}  };
}

}  // namespace forgeyard::detail
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
