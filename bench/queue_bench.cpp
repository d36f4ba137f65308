// Queues through the client against a hand-written baseline over a plain indexed table, in the
// same run: claim (FOR UPDATE SKIP LOCKED, visibility by UPDATE) + DELETE ack, single and in
// batches; the one-round-trip ack+claim; enqueue with bounds vs a plain INSERT; and the client's
// claim latency at a deep queue vs a shallow one. Prints the ratios.
//
// usage: queue_bench [--iterations N] [--batches B] [--pg URL] [--sqlite-dir DIR] [--depth D]
// --batches: calls of 100 messages in the batch lines (default N / 100)
#include <algorithm>
#include <chrono>

#include "forgeyard/forgeyard.hpp"
#include "harness.hpp"

namespace {

int batch_calls = 0;  // --batches: 0 takes iterations / 100

using namespace bench;
using namespace std::chrono_literals;

const char* tenant = "bench";

void report_one(const char* what, const char* backend, const Config& c, double client, double baseline) {
  bench::report(what, backend, c, client, baseline);
}

// The client side of each measurement, the same on both backends.
struct ClientRuns {
  forgeyard::Store& store;
  const Config& c;

  void fill(const std::string& queue, int n) {
    for (int done = 0; done < n;) {
      auto tx = store.begin();
      for (int i = 0; i < 1000 && done < n; ++i, ++done)
        tx->queues().enqueue(tenant, queue, {"payload-" + std::to_string(done)});
      tx->commit();
    }
  }
  double enqueue(const std::string& queue) {
    return measure(c, [&](int, int i) { store.queues().enqueue(tenant, queue, {"payload-" + std::to_string(i)}); });
  }
  double claim_ack(const std::string& queue) {
    fill(queue, c.iterations);
    return measure(c, [&](int, int) {
      auto d = store.queues().claim(tenant, queue, "bench", 1);
      if (d.empty()) throw std::runtime_error("client: queue ran dry");
      store.queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
    });
  }
  double ack_and_claim(const std::string& queue, int batch) {
    fill(queue, c.iterations * batch);
    std::vector<forgeyard::Ack> acks;
    const double calls = measure(c, [&](int, int) {
      auto got = store.queues().ack_and_claim(tenant, queue, "bench", acks, batch);
      acks.clear();
      for (const auto& d : got) acks.emplace_back(d.msg_id, d.claim_token);
    });
    return calls * batch;  // messages per second
  }
  // enqueue_many of `batch` messages per call, in `runs` runs of different classes (on PostgreSQL a
  // statement each, pipelined); messages per second.
  double enqueue_many(const std::string& queue, int batch, int runs) {
    static constexpr forgeyard::Priority classes[] = {forgeyard::Priority::Realtime, forgeyard::Priority::Interactive,
                                                      forgeyard::Priority::Background, forgeyard::Priority::Bulk};
    const double calls = measure(c, [&](int, int call) {
      std::vector<forgeyard::OutgoingMessage> list(batch);
      for (int i = 0; i < batch; ++i) {
        list[i].payload = "payload-" + std::to_string(call * batch + i);
        list[i].priority = classes[(i * runs / batch) % 4];
      }
      store.queues().enqueue_many(tenant, queue, list);
    });
    return calls * batch;
  }
  // Mean seconds per claim+ack at the queue's current depth.
  double claim_latency(const std::string& queue, int n) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      auto d = store.queues().claim(tenant, queue, "bench", 1);
      if (d.empty()) throw std::runtime_error("client: queue ran dry");
      store.queues().ack(tenant, queue, d[0].msg_id, d[0].claim_token);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
  }
};

forgeyard::QueueOptions big() {
  forgeyard::QueueOptions o;
  o.max_messages = std::int64_t{1} << 40;
  o.max_bytes = std::int64_t{1} << 50;
  return o;
}

