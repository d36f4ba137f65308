#include "workload.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <stop_token>
#include <thread>

namespace faults {

using forgeyard::Error;
using forgeyard::ErrorKind;
using forgeyard::Fields;
using history::Op;
using namespace std::chrono_literals;

Names::Names(const std::string& run)
    : tenant("faults-" + run),
      consumer_group("inbox-" + run),
      cas_table("fault_cas_" + run),
      audit_tenant(tenant + "-audit") {}

std::string new_uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::uint64_t a = rng(), b = rng();
  char s[37];
  std::snprintf(s, sizeof s, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return s;
}

namespace {

Op op(std::string kind, std::string key, std::map<std::string, std::int64_t> args = {}, std::string text = {}) {
  Op o;
  o.kind = std::move(kind);
  o.key = std::move(key);
  o.args = std::move(args);
  o.text = std::move(text);
  return o;
}

Fields row_key(const Names& n, int row) {
  return {{"tenant_id", n.tenant}, {"id", std::int64_t{row}}};
}

std::string row_name(int row) {
  return "row-" + std::to_string(row);
}

// The fault workflow: `workflow_steps` transaction steps, each enqueuing its effect
// "wf:<run_key>/<step>" with the step's record. The run's input is {"key":"<run_key>"}.
void add_fault_workflow(forgeyard::WorkflowWorker& worker, const Names& n, const std::function<void()>& pause) {
  worker.add(n.workflow, 1, [&n, pause](forgeyard::WorkflowContext& ctx) {
    const std::string key = ctx.input().substr(8, ctx.input().size() - 10);
    for (int s = 0; s < n.workflow_steps; ++s)
      ctx.transaction_step("s" + std::to_string(s), [&](forgeyard::Transaction& tx, const forgeyard::StepContext&) {
        forgeyard::OutgoingMessage effect;
        effect.payload = "wf:" + key + "/" + std::to_string(s);
        tx.queues().enqueue(n.tenant, n.effects_queue, effect);
        pause();
        return std::string("{}");
      });
    return std::string("{}");
  });
}

forgeyard::WorkflowWorkerOptions fault_worker_options(const Names& n, const std::string& worker) {
  forgeyard::WorkflowWorkerOptions o;
  o.tenant = n.tenant;
  o.worker = worker;
  o.threads = 1;
  o.lease = 2s;  // a killed owner's run comes back soon
  o.stop_when_idle = true;
  o.idle_min = o.idle_max = 10ms;
  return o;
}

forgeyard::QueueOptions work_queue_options() {
  forgeyard::QueueOptions o;
  o.visibility_timeout = 500ms;  // short, so a slow consumer's token goes stale
  o.max_attempts = 1000;         // the most allowed: no message dead-letters in a run, each reaches its effect
  o.backoff_base = 1ms;
  o.backoff_max = 10ms;
  return o;
}

}  // namespace

void set_up(forgeyard::Store& store, const Names& n, bool sqlite,
            const std::function<void(const std::string&)>& exec_sql) {
  store.queues().create(n.tenant, n.work_queue, work_queue_options());
  forgeyard::QueueOptions effects;
  effects.visibility_timeout = 60s;
  store.queues().create(n.tenant, n.effects_queue, effects);
  const std::string integer = sqlite ? "INTEGER" : "bigint";
  exec_sql("CREATE TABLE " + n.cas_table + " (tenant_id text NOT NULL, id " + integer + " NOT NULL, value " + integer +
           " NOT NULL DEFAULT 0, note text NOT NULL DEFAULT '', entity_version " + integer +
           " NOT NULL DEFAULT 1, PRIMARY KEY (tenant_id, id))");
  for (int i = 0; i < n.cas_rows + n.pair_rows; ++i)
    exec_sql("INSERT INTO " + n.cas_table + " (tenant_id, id) VALUES ('" + n.tenant + "', " + std::to_string(i) + ")");
  store.versioned_rows().enable(n.cas_table);
}

Workload::Workload(const Names& names, history::Recorder& recorder, int process)
    : names_(names), rec_(recorder), process_(process), rng_(std::random_device{}()) {}

std::map<std::string, std::int64_t> Workload::errors() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

int Workload::random_below(int n) {
  std::lock_guard lock(mutex_);
  return static_cast<int>(rng_() % static_cast<std::uint64_t>(n));
}

std::string Workload::tag() {
  return "p" + std::to_string(process_) + "n" + std::to_string(next_++);
}

void Workload::pause() {
  const int ms = pause_ms_;
  if (ms > 0 && random_below(4) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(random_below(ms) + 1));
}

std::string Workload::error_kind() {
  std::string error;
  try {
    throw;
  } catch (const Error& e) {
    error = std::string(forgeyard::to_string(e.kind())) + "/" + e.sqlstate();
  } catch (const std::exception& e) {
    error = "exception";
  }
  {
    std::lock_guard lock(mutex_);
    ++errors_[error];
  }
  // The server is away (restarting): back off a little instead of spinning on connects.
  if (error.starts_with("Unavailable/")) {
    const int base = backoff_ms_;
    std::this_thread::sleep_for(std::chrono::milliseconds(base + random_below(2 * base)));
  }
  return error;
}

namespace {
// Whether an error at COMMIT (or of an autocommit call) leaves the outcome unknown. A connection
// that never opened (08001) sent nothing; a refusal from the server (a conflict, a stale fence, a
// serialization failure) is definite.
bool in_doubt(const std::string& error) {
  if (error.starts_with("Unavailable/08001")) return false;
  for (const char* kind : {"CommitUnknown/", "Unavailable/", "Timeout/", "Internal/", "exception"})
    if (error.starts_with(kind)) return true;
  return false;
}
}  // namespace

void Workload::settle(std::size_t id, Phase phase) {
  const std::string error = error_kind();
  if (phase == Phase::Commit && in_doubt(error))
    rec_.unknown(id, error);
  else
    rec_.failed(id, error);
}

void Workload::producer(forgeyard::Store& store, const std::atomic<bool>& stop) {
  while (!stop) {
    if (random_below(4) == 0) {
      produce_many(store, stop);
      continue;
    }
    const std::string event = new_uuid();
    // A lost answer is retried with the same event id: the dedup window returns the first msg_id.
    for (int attempt = 0; attempt < 3 && !stop; ++attempt) {
      const auto id = rec_.invoke(op("enqueue", event));
      try {
        forgeyard::OutgoingMessage m;
        m.payload = event;
        m.event_id = event;
        const std::int64_t msg = store.queues().enqueue(names_.tenant, names_.work_queue, m);
        rec_.ok(id, {{"msg_id", msg}});
        break;
      } catch (...) {
        settle(id, Phase::Commit);  // autocommit
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random_below(5)));
  }
}

// Three events in one enqueue_many, each of another class (on PostgreSQL three statements of one
// pipeline, committed together); each event is its own operation in the history.
void Workload::produce_many(forgeyard::Store& store, const std::atomic<bool>& stop) {
  static constexpr forgeyard::Priority classes[] = {forgeyard::Priority::Realtime, forgeyard::Priority::Interactive,
                                                    forgeyard::Priority::Background};
  std::vector<forgeyard::OutgoingMessage> list(3);
  for (std::size_t i = 0; i < list.size(); ++i) {
    list[i].payload = new_uuid();
    list[i].event_id = list[i].payload;
    list[i].priority = classes[i];
  }
  for (int attempt = 0; attempt < 3 && !stop; ++attempt) {
    std::vector<std::size_t> ids;
    for (const auto& m : list) ids.push_back(rec_.invoke(op("enqueue", *m.event_id)));
    try {
      const auto msgs = store.queues().enqueue_many(names_.tenant, names_.work_queue, list);
      for (std::size_t i = 0; i < ids.size(); ++i) rec_.ok(ids[i], {{"msg_id", msgs.at(i)}});
      break;
    } catch (...) {
      const std::string error = error_kind();  // counted once for the call
      for (std::size_t id : ids)
        if (in_doubt(error))
          rec_.unknown(id, error);
        else
          rec_.failed(id, error);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(random_below(5)));
}

namespace {
// Consumes one delivery: inbox_accept, the effect and the ack commit together.
bool consume_one(forgeyard::Store& store, const Names& n, const forgeyard::Delivery& d, bool& committing) {
  auto tx = store.begin();
  const bool accepted = tx->queues().inbox_accept(n.tenant, n.consumer_group, *d.event_id);
  if (accepted) {
    forgeyard::OutgoingMessage effect;
    effect.payload = "inbox:" + *d.event_id;
    tx->queues().enqueue(n.tenant, n.effects_queue, effect);
  }
  tx->queues().ack(n.tenant, n.work_queue, d.msg_id, d.claim_token);
  committing = true;
  tx->commit();
  return accepted;
}
}  // namespace

void Workload::consumer(forgeyard::Store& store, const std::atomic<bool>& stop, bool stale_sometimes) {
  const std::string name = "consumer-" + std::to_string(process_) + "-" + std::to_string(history::thread_index());
  while (!stop) {
    std::vector<forgeyard::Delivery> batch;
    const std::int64_t invoked = history::now_us();
    try {
      batch = store.queues().claim(names_.tenant, names_.work_queue, name, 2);
    } catch (...) {
      error_kind();
      continue;
    }
    const std::int64_t completed = history::now_us();
    for (const auto& d : batch) {
      Op c = op("claim", d.event_id.value_or(""));
      c.result = {{"msg_id", d.msg_id}, {"token", d.claim_token}, {"attempt", d.attempt}};
      c.invoked_us = invoked;
      c.completed_us = completed;
      c.outcome = history::Outcome::Ok;
      rec_.record(std::move(c));
    }
    if (batch.empty()) std::this_thread::sleep_for(5ms);
    for (const auto& d : batch) {
      if (stale_sometimes && random_below(40) == 0)
        std::this_thread::sleep_for(700ms);  // past the visibility: a stale token
      const auto id =
          rec_.invoke(op("consume", d.event_id.value_or(""), {{"msg_id", d.msg_id}, {"token", d.claim_token}}));
      bool committing = false;
      try {
        const bool accepted = consume_one(store, names_, d, committing);
        rec_.ok(id, {{"accepted", accepted ? 1 : 0}});
      } catch (...) {
        settle(id, committing ? Phase::Commit : Phase::InTransaction);
      }
    }
  }
}

void Workload::lease_worker(forgeyard::Store& store, const std::atomic<bool>& stop) {
  const std::string owner = "holder-" + std::to_string(process_) + "-" + std::to_string(history::thread_index());
  while (!stop) {
    const std::string& resource = names_.lease_resources[random_below(static_cast<int>(names_.lease_resources.size()))];
    const auto aid = rec_.invoke(op("acquire", resource, {}, owner));
    forgeyard::LeaseGrant grant;
    try {
      grant = store.leases().acquire(names_.tenant, resource, owner, 300ms);
      rec_.ok(aid, {{"acquired", grant.acquired ? 1 : 0}, {"epoch", grant.epoch}}, owner);
    } catch (...) {
      settle(aid, Phase::Commit);
      continue;
    }
    if (!grant.acquired) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + random_below(20)));
      continue;
    }
    const int writes = 1 + random_below(3);
    for (int w = 0; w < writes && !stop; ++w) {
      if (random_below(10) == 0) std::this_thread::sleep_for(400ms);  // outlive the ttl: a stale holder
      const std::int64_t wid = std::int64_t{process_} * 1'000'000'000 + next_++;
      const auto id = rec_.invoke(op("write", resource, {{"epoch", grant.epoch}, {"wid", wid}}, owner));
      bool committing = false;
      try {
        auto tx = store.begin();
        tx->leases().fence(names_.tenant, resource, grant.epoch);
        forgeyard::AuditEvent e;
        e.actor = owner;
        e.action = "fenced.write";
        e.resource = "e" + std::to_string(grant.epoch) + "/w" + std::to_string(wid);
        tx->audit().append(names_.lease_log_tenant(resource), e);
        pause();
        committing = true;
        tx->commit();
        rec_.ok(id);
      } catch (...) {
        settle(id, committing ? Phase::Commit : Phase::InTransaction);
        break;
      }
    }
    if (random_below(3) == 0) {
      try {
        store.leases().release(names_.tenant, resource, grant.epoch);
      } catch (...) {
        error_kind();
      }
    }
  }
}

