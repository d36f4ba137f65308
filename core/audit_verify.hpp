// Verification of an audit chain (docs/architecture.md#verification): the walk that every
// store's audit_verify and the offline verifier share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/audit_event.hpp"

namespace fy::core {

struct Anchor {
  std::int64_t seq = 0;
  std::string hash;
};

struct Verification {
  bool ok = true;
  std::int64_t checked = 0;
  std::optional<std::int64_t> first_bad_seq;
  std::optional<std::string> reason;
};

// Walks one tenant's events in seq order from `from_seq`. `prev_hash` is the hash the first
// event must link to (the genesis hash from seq 1; the stored hash of event from_seq - 1 else).
// Stops at the first bad event; later add() calls are ignored.
class ChainVerifier {
 public:
  ChainVerifier(std::int64_t from_seq, std::string prev_hash, std::optional<Anchor> anchor = std::nullopt);
  // The verifier of a stored range: from seq 1 it links to the genesis hash, from a later seq to
  // `hash_before`, the stored hash of event from_seq - 1, which must be there if the chain
  // reaches it. `head` is the store's head row (seq 0 when there is none): a second witness, the
  // event at its seq must have its hash. A range past the head is empty, not broken.
  static ChainVerifier for_range(std::int64_t from_seq, const std::optional<std::string>& hash_before,
                                 const Anchor& head, std::optional<Anchor> anchor);
  // finish() for a stored range: the chain must reach to_seq, or the head when to_seq is open.
  Verification finish_range(std::optional<std::int64_t> to_seq, std::int64_t head_seq) {
    return finish(to_seq && *to_seq < head_seq ? *to_seq : head_seq);
  }
  // False once the chain is bad.
  bool add(const AuditEvent& event);
  // The chain must reach `expected_last` (the head the store records, or the anchor's seq).
  Verification finish(std::optional<std::int64_t> expected_last);
  std::int64_t next_seq() const { return next_; }
  bool bad() const { return !result_.ok; }
  // Marks `seq` bad with `reason` (e.g. the event before from_seq is missing).
  void fail(std::int64_t seq, std::string reason);

 private:
  std::int64_t next_;
  std::string prev_;
  std::optional<Anchor> anchor_;
  std::optional<Anchor> head_;
  Verification result_;
};

// Validates verify's range and anchor arguments (22023 naming the argument).
void check_verify_range(std::int64_t from_seq, std::optional<std::int64_t> to_seq, const std::optional<Anchor>& anchor);

}  // namespace fy::core
