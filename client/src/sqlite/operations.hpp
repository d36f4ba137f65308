// The SQLite side of Store::stats() and Store::doctor(): counts from the store file and the
// facts the doctor decides on (doctor.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "doctor.hpp"
#include "forgeyard/queues.hpp"
#include "sqlite/db.hpp"
#include "sqlite/migrations.hpp"

namespace forgeyard::detail {

// `queues` answers each queue's depth (QueueStats has one definition per backend).
StoreStats sqlite_stats(Db& db, Queues& queues, std::int64_t now_usecs);
DoctorFacts sqlite_doctor_facts(Db& db, Queues& queues, std::int64_t now_usecs,
                                const std::vector<Migration>& migrations);

}  // namespace forgeyard::detail
