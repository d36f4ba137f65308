// The forgeyard client: include this, link forgeyard::forgeyard.
#pragma once

#include "forgeyard/audit.hpp"
#include "forgeyard/error.hpp"
#include "forgeyard/idempotency.hpp"
#include "forgeyard/lease_keeper.hpp"
#include "forgeyard/leases.hpp"
#include "forgeyard/queues.hpp"
#include "forgeyard/retry.hpp"
#include "forgeyard/store.hpp"
#include "forgeyard/topics.hpp"
#include "forgeyard/transition.hpp"
#include "forgeyard/types.hpp"
#include "forgeyard/version.hpp"
#include "forgeyard/versioned_rows.hpp"
#include "forgeyard/worker.hpp"
