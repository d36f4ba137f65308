#!/usr/bin/env bash
# Keeps the C++ / PostgreSQL boundary checkable (docs/architecture.md, "The boundary"):
#  1. only extension/pg/ touches PostgreSQL's raw error, SPI and memory APIs;
#  2. every SQL-callable C function is declared with FY_FUNCTION (routed through invoke());
#  3. core/ includes no PostgreSQL, libpq or SQLite header;
#  4. the client's public headers include neither libpq-fe.h nor sqlite3.h;
#  5. no PostgreSQL error is caught to carry on (a PG_CATCH re-throws or rolls back a subtransaction).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "boundary: $*"; status=1; }

raw='\b(ereport|elog|PG_TRY|PG_CATCH|PG_RE_THROW|ReThrowError|SPI_[a-z_]+|palloc|pfree|MemoryContextSwitchTo|DirectFunctionCall[0-9]|InitMaterializedSRF|tuplestore_[a-z_]+|PG_GETARG_[A-Z_]+)\b'
# Code lines only: grep -n prefixes "N:", so a comment line reads "N:   // ...".
code_hits() { grep -nE "$1" "${@:2}" | grep -vE '^([^:]+:)?[0-9]+:\s*(//|/?\*)'; }
hits=$(code_hits "$raw" extension/*.cpp extension/*.hpp)
[ -n "$hits" ] && fail "raw PostgreSQL API outside extension/pg/:"$'\n'"$hits"

grep -rn 'PG_FUNCTION_INFO_V1' extension --include='*.cpp' --include='*.hpp' | grep -v 'extension/pg/guard.hpp' \
  && fail "PG_FUNCTION_INFO_V1 outside FY_FUNCTION"
grep -rnE '^\s*Datum\s+\w+\s*\(PG_FUNCTION_ARGS\)' extension --include='*.cpp' && fail "a C entry point not declared with FY_FUNCTION"

grep -rnE '#include\s*[<"](postgres|fmgr|libpq-fe|sqlite3|executor/|utils/|catalog/)' core/ \
  && fail "core/ includes a PostgreSQL, libpq or SQLite header"
grep -rnE '#include\s*[<"](libpq-fe|sqlite3)\.h' client/include && fail "a public header includes libpq-fe.h or sqlite3.h"

# No PostgreSQL error is caught to carry on (docs/architecture.md, "The boundary"): outside
# guard.hpp, a PG_CATCH block re-throws or rolls back an internal subtransaction, and only
# invoke() (guard.cpp) catches a PgError.
caught=$(for f in extension/pg/*.cpp extension/pg/*.hpp; do
  [ "$f" = extension/pg/guard.hpp ] && continue
  awk -v f="$f" '/PG_CATCH\(\)/ { open = NR; ok = 0 }
    open && /PG_RE_THROW|ReThrowError|RollbackAndReleaseCurrentSubTransaction/ { ok = 1 }
    open && /PG_END_TRY\(\)/ { if (!ok) print f ":" open; open = 0 }' "$f"
done; grep -rnE 'catch\s*\(\s*(const\s+)?((fy::)?pg::)?PgError' extension --include='*.cpp' --include='*.hpp' \
  | grep -v '^extension/pg/guard.cpp:')
[ -n "$caught" ] && fail "a PostgreSQL error caught to carry on (PG_CATCH without a re-throw or a subtransaction rollback, or a catch of PgError outside invoke()): $caught"

# Every C symbol named in the SQL scripts is defined with FY_FUNCTION.
for sym in $(grep -ohE "'fy_[a-z_]+'" sql/*.sql | tr -d "'" | sort -u); do
  grep -q "FY_FUNCTION($sym)" extension/*.cpp || fail "$sym is in sql/ but not defined with FY_FUNCTION"
done
[ $status -eq 0 ] && echo "boundary: ok"
exit $status
