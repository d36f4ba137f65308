// The one include of PostgreSQL's C headers for the extension's C++ code.
#pragma once

#include "core/core.hpp"  // first: core must never see the PostgreSQL headers

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "access/tupdesc.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}