void run_postgres(const Config& c, int depth) {
  Pg setup(c.pg_url);
  setup.exec(
      "DROP TABLE IF EXISTS bench_queue_plain;"
      "CREATE TABLE bench_queue_plain (id bigserial PRIMARY KEY, payload bytea NOT NULL,"
      " visible_at timestamptz NOT NULL DEFAULT clock_timestamp());"
      "CREATE INDEX ON bench_queue_plain (visible_at, id);"
      "SELECT forgeyard.queue_drop('bench', q) FROM unnest(ARRAY['enqueue','single','one_trip','batch','depth','many','many4']) q");
  Pg raw(c.pg_url);
  raw.prepare("insert", "INSERT INTO bench_queue_plain (payload) VALUES ($1::bytea)");
  raw.prepare("claim",
              "UPDATE bench_queue_plain SET visible_at = clock_timestamp() + interval '30 seconds'"
              " WHERE id IN (SELECT id FROM bench_queue_plain WHERE visible_at <= clock_timestamp()"
              "              ORDER BY visible_at, id LIMIT $1::int FOR UPDATE SKIP LOCKED) RETURNING id, payload");
  raw.prepare("ack", "DELETE FROM bench_queue_plain WHERE id = $1::bigint");
  raw.prepare("ack_many", "DELETE FROM bench_queue_plain WHERE id = ANY($1::bigint[])");
  raw.prepare("insert_many", "INSERT INTO bench_queue_plain (payload) SELECT unnest($1::bytea[])");
  auto fill_plain = [&](int n) {
    raw.exec(("INSERT INTO bench_queue_plain (payload) SELECT convert_to('payload-' || g, 'UTF8')"
              " FROM generate_series(1, " +
              std::to_string(n) + ") g")
                 .c_str());
  };
  forgeyard::StoreOptions so;
  so.pool.max_connections = 1;
  auto store = forgeyard::open(c.pg_url, so);
  for (const char* q : {"enqueue", "single", "one_trip", "batch", "depth", "many", "many4"})
    store->queues().create(tenant, q, big());
  ClientRuns client{*store, c};

  const double plain_insert = measure(c, [&](int, int i) { raw.run("insert", {"payload-" + std::to_string(i)}); });
  report_one("enqueue (bounded) vs INSERT", "postgresql", c, client.enqueue("enqueue"), plain_insert);
  raw.exec("TRUNCATE bench_queue_plain");

  fill_plain(c.iterations);
  const double plain_single = measure(c, [&](int, int) {
    const std::string id = raw.run("claim", {"1"});
    raw.run("ack", {id});
  });
  report_one("claim+ack, one message", "postgresql", c, client.claim_ack("single"), plain_single);
  report_one("ack_and_claim vs claim+ack", "postgresql", c, client.ack_and_claim("one_trip", 1), plain_single);

  raw.exec("TRUNCATE bench_queue_plain");
  const int batch = 100;
  Config batches = c;
  batches.iterations = batch_calls > 0 ? batch_calls : std::max(1, c.iterations / batch);
  fill_plain(batches.iterations * batch);
  const double plain_batch = measure(batches,
                                     [&](int, int) {
                                       PGresult* r = nullptr;
                                       const char* n = "100";
                                       r = PQexecPrepared(raw.conn, "claim", 1, &n, nullptr, nullptr, 0);
                                       std::string ids = "{";
                                       for (int i = 0; i < PQntuples(r); ++i)
                                         ids += (i ? "," : "") + std::string(PQgetvalue(r, i, 0));
                                       PQclear(r);
                                       raw.run("ack_many", {ids + "}"});
                                     }) *
                             batch;
  ClientRuns batched{*store, batches};
  report_one("batches of 100 (msgs/s)", "postgresql", batches, batched.ack_and_claim("batch", batch), plain_batch);

  // The baseline's multi-row INSERT of the same payloads, bytea[] in hex like the client's.
  const double plain_many = measure(batches,
                                    [&](int, int call) {
                                      std::string array = "{";
                                      for (int i = 0; i < batch; ++i) {
                                        const std::string p = "payload-" + std::to_string(call * batch + i);
                                        array += (i ? ",\"\\\\x" : "\"\\\\x");
                                        for (unsigned char ch : p) {
                                          static const char* hex = "0123456789abcdef";
                                          array += hex[ch >> 4];
                                          array += hex[ch & 15];
                                        }
                                        array += '"';
                                      }
                                      raw.run("insert_many", {array + "}"});
                                    }) *
                            batch;
  report_one("enqueue_many of 100", "postgresql", batches, batched.enqueue_many("many", batch, 1), plain_many);
  report_one("enqueue_many, 4 classes", "postgresql", batches, batched.enqueue_many("many4", batch, 4), plain_many);
  raw.exec("TRUNCATE bench_queue_plain");

  // Depth: the claim path is an index range scan, so its cost should not grow with the queue.
  client.fill("depth", 1000);
  const double shallow = client.claim_latency("depth", 500);
  setup.exec(
      ("WITH ids AS (SELECT pg_catalog.nextval('forgeyard.message_ids') AS id FROM generate_series(1, " +
       std::to_string(depth) +
       "))"
       " INSERT INTO forgeyard.messages (msg_id, tenant_id, queue, state, priority, is_head, payload, bytes, slot,"
       "   enqueued_at, visible_at) SELECT id, 'bench', 'depth', 'pending', 3, true, 'x', 1, 0, now(), now() FROM ids;"
       " UPDATE forgeyard.queue_slots SET admitted_messages = admitted_messages + " +
       std::to_string(depth) + " WHERE tenant_id = 'bench' AND queue = 'depth' AND slot = 0")
          .c_str());
  setup.exec("VACUUM ANALYZE forgeyard.messages");  // steady state: no autovacuum run inside the measurement
  client.claim_latency("depth", 50);                // warm the caches the deep queue needs
  const double deep = client.claim_latency("depth", 500);
  std::printf("%-28s %-10s claim+ack %.0f us at depth ~1000, %.0f us at depth %d: deep/shallow %.2fx\n",
              "claim latency vs depth", "postgresql", shallow * 1e6, deep * 1e6, depth, deep / shallow);
}

