# PGXS build of the forgeyard extension: extension/ + core/ -> forgeyard.so, sql/ -> share/extension.
MODULE_big = forgeyard
OBJS = $(patsubst %.cpp,%.o,$(sort $(wildcard core/*.cpp extension/*.cpp extension/pg/*.cpp)))
MODULEDIR = extension
# sql/ holds the scripts of past versions as they were released; the current version's full script
# and its upgrade steps are generated from sql/src/ (and, for the PL/pgSQL edition, the bodies in
# extension/*.sql) by sql/generate.py into sql/gen/.
FY_VERSION := $(shell cat VERSION)
DATA = extension/forgeyard.control $(sort $(wildcard sql/forgeyard--*.sql))
DATA_built = sql/gen/cpp/forgeyard--$(FY_VERSION).sql \
	$(patsubst sql/src/%,sql/gen/cpp/%,$(sort $(wildcard sql/src/forgeyard--*--*.sql)))
SQL_SOURCES = VERSION core/errors.hpp sql/generate.py sql/src/forgeyard.sql $(wildcard sql/src/forgeyard--*--*.sql) \
	$(wildcard extension/*.sql)
PGFILEDESC = "forgeyard - coordination semantics for PostgreSQL"

# `make installcheck` runs the pgTAP suite (pg_prove) instead of PGXS's pg_regress, against the
# installed extension on the server and database that libpq's environment names (PGHOST, PGPORT,
# PGDATABASE, PGUSER): as a superuser, in a database without forgeyard (each file creates it in a
# transaction that it rolls back).
NO_INSTALLCHECK = 1

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)

# Server headers as system headers (no warnings from them); C++20; PG 15 headers use `register`.
PG_CPPFLAGS = -I. -Iextension -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CXXFLAGS = -std=c++20 -Wno-register -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# `make FORGEYARD_WERROR=1` (the test command does) fails the build on any warning in our code.
ifeq ($(FORGEYARD_WERROR),1)
PG_CXXFLAGS += -Werror
endif
# PGXS links with the C compiler.
SHLIB_LINK = -lstdc++ -lcrypto
# The bitcode rule ignores PG_CXXFLAGS; forgeyard does not need JIT inlining.
override with_llvm = no
# Rebuild objects when a header they include changes: each object's dependencies go to a .d file
# beside it (PGXS's own autodepend is reset by Makefile.global and keys its files by base name,
# which core/ and extension/ share).
PG_CXXFLAGS += -MMD -MP
EXTRA_CLEAN = $(OBJS:.o=.d)

include $(PGXS)
-include $(OBJS:.o=.d)

# Both editions at once: one run writes every file of sql/gen/.
sql/gen/.stamp: $(SQL_SOURCES)
	python3 sql/generate.py sql/gen
	touch $@
$(DATA_built): sql/gen/.stamp ;
# The SQL both editions share (@statement blocks of extension/*.sql), as C++.
sql/gen/statements.hpp: sql/gen/.stamp ;
extension/operations.o extension/queue_lanes.o: sql/gen/statements.hpp
EXTRA_CLEAN += sql/gen

installcheck:
	pg_prove regress/*.sql

# The tree against .clang-format and .clang-tidy; `make format` rewrites it.
lintcheck:
	scripts/lint.sh

format:
	scripts/lint.sh --fix

.PHONY: lintcheck format
