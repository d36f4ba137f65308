// FORGEYARD_API marks what libforgeyard.so exports. The library is built with hidden visibility,
// so the core's and the backends' internals stay out of its dynamic symbol table
// (scripts/check-symbols.sh checks that).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FORGEYARD_API __attribute__((visibility("default")))
#else
#define FORGEYARD_API
#endif
