// Checks over recorded histories (history.hpp). Each check takes the whole history, looks at the
// op kinds it knows and returns what it verified and every violation it found. An op whose
// outcome is unknown is never assumed: it is resolved by what the history read back at the end.
//
// Op kinds per check (key / text / args / result):
//   queues:      enqueue (event)                        a producer's enqueue
//                claim   (event; result msg_id, token)  one delivery of a claim
//                consume (event; args msg_id, token; result accepted)
//                                 inbox_accept + effect + ack in one transaction
//                effect  (event)                        observed: an effect found at the end
//                present (event)                        observed: a message still in the queue
//   leases:      acquire (resource; text owner; result acquired, epoch)
//                write   (resource; text owner; args epoch, wid)   a fenced write
//                write_seen (resource; text owner; args seq, epoch, wid)  observed, in commit order
//   cas:         cas     (row; text tag; args expected; result version)
//                cas_final (row; text the row's log "tag,tag,..."; result version)  observed
//   idempotency: idem    (key; result replay)           one attempt of a command
//                idem_effect (key)                      observed
//   audit:       audit_append (tenant; text event_id; result seq)
//                audit_seen   (tenant; text event_id; args seq)     observed
//                audit_verify (tenant; result ok, checked, head_seq) observed
//   workflows:   wf_start  (run_key)                     one attempt to start the run (idempotent)
//                wf_run    (run_key; text state; args steps)  observed: the run at the end
//                wf_effect (run_key/step)                observed: a step's effect (one per commit)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "history.hpp"

namespace history {

struct CheckReport {
  std::string check;
  std::int64_t ops = 0;                    // ops the check looked at
  std::int64_t unknown = 0;                // of them, unknown outcomes
  std::int64_t unknown_took_effect = 0;    // resolved by reading: it did take effect
  std::int64_t unknown_had_no_effect = 0;  // resolved by reading: it did not
  std::vector<std::string> violations;
  bool ok() const { return violations.empty(); }
};

CheckReport check_queues(const std::vector<Op>& ops);
CheckReport check_leases(const std::vector<Op>& ops);
CheckReport check_cas(const std::vector<Op>& ops);
CheckReport check_idempotency(const std::vector<Op>& ops);
CheckReport check_audit(const std::vector<Op>& ops);
// Each step of a run took effect at most once, in order; a completed run has every step's
// effect; a start that answered ok made a run, one whose every attempt failed made none.
CheckReport check_workflows(const std::vector<Op>& ops);

// All six.
std::vector<CheckReport> check_all(const std::vector<Op>& ops);

// "queues: 1234 ops, 12 unknown (10 took effect, 2 had none), 0 violations" and the violations.
std::string describe(const CheckReport& report);

}  // namespace history