void Workload::cas_worker(forgeyard::Store& store, const std::atomic<bool>& stop, int first, int count) {
  while (!stop) {
    const int row = first + random_below(count);
    std::optional<forgeyard::VersionedRow> current;
    try {
      current = store.versioned_rows().get(names_.cas_table, row_key(names_, row));
    } catch (...) {
      error_kind();
      continue;
    }
    if (!current) throw std::runtime_error("compare-and-set row vanished");
    const std::string t = tag();
    const std::string& log = std::get<std::string>(current->values.at("note"));
    const auto id = rec_.invoke(op("cas", row_name(row), {{"expected", current->version}}, t));
    try {
      const std::int64_t v =
          store.versioned_rows().update(names_.cas_table, row_key(names_, row), current->version,
                                        {{"note", log.empty() ? t : log + "," + t}, {"value", current->version}});
      rec_.ok(id, {{"version", v}}, t);
    } catch (...) {
      settle(id, Phase::Commit);
    }
  }
}

void Workload::pair_worker(forgeyard::Store& store, const std::atomic<bool>& stop) {
  while (!stop) {
    int rows[2] = {names_.cas_rows, names_.cas_rows + 1};
    if (random_below(2) == 0) std::swap(rows[0], rows[1]);
    std::vector<std::size_t> ids;
    bool committing = false;
    try {
      auto tx = store.begin();
      for (int row : rows) {
        auto current = tx->versioned_rows().get(names_.cas_table, row_key(names_, row));
        if (!current) throw std::runtime_error("compare-and-set row vanished");
        const std::string t = tag();
        const std::string& log = std::get<std::string>(current->values.at("note"));
        ids.push_back(rec_.invoke(op("cas", row_name(row), {{"expected", current->version}}, t)));
        tx->versioned_rows().update(names_.cas_table, row_key(names_, row), current->version,
                                    {{"note", log.empty() ? t : log + "," + t}, {"value", current->version}});
        std::this_thread::sleep_for(std::chrono::milliseconds(random_below(3)));
      }
      committing = true;
      tx->commit();
      for (auto id : ids) rec_.ok(id);
    } catch (...) {
      const std::string error = error_kind();
      const bool unknown = committing && in_doubt(error);
      for (auto id : ids) unknown ? rec_.unknown(id, error) : rec_.failed(id, error);
    }
  }
}

