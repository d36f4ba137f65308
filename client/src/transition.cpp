// State + audit + outbox in one transaction (SPEC §6, atomicity).
#include "forgeyard/transition.hpp"

namespace forgeyard {

TransitionResult transition(Transaction& tx, const StateTransition& t) {
  TransitionResult result;
  result.version = tx.versioned_rows().update(t.table, t.key, t.expected_version, t.changes);
  result.audit = tx.audit().append(t.tenant, t.audit);
  if (t.outbox) result.msg_id = tx.queues().enqueue(t.tenant, t.outbox->queue, t.outbox->message);
  return result;
}

TransitionResult transition(Store& store, const StateTransition& t) {
  std::unique_ptr<Transaction> tx = store.begin();
  TransitionResult result = transition(*tx, t);
  tx->commit();
  return result;
}

}  // namespace forgeyard