void run_sqlite(const Config& c, int depth) {
  const std::string path = c.sqlite_dir + "/store.db";
  auto store = forgeyard::open("sqlite://" + path);
  for (const char* q : {"enqueue", "single", "one_trip", "batch", "depth", "many", "many4"})
    store->queues().create(tenant, q, big());
  Lite raw(path);
  raw.exec(
      "CREATE TABLE bench_queue_plain (id INTEGER PRIMARY KEY AUTOINCREMENT, payload BLOB NOT NULL,"
      " visible_at INTEGER NOT NULL); CREATE INDEX bench_queue_plain_visible ON bench_queue_plain (visible_at, id)");
  sqlite3_stmt* insert = raw.prepare("INSERT INTO bench_queue_plain (payload, visible_at) VALUES (?1, ?2)");
  sqlite3_stmt* claim = raw.prepare(
      "UPDATE bench_queue_plain SET visible_at = ?1 + 30000000 WHERE id IN (SELECT id FROM bench_queue_plain"
      " WHERE visible_at <= ?1 ORDER BY visible_at, id LIMIT ?2) RETURNING id");
  sqlite3_stmt* ack = raw.prepare("DELETE FROM bench_queue_plain WHERE id = ?1");
  auto in_txn = [&](const std::function<void()>& f) {
    raw.exec("BEGIN IMMEDIATE");
    f();
    raw.exec("COMMIT");
  };
  ClientRuns client{*store, c};
  const double plain_insert = measure(c, [&](int, int i) {
    in_txn([&] {
      const std::string p = "payload-" + std::to_string(i);
      sqlite3_bind_blob(insert, 1, p.data(), static_cast<int>(p.size()), SQLITE_TRANSIENT);
      sqlite3_bind_int64(insert, 2, now_usecs());
      raw.step(insert);
    });
  });
  report_one("enqueue (bounded) vs INSERT", "sqlite", c, client.enqueue("enqueue"), plain_insert);
  auto claim_ids = [&](int n) {
    std::vector<std::int64_t> ids;
    in_txn([&] {
      sqlite3_bind_int64(claim, 1, now_usecs());
      sqlite3_bind_int64(claim, 2, n);
      int rc;
      while ((rc = sqlite3_step(claim)) == SQLITE_ROW) ids.push_back(sqlite3_column_int64(claim, 0));
      sqlite3_reset(claim);
    });
    return ids;
  };
  const double plain_single = measure(c, [&](int, int) {
    for (std::int64_t id : claim_ids(1))
      in_txn([&] {
        sqlite3_bind_int64(ack, 1, id);
        raw.step(ack);
      });
  });
  report_one("claim+ack, one message", "sqlite", c, client.claim_ack("single"), plain_single);
  report_one("ack_and_claim vs claim+ack", "sqlite", c, client.ack_and_claim("one_trip", 1), plain_single);
  const int batch = 100;
  Config batches = c;
  batches.iterations = batch_calls > 0 ? batch_calls : std::max(1, c.iterations / batch);
  in_txn([&] {
    for (int i = 0; i < batches.iterations * batch; ++i) {
      sqlite3_bind_blob(insert, 1, "payload", 7, SQLITE_STATIC);
      sqlite3_bind_int64(insert, 2, 0);
      raw.step(insert);
    }
  });
  const double plain_batch = measure(batches,
                                     [&](int, int) {
                                       auto ids = claim_ids(batch);
                                       in_txn([&] {
                                         for (std::int64_t id : ids) {
                                           sqlite3_bind_int64(ack, 1, id);
                                           raw.step(ack);
                                         }
                                       });
                                     }) *
                             batch;
  ClientRuns batched{*store, batches};
  report_one("batches of 100 (msgs/s)", "sqlite", batches, batched.ack_and_claim("batch", batch), plain_batch);
  const double plain_many =
      measure(batches,
              [&](int, int call) {
                in_txn([&] {
                  for (int i = 0; i < batch; ++i) {
                    const std::string p = "payload-" + std::to_string(call * batch + i);
                    sqlite3_bind_blob(insert, 1, p.data(), static_cast<int>(p.size()), SQLITE_TRANSIENT);
                    sqlite3_bind_int64(insert, 2, now_usecs());
                    raw.step(insert);
                  }
                });
              }) *
      batch;
  report_one("enqueue_many of 100", "sqlite", batches, batched.enqueue_many("many", batch, 1), plain_many);
  report_one("enqueue_many, 4 classes", "sqlite", batches, batched.enqueue_many("many4", batch, 4), plain_many);
  client.fill("depth", 1000);
  const double shallow = client.claim_latency("depth", 500);
  raw.exec(
      "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < " + std::to_string(depth) +
      ") INSERT INTO messages (tenant_id, queue, state, priority, is_head, payload, bytes, enqueued_at, visible_at)"
      " SELECT 'bench', 'depth', 'pending', 3, 1, x'78', 1, 0, 0 FROM g;"
      " UPDATE queues SET used_messages = used_messages + " +
      std::to_string(depth) + " WHERE tenant_id = 'bench' AND queue = 'depth'; ANALYZE");
  client.claim_latency("depth", 50);
  const double deep = client.claim_latency("depth", 500);
  std::printf("%-28s %-10s claim+ack %.0f us at depth ~1000, %.0f us at depth %d: deep/shallow %.2fx\n",
              "claim latency vs depth", "sqlite", shallow * 1e6, deep * 1e6, depth, deep / shallow);
  sqlite3_finalize(insert);
  sqlite3_finalize(claim);
  sqlite3_finalize(ack);
}

}  // namespace

int main(int argc, char** argv) {
  Config c = Config::parse(argc, argv, "queue-bench");
  if (c.threads != 1) {
    std::printf("queue_bench measures one thread (its baselines use one connection); --threads ignored\n");
    c.threads = 1;
  }
  int depth = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--depth") depth = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--batches") batch_calls = std::atoi(argv[i + 1]);
  }
  try {
    std::printf("queues: client vs hand-written SQL baseline (higher ratio is better, except latency vs depth)\n");
    run_sqlite(c, depth);
    if (!c.pg_url.empty()) run_postgres(c, depth);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "queue_bench: %s\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(c.sqlite_dir);
  return 0;
}