void Workload::idempotent_worker(forgeyard::Store& store, const std::atomic<bool>& stop) {
  while (!stop) {
    const std::string key = "cmd-" + tag();
    const forgeyard::IdempotencyKey k{names_.tenant, "fault.command", key};
    const auto digest = forgeyard::request_digest(key);
    // Retried, also across CommitUnknown: the key makes the retries one effect.
    for (int attempt = 0; attempt < 20; ++attempt) {
      const auto id = rec_.invoke(op("idem", key));
      bool committing = false;
      try {
        auto tx = store.begin();
        auto begun = tx->idempotency().begin(k, digest, 2s);
        const bool replay = begun.status == forgeyard::IdempotencyBegin::Status::Replay;
        if (!replay) {
          forgeyard::OutgoingMessage effect;
          effect.payload = "idem:" + key;
          tx->queues().enqueue(names_.tenant, names_.effects_queue, effect);
          tx->idempotency().complete(k, key, begun.attempt);
        }
        pause();
        committing = true;
        tx->commit();
        rec_.ok(id, {{"replay", replay ? 1 : 0}});
        break;
      } catch (...) {
        settle(id, committing ? Phase::Commit : Phase::InTransaction);
        std::this_thread::sleep_for(std::chrono::milliseconds(10 + random_below(20)));
      }
      if (stop && attempt > 5) break;
    }
  }
}

