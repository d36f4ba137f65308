// The append-only audit chain (docs/architecture.md#the-audit-chain), one file per concern:
//   utf8            UTF-8 sequence checks
//   canonical_json  the strict JSON parser and the canonical printer
//   audit_event     limits, input checks, canonical details, the encoding and its hash
//   audit_verify    ChainVerifier
//   audit_export    the JSON-lines export and its offline verification
//   uuid, timestamp the text forms of event ids and times
// Written once; the extension, the SQLite shim and the client's offline verifier all call it,
// and tests/vectors/ proves they hash alike.
#pragma once

#include "core/audit_event.hpp"
#include "core/audit_export.hpp"
#include "core/audit_verify.hpp"
#include "core/canonical_json.hpp"
#include "core/timestamp.hpp"
#include "core/utf8.hpp"
#include "core/uuid.hpp"
