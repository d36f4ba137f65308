// The PostgreSQL side of Store::stats() and Store::doctor(): forgeyard.storage_stats() and the
// catalog facts the doctor decides on (doctor.hpp).
#pragma once

#include <string>

#include "doctor.hpp"
#include "postgres/session.hpp"

namespace forgeyard::detail {

StoreStats pg_stats(PgSession& session);
// Facts seen on `conn` (a connection of the store's pool) and through `session` (which carries
// the test clock, so expiry figures agree with the rest of the API).
DoctorFacts pg_doctor_facts(PgConnection& conn, PgSession& session, const std::string& url);

}  // namespace forgeyard::detail