void Workload::workflow_worker(forgeyard::Store& store, const std::atomic<bool>& stop) {
  forgeyard::WorkflowWorker worker(store, fault_worker_options(names_, "wf-" + std::to_string(process_)));
  add_fault_workflow(worker, names_, [this] { pause(); });
  std::stop_source halt;
  std::jthread watch([&](std::stop_token own) {
    while (!own.stop_requested() && !stop) std::this_thread::sleep_for(10ms);
    halt.request_stop();
  });
  int started = 0;
  while (!stop) {
    if (started < names_.max_runs_per_process) {
      ++started;
      const std::string key = "wf-" + tag();
      const std::string input = R"({"key":")" + key + R"("})";
      // The same run_key and input again return the run: a retry after an unknown outcome.
      for (int attempt = 0; attempt < 20 && !stop; ++attempt) {
        const auto id = rec_.invoke(op("wf_start", key));
        bool committing = false;
        try {
          auto tx = store.begin();
          tx->workflows().start(names_.tenant, names_.workflow, 1, key, input);
          pause();
          committing = true;
          tx->commit();
          rec_.ok(id);
          break;
        } catch (...) {
          settle(id, committing ? Phase::Commit : Phase::InTransaction);
          std::this_thread::sleep_for(std::chrono::milliseconds(10 + random_below(20)));
        }
      }
    }
    try {
      worker.run(halt.get_token());
    } catch (...) {
      error_kind();  // counted; the runs in hand are left to their leases
      std::this_thread::sleep_for(std::chrono::milliseconds(10 + random_below(20)));
    }
    if (started >= names_.max_runs_per_process) std::this_thread::sleep_for(20ms);
  }
}

