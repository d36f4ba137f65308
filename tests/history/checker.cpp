#include "checker.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace history {

namespace {

std::vector<const Op*> of_kind(const std::vector<Op>& ops, std::initializer_list<std::string_view> kinds) {
  std::vector<const Op*> out;
  for (const Op& op : ops)
    for (std::string_view k : kinds)
      if (op.kind == k) out.push_back(&op);
  return out;
}

void count_unknown(CheckReport& r, const Op& op, bool took_effect) {
  if (op.outcome != Outcome::Unknown) return;
  ++r.unknown;
  ++(took_effect ? r.unknown_took_effect : r.unknown_had_no_effect);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

CheckReport check_queues(const std::vector<Op>& ops) {
  CheckReport r{"queues"};
  std::map<std::string, std::vector<const Op*>> enqueues, claims, effects;
  std::set<std::string> present;
  std::map<std::int64_t, std::vector<const Op*>> claims_by_msg, consumes_by_msg;
  std::vector<const Op*> consumes;
  for (const Op* op : of_kind(ops, {"enqueue", "claim", "consume", "effect", "present"})) {
    ++r.ops;
    if (op->kind == "enqueue") enqueues[op->key].push_back(op);
    if (op->kind == "claim" && op->outcome == Outcome::Ok) {
      claims[op->key].push_back(op);
      claims_by_msg[op->res("msg_id")].push_back(op);
    }
    if (op->kind == "consume") {
      consumes.push_back(op);
      consumes_by_msg[op->arg("msg_id")].push_back(op);
    }
    if (op->kind == "effect") effects[op->key].push_back(op);
    if (op->kind == "present") present.insert(op->key);
  }
  auto produced = [&](const std::string& event) {
    auto it = enqueues.find(event);
    if (it == enqueues.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [](const Op* e) { return e->outcome != Outcome::Failed; });
  };
  // Delivered or acked only what a producer that did not fail enqueued.
  for (const auto& [event, list] : claims)
    if (!produced(event)) r.violations.push_back("delivered event " + event + " that no committed producer enqueued");
  for (const Op* c : consumes)
    if (c->outcome == Outcome::Ok && !produced(c->key))
      r.violations.push_back("acked event " + c->key + " that no committed producer enqueued");
  // Exactly one effect per event; a committed message is never lost.
  for (const auto& [event, list] : effects)
    if (list.size() > 1)
      r.violations.push_back("event " + event + " has " + std::to_string(list.size()) + " effects (inbox broken)");
  for (const auto& [event, list] : enqueues) {
    const bool effect = effects.contains(event);
    const bool seen = effect || present.contains(event) || claims.contains(event);
    bool committed = false;
    for (const Op* e : list) {
      committed = committed || e->outcome == Outcome::Ok;
      count_unknown(r, *e, seen);
    }
    if (committed && !effect && !present.contains(event))
      r.violations.push_back("event " + event + " was enqueued (committed) but is neither delivered nor present: lost");
    if (!committed && !seen) continue;
    if (std::all_of(list.begin(), list.end(), [](const Op* e) { return e->outcome == Outcome::Failed; }) && effect)
      r.violations.push_back("event " + event + " had an effect though every enqueue of it failed");
  }
  // No ack under a stale token: an ack with token T that succeeded after another claim of the
  // message had completed (a newer token) while nothing else had acked it yet.
  for (const Op* c : consumes) {
    if (c->outcome != Outcome::Ok) continue;
    const std::int64_t msg = c->arg("msg_id"), token = c->arg("token");
    const Op* own = nullptr;
    for (const Op* cl : claims_by_msg[msg])
      if (cl->res("token") == token) own = cl;
    for (const Op* cl : claims_by_msg[msg]) {
      if (cl->res("token") == token || cl->completed_us >= c->invoked_us) continue;
      if (own != nullptr && cl->invoked_us < own->completed_us) continue;  // older or concurrent claim
      // A newer claim was live: only an ack by someone else already in flight excuses this one.
      const bool acked_by_other =
          std::any_of(consumes_by_msg[msg].begin(), consumes_by_msg[msg].end(), [&](const Op* o) {
            return o != c && o->arg("token") != token && o->outcome != Outcome::Failed &&
                   o->invoked_us < c->completed_us;
          });
      if (!acked_by_other)
        r.violations.push_back("message " + std::to_string(msg) + " acked under stale token " + std::to_string(token) +
                               " after token " + std::to_string(cl->res("token")) + " claimed it");
    }
    // An ack that returned ok is never undone (a failover that lost it would hand the message out
    // again): no claim of the message starts after the ack completed.
    for (const Op* cl : claims_by_msg[msg])
      if (cl->invoked_us > c->completed_us)
        r.violations.push_back("message " + std::to_string(msg) + " delivered again (token " +
                               std::to_string(cl->res("token")) + ") after its ack under token " +
                               std::to_string(token) + " returned ok: the ack was undone");
  }
  // Claim tokens never go back: a claim that started after another claim of the same message
  // had completed carries a higher token (also across a restore or a failover).
  for (const auto& [msg, list] : claims_by_msg)
    for (const Op* a : list)
      for (const Op* b : list)
        if (b->invoked_us > a->completed_us && b->res("token") <= a->res("token"))
          r.violations.push_back("message " + std::to_string(msg) + ": token " + std::to_string(b->res("token")) +
                                 " claimed after token " + std::to_string(a->res("token")) + ": tokens went back");
  return r;
}

CheckReport check_leases(const std::vector<Op>& ops) {
  CheckReport r{"leases"};
  std::map<std::string, std::map<std::int64_t, std::string>> owner_of;  // resource -> epoch -> owner
  std::map<std::string, std::vector<const Op*>> grants, seen;
  std::map<std::int64_t, const Op*> writes;  // wid -> write
  std::set<std::int64_t> seen_wids;
  for (const Op* op : of_kind(ops, {"acquire", "write", "write_seen"})) {
    ++r.ops;
    if (op->kind == "acquire" && op->outcome == Outcome::Ok && op->res("acquired") == 1) {
      auto [it, fresh] = owner_of[op->key].emplace(op->res("epoch"), op->text);
      if (!fresh && it->second != op->text)
        r.violations.push_back(op->key + ": epoch " + std::to_string(op->res("epoch")) + " granted to both " +
                               it->second + " and " + op->text);
      grants[op->key].push_back(op);
    }
    if (op->kind == "write") writes[op->arg("wid")] = op;
    if (op->kind == "write_seen") {
      seen[op->key].push_back(op);
      if (!seen_wids.insert(op->arg("wid")).second)
        r.violations.push_back(op->key + ": write " + std::to_string(op->arg("wid")) + " accepted twice");
    }
  }
  // Epochs strictly increase from grant to grant: a grant invoked after another completed never
  // has a smaller epoch.
  for (auto& [resource, list] : grants)
    for (const Op* a : list)
      for (const Op* b : list)
        if (b->invoked_us > a->completed_us && b->res("epoch") < a->res("epoch"))
          r.violations.push_back(resource + ": epoch " + std::to_string(b->res("epoch")) + " granted after epoch " +
                                 std::to_string(a->res("epoch")));
  for (auto& [resource, list] : seen) {
    std::sort(list.begin(), list.end(), [](const Op* a, const Op* b) { return a->arg("seq") < b->arg("seq"); });
    std::int64_t last = 0;
    for (const Op* s : list) {
      const std::int64_t epoch = s->arg("epoch");
      if (epoch < last)
        r.violations.push_back(resource + ": write of epoch " + std::to_string(epoch) +
                               " accepted after one of epoch " + std::to_string(last) + " (two holders interleave)");
      last = std::max(last, epoch);
      auto owner = owner_of[resource].find(epoch);
      if (owner == owner_of[resource].end() || owner->second != s->text)
        r.violations.push_back(resource + ": write by " + s->text + " under epoch " + std::to_string(epoch) +
                               " that was never granted to it");
      auto w = writes.find(s->arg("wid"));
      if (w == writes.end()) {
        r.violations.push_back(resource + ": accepted write " + std::to_string(s->arg("wid")) + " was never invoked");
        continue;
      }
      if (w->second->outcome == Outcome::Failed)
        r.violations.push_back(resource + ": write " + std::to_string(s->arg("wid")) + " failed (" + w->second->error +
                               ") yet was accepted");
      // The epoch was the live grant at the write: no newer grant had completed before it began.
      for (const Op* g : grants[resource])
        if (g->res("epoch") > epoch && g->completed_us < w->second->invoked_us)
          r.violations.push_back(resource + ": stale write " + std::to_string(s->arg("wid")) + " of epoch " +
                                 std::to_string(epoch) + " accepted after epoch " + std::to_string(g->res("epoch")) +
                                 " was granted");
    }
  }
  for (const auto& [wid, w] : writes) {
    const bool accepted = seen_wids.contains(wid);
    count_unknown(r, *w, accepted);
    if (w->outcome == Outcome::Ok && !accepted)
      r.violations.push_back(w->key + ": write " + std::to_string(wid) + " returned ok but is not in the log: lost");
  }
  return r;
}

CheckReport check_cas(const std::vector<Op>& ops) {
  CheckReport r{"cas"};
  std::map<std::string, const Op*> final_of;
  std::map<std::string, std::vector<const Op*>> updates;
  for (const Op* op : of_kind(ops, {"cas", "cas_final"})) {
    ++r.ops;
    if (op->kind == "cas") updates[op->key].push_back(op);
    if (op->kind == "cas_final") final_of[op->key] = op;
  }
  for (const auto& [row, list] : updates) {
    auto f = final_of.find(row);
    if (f == final_of.end()) {
      r.violations.push_back(row + ": never read back");
      continue;
    }
    const std::vector<std::string> chain = split_commas(f->second->text);
    if (static_cast<std::int64_t>(chain.size()) + 1 != f->second->res("version"))
      r.violations.push_back(row + ": version " + std::to_string(f->second->res("version")) + " after " +
                             std::to_string(chain.size()) + " committed updates (versions do not form one chain)");
    std::map<std::string, std::int64_t> position;  // tag -> the version it updated from
    for (std::size_t i = 0; i < chain.size(); ++i)
      if (!position.emplace(chain[i], static_cast<std::int64_t>(i) + 1).second)
        r.violations.push_back(row + ": update " + chain[i] + " applied twice");
    std::map<std::int64_t, const Op*> ok_from;  // expected version -> the ok update from it
    std::set<std::string> invoked;
    for (const Op* u : list) {
      invoked.insert(u->text);
      auto p = position.find(u->text);
      const bool applied = p != position.end();
      count_unknown(r, *u, applied);
      if (u->outcome == Outcome::Ok) {
        auto [prev, fresh] = ok_from.emplace(u->arg("expected"), u);
        if (!fresh)
          r.violations.push_back(row + ": updates " + prev->second->text + " and " + u->text +
                                 " both committed from version " + std::to_string(u->arg("expected")) +
                                 " (lost update)");
        if (!applied)
          r.violations.push_back(row + ": update " + u->text + " returned ok but is not in the chain (lost update)");
      }
      if (u->outcome == Outcome::Failed && applied)
        r.violations.push_back(row + ": update " + u->text + " failed (" + u->error + ") yet was applied");
      if (applied && p->second != u->arg("expected"))
        r.violations.push_back(row + ": update " + u->text + " from version " + std::to_string(u->arg("expected")) +
                               " sits at version " + std::to_string(p->second) + " of the chain");
    }
    for (const std::string& tag : chain)
      if (!invoked.contains(tag)) r.violations.push_back(row + ": update " + tag + " in the chain was never invoked");
  }
  return r;
}

CheckReport check_idempotency(const std::vector<Op>& ops) {
  CheckReport r{"idempotency"};
  std::map<std::string, std::vector<const Op*>> attempts;
  std::map<std::string, int> effects;
  for (const Op* op : of_kind(ops, {"idem", "idem_effect"})) {
    ++r.ops;
    if (op->kind == "idem") attempts[op->key].push_back(op);
    if (op->kind == "idem_effect") ++effects[op->key];
  }
  for (const auto& [key, n] : effects) {
    if (n > 1) r.violations.push_back("key " + key + " has " + std::to_string(n) + " effects");
    if (!attempts.contains(key)) r.violations.push_back("key " + key + " has an effect but no command ran");
  }
  for (const auto& [key, list] : attempts) {
    const bool effect = effects.contains(key);
    bool ok = false, all_failed = true;
    for (const Op* a : list) {
      count_unknown(r, *a, effect);
      ok = ok || a->outcome == Outcome::Ok;
      all_failed = all_failed && a->outcome == Outcome::Failed;
    }
    if (ok && !effect) r.violations.push_back("key " + key + " answered ok but has no effect");
    if (all_failed && effect) r.violations.push_back("key " + key + " has an effect though every attempt failed");
  }
  return r;
}

CheckReport check_audit(const std::vector<Op>& ops) {
  CheckReport r{"audit"};
  std::map<std::string, std::vector<const Op*>> appends, seen;
  std::map<std::string, const Op*> verified;
  for (const Op* op : of_kind(ops, {"audit_append", "audit_seen", "audit_verify"})) {
    ++r.ops;
    if (op->kind == "audit_append") appends[op->key].push_back(op);
    if (op->kind == "audit_seen") seen[op->key].push_back(op);
    if (op->kind == "audit_verify") verified[op->key] = op;
  }
  std::set<std::string> tenants;
  for (const auto& [t, _] : appends) tenants.insert(t);
  for (const auto& [t, _] : seen) tenants.insert(t);
  for (const std::string& tenant : tenants) {
    auto& chain = seen[tenant];
    std::sort(chain.begin(), chain.end(), [](const Op* a, const Op* b) { return a->arg("seq") < b->arg("seq"); });
    std::map<std::string, std::int64_t> seq_of;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      if (chain[i]->arg("seq") != static_cast<std::int64_t>(i) + 1) {
        r.violations.push_back(tenant + ": seq " + std::to_string(chain[i]->arg("seq")) + " where " +
                               std::to_string(i + 1) + " belongs (a gap)");
        break;
      }
      if (!seq_of.emplace(chain[i]->text, chain[i]->arg("seq")).second)
        r.violations.push_back(tenant + ": event " + chain[i]->text + " recorded twice");
    }
    auto v = verified.find(tenant);
    if (v == verified.end())
      r.violations.push_back(tenant + ": chain never verified");
    else if (v->second->res("ok") != 1)
      r.violations.push_back(tenant + ": chain does not verify");
    else if (v->second->res("head_seq") != static_cast<std::int64_t>(chain.size()))
      r.violations.push_back(tenant + ": head at seq " + std::to_string(v->second->res("head_seq")) + " but " +
                             std::to_string(chain.size()) + " events read");
    for (const Op* a : appends[tenant]) {
      auto s = seq_of.find(a->text);
      const bool recorded = s != seq_of.end();
      count_unknown(r, *a, recorded);
      if (a->outcome == Outcome::Ok && !recorded)
        r.violations.push_back(tenant + ": append " + a->text + " returned ok but is not in the chain");
      if (a->outcome == Outcome::Ok && recorded && a->res("seq") != 0 && a->res("seq") != s->second)
        r.violations.push_back(tenant + ": append " + a->text + " returned seq " + std::to_string(a->res("seq")) +
                               " but sits at " + std::to_string(s->second));
      if (a->outcome == Outcome::Failed && recorded) {
        // A failed attempt is fine if another attempt of the same event took effect.
        const bool retried = std::any_of(appends[tenant].begin(), appends[tenant].end(), [&](const Op* o) {
          return o->text == a->text && o->outcome != Outcome::Failed;
        });
        if (!retried)
          r.violations.push_back(tenant + ": append " + a->text + " failed (" + a->error + ") yet is recorded");
      }
    }
  }
  return r;
}

CheckReport check_workflows(const std::vector<Op>& ops) {
  CheckReport r{"workflows"};
  std::map<std::string, std::vector<const Op*>> starts;
  std::map<std::string, const Op*> runs;
  std::map<std::string, std::map<std::int64_t, int>> effects;  // run_key -> step -> effects
  for (const Op* op : of_kind(ops, {"wf_start", "wf_run", "wf_effect"})) {
    ++r.ops;
    if (op->kind == "wf_start") starts[op->key].push_back(op);
    if (op->kind == "wf_run") runs[op->key] = op;
    if (op->kind == "wf_effect") {
      const std::size_t slash = op->key.rfind('/');
      ++effects[op->key.substr(0, slash)][std::stoll(op->key.substr(slash + 1))];
    }
  }
  for (const auto& [run, steps] : effects) {
    if (!runs.contains(run)) r.violations.push_back("run " + run + " has step effects but does not exist");
    std::int64_t next = 0;
    for (const auto& [step, n] : steps) {
      if (n > 1)
        r.violations.push_back("step " + std::to_string(step) + " of run " + run + " took effect " + std::to_string(n) +
                               " times");
      if (step != next)
        r.violations.push_back("run " + run + " has the effect of step " + std::to_string(step) + " but not of step " +
                               std::to_string(next));
      next = step + 1;
    }
  }
  for (const auto& [run, op] : runs) {
    const std::int64_t done = effects.contains(run) ? static_cast<std::int64_t>(effects[run].size()) : 0;
    if (op->text == "completed" && done != op->arg("steps"))
      r.violations.push_back("completed run " + run + " has " + std::to_string(done) + " of its " +
                             std::to_string(op->arg("steps")) + " step effects");
  }
  for (const auto& [run, list] : starts) {
    const bool exists = runs.contains(run);
    bool ok = false, all_failed = true;
    for (const Op* a : list) {
      count_unknown(r, *a, exists);
      ok = ok || a->outcome == Outcome::Ok;
      all_failed = all_failed && a->outcome == Outcome::Failed;
    }
    if (ok && !exists) r.violations.push_back("run " + run + " answered started but does not exist");
    if (all_failed && exists) r.violations.push_back("run " + run + " exists though every start failed");
  }
  return r;
}

std::vector<CheckReport> check_all(const std::vector<Op>& ops) {
  return {check_queues(ops),      check_leases(ops), check_cas(ops),
          check_idempotency(ops), check_audit(ops),  check_workflows(ops)};
}

std::string describe(const CheckReport& report) {
  std::string s = report.check + ": " + std::to_string(report.ops) + " ops, " + std::to_string(report.unknown) +
                  " unknown (" + std::to_string(report.unknown_took_effect) + " took effect, " +
                  std::to_string(report.unknown_had_no_effect) + " had none), " +
                  std::to_string(report.violations.size()) + " violations";
  const std::size_t shown = std::min<std::size_t>(report.violations.size(), 20);
  for (std::size_t i = 0; i < shown; ++i) s += "\n  violation: " + report.violations[i];
  return s;
}

}  // namespace history
