// A state transition, its audit event and its outbox message in one transaction
// (docs/architecture.md#atomicity-across-semantics-state-audit-and-outbox, atomicity): they commit together or not at
// all. Long work (uploads, network calls) belongs before it, never inside.
#pragma once

#include "forgeyard/export.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "forgeyard/audit.hpp"
#include "forgeyard/queues.hpp"
#include "forgeyard/store.hpp"
#include "forgeyard/topics.hpp"
#include "forgeyard/versioned_rows.hpp"

namespace forgeyard {

struct StateTransition {
  std::string tenant;  // of the audit event and the message
  // The compare-and-set: the row of `table` named by `key` moves from expected_version.
  std::string table;
  Fields key;
  std::int64_t expected_version = 0;
  Fields changes;
  AuditEvent audit;
  // The event for other services, enqueued on `queue` (none when not set).
  struct Outbox {
    std::string queue;
    OutgoingMessage message;
  };
  std::optional<Outbox> outbox;
  // Or the event published to `topic` (docs/sql-api.md#topics): every matching subscription
  // gets it. Setting both is refused (InvalidArgument).
  struct Publication {
    std::string topic;
    Event event;
  };
  std::optional<Publication> publication;
};

struct TransitionResult {
  std::int64_t version = 0;  // of the row after the update
  AuditHead audit;
  std::optional<std::int64_t> msg_id;
  std::optional<std::int64_t> event_seq;  // when published to a topic
};

// Runs the three steps in `tx` (compare-and-set, audit append, enqueue or publish) without committing.
// A key with a tenant_id other than t.tenant is refused (InvalidArgument) before any step.
FORGEYARD_API TransitionResult transition(Transaction& tx, const StateTransition& t);
// Begins a transaction, runs the three steps and commits. Any failure (Conflict, QueueFull,
// InvalidArgument, a lost connection) leaves no state change, no audit event and no message.
// Not retried here: wrap it in forgeyard::retry for SerializationFailure.
FORGEYARD_API TransitionResult transition(Store& store, const StateTransition& t);

}  // namespace forgeyard
