// State + audit + outbox in one transaction (docs/architecture.md#atomicity-across-semantics-state-audit-and-outbox).
#include "forgeyard/transition.hpp"

#include <variant>

#include "forgeyard/error.hpp"

namespace forgeyard {

TransitionResult transition(Transaction& tx, const StateTransition& t) {
  // The event and the message belong to the tenant whose row moves.
  if (auto it = t.key.find("tenant_id"); it != t.key.end()) {
    const auto* row_tenant = std::get_if<std::string>(&it->second);
    if (row_tenant == nullptr || *row_tenant != t.tenant)
      throw Error("22023", "the key's tenant_id must be the transition's tenant \"" + t.tenant + "\"");
  }
  if (t.outbox && t.publication)
    throw Error("22023", "a transition either enqueues (outbox) or publishes to a topic (publication), not both");
  TransitionResult result;
  result.version = tx.versioned_rows().update(t.table, t.key, t.expected_version, t.changes);
  result.audit = tx.audit().append(t.tenant, t.audit);
  if (t.outbox) result.msg_id = tx.queues().enqueue(t.tenant, t.outbox->queue, t.outbox->message);
  if (t.publication) result.event_seq = tx.topics().publish(t.tenant, t.publication->topic, t.publication->event);
  return result;
}

TransitionResult transition(Store& store, const StateTransition& t) {
  std::unique_ptr<Transaction> tx = store.begin();
  TransitionResult result = transition(*tx, t);
  tx->commit();
  return result;
}

}  // namespace forgeyard