void Workload::audit_worker(forgeyard::Store& store, const std::atomic<bool>& stop) {
  while (!stop) {
    forgeyard::AuditEvent e;
    e.actor = "auditor-" + std::to_string(process_);
    e.action = "fault.append";
    e.resource = tag();
    e.event_id = new_uuid();
    e.occurred_at = forgeyard::TimePoint(std::chrono::duration_cast<forgeyard::Duration>(
        forgeyard::Clock::now().time_since_epoch()));  // fixed, so a retry has the same contents
    // The same event id on a retry: a safe retry returns the first (seq, hash).
    for (int attempt = 0; attempt < 3 && !stop; ++attempt) {
      const auto id = rec_.invoke(op("audit_append", names_.audit_tenant, {}, *e.event_id));
      try {
        const auto head = store.audit().append(names_.audit_tenant, e);
        rec_.ok(id, {{"seq", head.seq}});
        break;
      } catch (...) {
        settle(id, Phase::Commit);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random_below(5)));
  }
}

void read_back(forgeyard::Store& store, const Names& n, Workload& workload, history::Recorder& rec) {
  // Drain the work queue through the inbox consumer until nothing is ready, in flight or delayed.
  // The backlog left by the faults depends on the machine's speed, so the drain is bounded by
  // progress (give up after 60 s without the backlog shrinking), not by a fixed time.
  std::atomic<bool> stop{false};
  std::vector<std::thread> drainers;
  for (int i = 0; i < 3; ++i) drainers.emplace_back([&] { workload.consumer(store, stop, false); });
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  std::int64_t backlog = -1;
  while (std::chrono::steady_clock::now() - last_progress < 60s) {
    const auto s = store.queues().stats(n.tenant, n.work_queue);
    const std::int64_t left = s.ready + s.in_flight + s.delayed;
    if (backlog < 0) backlog = left;
    if (left == 0) break;
    if (left < least) {
      least = left;
      last_progress = std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(100ms);
  }
  stop = true;
  for (auto& t : drainers) t.join();
  std::printf(
      "drain after the faults: %lld messages left, %lld ms\n", static_cast<long long>(backlog),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count()));
  const auto s = store.queues().stats(n.tenant, n.work_queue);
  // What is still there counts as present (never expected: the drain above empties the queue).
  for (const auto& d : store.queues().claim(n.tenant, n.work_queue, "reader", 1000, 600s)) {
    Op p;
    p.kind = "present";
    p.key = d.event_id.value_or("");
    rec.observe(p);
  }
  Op q;
  q.kind = "queue_final";
  q.key = n.work_queue;
  q.result = {
      {"ready", s.ready}, {"in_flight", s.in_flight}, {"delayed", s.delayed}, {"dead", s.dead}, {"bytes", s.bytes}};
  rec.observe(q);

  // Workflow runs: a clean worker finishes what it can; a run whose owner was killed comes back
  // once its lease runs out, so passes go on while they make progress (or runs are left to wait).
  {
    forgeyard::WorkflowWorkerOptions o = fault_worker_options(n, "reader");
    o.threads = 2;
    forgeyard::WorkflowWorker worker(store, o);
    add_fault_workflow(worker, n, [] {});
    auto unfinished = [&] {
      int count = 0;
      for (const auto& r : store.workflows().list(n.tenant, std::nullopt, 1000))
        if (r.state == "pending" || r.state == "running") ++count;
      return count;
    };
    int left = unfinished(), idle_passes = 0;
    for (int pass = 0; pass < 60 && left > 0 && idle_passes < 12; ++pass) {
      worker.run({});
      const int now_left = unfinished();
      idle_passes = now_left < left ? 0 : idle_passes + 1;
      left = now_left;
      if (left > 0) std::this_thread::sleep_for(250ms);
    }
    for (const auto& r : store.workflows().list(n.tenant, std::nullopt, 1000)) {
      Op w;
      w.kind = "wf_run";
      w.key = r.run_key;
      w.text = r.state;
      w.args = {{"steps", n.workflow_steps}};
      rec.observe(w);
    }
  }

  // Effects: every message of the effects queue, claimed and acked once.
  while (true) {
    auto batch = store.queues().claim(n.tenant, n.effects_queue, "reader", 1000, 600s);
    if (batch.empty()) break;
    for (const auto& d : batch) {
      Op e;
      const auto colon = d.payload.find(':');
      const std::string prefix = d.payload.substr(0, colon);
      e.kind = prefix == "inbox" ? "effect" : prefix == "wf" ? "wf_effect" : "idem_effect";
      e.key = d.payload.substr(colon + 1);
      rec.observe(e);
      store.queues().ack(n.tenant, n.effects_queue, d.msg_id, d.claim_token);
    }
  }

  // Audit chains: the lease logs and the audit workload's chain.
  auto read_chain = [&](const std::string& tenant, const std::function<void(const forgeyard::AuditRecord&)>& each) {
    std::int64_t from = 1;
    while (true) {
      auto records = store.audit().read(tenant, from, 1000);
      if (records.empty()) break;
      for (const auto& r : records) each(r);
      from = records.back().seq + 1;
    }
    const auto v = store.audit().verify(tenant);
    Op o;
    o.kind = "audit_verify";
    o.key = tenant;
    o.result = {{"ok", v.ok ? 1 : 0}, {"checked", v.checked}, {"head_seq", store.audit().head(tenant).seq}};
    rec.observe(o);
  };
  for (const std::string& resource : n.lease_resources) {
    read_chain(n.lease_log_tenant(resource), [&](const forgeyard::AuditRecord& r) {
      long long epoch = 0, wid = 0;
      std::sscanf(r.resource.c_str(), "e%lld/w%lld", &epoch, &wid);
      Op w;
      w.kind = "write_seen";
      w.key = resource;
      w.text = r.actor;
      w.args = {{"seq", r.seq}, {"epoch", epoch}, {"wid", wid}};
      rec.observe(w);
      Op a;
      a.kind = "audit_seen";
      a.key = n.lease_log_tenant(resource);
      a.text = r.event_id;
      a.args = {{"seq", r.seq}};
      rec.observe(a);
    });
  }
  read_chain(n.audit_tenant, [&](const forgeyard::AuditRecord& r) {
    Op a;
    a.kind = "audit_seen";
    a.key = n.audit_tenant;
    a.text = r.event_id;
    a.args = {{"seq", r.seq}};
    rec.observe(a);
  });

  // Compare-and-set rows: the log of committed updates and the version.
  for (int row = 0; row < n.cas_rows + n.pair_rows; ++row) {
    auto current = store.versioned_rows().get(n.cas_table, row_key(n, row));
    Op f;
    f.kind = "cas_final";
    f.key = row_name(row);
    f.text = current ? std::get<std::string>(current->values.at("note")) : "";
    f.result = {{"version", current ? current->version : 0}};
    rec.observe(f);
  }
}

std::string format_counts(const std::map<std::string, std::int64_t>& counts) {
  std::string s;
  for (const auto& [k, v] : counts) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s.empty() ? "none" : s;
}

}  // namespace faults
