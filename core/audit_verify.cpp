#include "core/audit_verify.hpp"

// Compiled on its own into the extension and the client: nothing core includes may bring in
// PostgreSQL, libpq or SQLite.
#if defined(PG_VERSION_NUM) || defined(POSTGRES_H) || defined(LIBPQ_FE_H) || defined(SQLITE_VERSION_NUMBER)
#error "core/ is pure logic: it must not include PostgreSQL, libpq or SQLite headers"
#endif

namespace fy::core {

ChainVerifier::ChainVerifier(std::int64_t from_seq, std::string prev_hash, std::optional<Anchor> anchor)
    : next_(from_seq), prev_(std::move(prev_hash)), anchor_(std::move(anchor)) {}

ChainVerifier ChainVerifier::for_range(std::int64_t from_seq, const std::optional<std::string>& hash_before,
                                       const Anchor& head, std::optional<Anchor> anchor) {
  ChainVerifier v(from_seq, from_seq == 1 ? genesis_hash() : hash_before.value_or(std::string()), std::move(anchor));
  if (head.seq > 0) v.head_ = head;
  if (from_seq > 1 && !hash_before && from_seq - 1 <= head.seq)
    v.fail(from_seq - 1, "event " + std::to_string(from_seq - 1) + " is missing");
  return v;
}

void ChainVerifier::fail(std::int64_t seq, std::string reason) {
  if (!result_.ok) return;
  result_.ok = false;
  result_.first_bad_seq = seq;
  result_.reason = std::move(reason);
}

bool ChainVerifier::add(const AuditEvent& e) {
  if (!result_.ok) return false;
  const std::string n = std::to_string(next_);
  if (e.seq != next_) {
    fail(next_, e.seq > next_ ? "event " + n + " is missing (the next stored event is " + std::to_string(e.seq) + ")"
                              : "event " + std::to_string(e.seq) + " is out of order (expected " + n + ")");
  } else if (e.prev_hash != prev_) {
    fail(next_, next_ == 1
                    ? "prev_hash of event 1 is not the genesis hash"
                    : "prev_hash of event " + n + " does not match the hash of event " + std::to_string(next_ - 1));
  } else if (audit_hash(e) != e.hash) {
    fail(next_, "hash of event " + n + " does not match its contents");
  } else if (anchor_ && anchor_->seq == next_ && anchor_->hash != e.hash) {
    fail(next_, "hash of event " + n + " does not match the anchor");
  } else if (head_ && head_->seq == next_ && head_->hash != e.hash) {
    fail(next_, "hash of event " + n + " does not match the chain's head row");
  }
  if (!result_.ok) return false;
  ++result_.checked;
  prev_ = e.hash;
  ++next_;
  return true;
}

Verification ChainVerifier::finish(std::optional<std::int64_t> expected_last) {
  if (result_.ok && anchor_ && anchor_->seq >= next_) {
    fail(next_, "the chain ends at seq " + std::to_string(next_ - 1) + ", before the anchor at seq " +
                    std::to_string(anchor_->seq) + ": its tail was cut");
  } else if (result_.ok && expected_last && *expected_last >= next_) {
    fail(next_, "event " + std::to_string(next_) + " is missing (the chain head is at seq " +
                    std::to_string(*expected_last) + ")");
  }
  return result_;
}

void check_verify_range(std::int64_t from_seq, std::optional<std::int64_t> to_seq,
                        const std::optional<Anchor>& anchor) {
  if (from_seq < 1) invalid_parameter("from_seq must be at least 1");
  if (to_seq && *to_seq < from_seq) invalid_parameter("to_seq must not be below from_seq");
  if (anchor) {
    if (anchor->hash.size() != hash_bytes) invalid_parameter("anchor_hash must be 32 bytes");
    if (anchor->seq < from_seq || (to_seq && anchor->seq > *to_seq))
      invalid_parameter("anchor_seq must be within from_seq .. to_seq");
  }
}

}  // namespace fy::core
