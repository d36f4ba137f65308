// Client internals: the error table, redaction, retry, the pool.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include "forgeyard/error.hpp"
#include "forgeyard/retry.hpp"
#include "instruments.hpp"
#include "pool.hpp"

using forgeyard::Error;
using forgeyard::ErrorKind;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(client_internals)

BOOST_AUTO_TEST_CASE(every_sqlstate_of_the_contract_maps_to_its_kind) {
  struct Row {
    const char* code;
    ErrorKind kind;
    bool retryable;
  };
  const Row table[] = {
      {"FY001", ErrorKind::StaleFence, false},
      {"FY002", ErrorKind::Conflict, false},
      {"FY010", ErrorKind::InProgress, true},
      {"FY011", ErrorKind::IdempotencyMismatch, false},
      {"FY020", ErrorKind::QueueFull, true},
      {"FY021", ErrorKind::PayloadTooLarge, false},
      {"FY030", ErrorKind::AppendOnly, false},
      {"FY040", ErrorKind::TenantDenied, false},
      {"FY050", ErrorKind::SchemaUnsupported, false},
      {"FY060", ErrorKind::Nondeterminism, false},
      {"22004", ErrorKind::InvalidArgument, false},
      {"22001", ErrorKind::InvalidArgument, false},
      {"22023", ErrorKind::InvalidArgument, false},
      {"42704", ErrorKind::NotFound, false},
      {"P0002", ErrorKind::NotFound, false},
      {"42501", ErrorKind::PermissionDenied, false},
      {"40001", ErrorKind::SerializationFailure, true},
      {"40P01", ErrorKind::SerializationFailure, true},
      {"08006", ErrorKind::Unavailable, true},
      {"08001", ErrorKind::Unavailable, true},
      {"57P01", ErrorKind::Unavailable, true},
      {"57P03", ErrorKind::Unavailable, true},
      {"57014", ErrorKind::Timeout, false},
      {"XX001", ErrorKind::Corruption, false},
      {"XX002", ErrorKind::Corruption, false},
      {"XX000", ErrorKind::Internal, false},
  };
  for (const Row& r : table) {
    BOOST_TEST_CONTEXT(r.code) {
      Error e(r.code, "m");
      BOOST_TEST(forgeyard::to_string(e.kind()) == forgeyard::to_string(r.kind));
      BOOST_TEST(e.retryable() == r.retryable);
      BOOST_TEST(e.sqlstate() == r.code);
    }
  }
  BOOST_TEST(!forgeyard::is_retryable(ErrorKind::CommitUnknown));
}

BOOST_AUTO_TEST_CASE(connection_strings_are_logged_without_passwords) {
  using forgeyard::detail::redact;
  BOOST_TEST(redact("postgresql://app:s3cret@db.example:5432/prod") == "postgresql://app:***@db.example:5432/prod");
  BOOST_TEST(redact("postgresql://app@db/prod?password=s3cret&sslmode=require") ==
             "postgresql://app@db/prod?password=***&sslmode=require");
  BOOST_TEST(redact("host=db user=app password='se cret' dbname=x") == "host=db user=app password=*** dbname=x");
  BOOST_TEST(redact("postgresql://app@db/prod") == "postgresql://app@db/prod");
}

BOOST_AUTO_TEST_CASE(retry_retries_only_retryable_kinds_and_never_an_unknown_commit) {
  forgeyard::RetryPolicy policy;
  policy.max_attempts = 4;
  policy.base_delay = 1ms;
  policy.max_delay = 2ms;
  int calls = 0;
  int result = forgeyard::with_retry(
      [&] {
        if (++calls < 3) throw Error("40001", "serialization failure");
        return 7;
      },
      policy);
  BOOST_TEST(result == 7);
  BOOST_TEST(calls == 3);

  calls = 0;
  BOOST_CHECK_THROW(forgeyard::with_retry(
                        [&]() -> int {
                          ++calls;
                          throw Error("40P01", "deadlock");
                        },
                        policy),
                    Error);
  BOOST_TEST(calls == 4);  // bounded

  calls = 0;
  BOOST_CHECK_THROW(forgeyard::with_retry(
                        [&]() -> int {
                          ++calls;
                          throw Error(ErrorKind::CommitUnknown, "08006", "lost during commit");
                        },
                        policy),
                    Error);
  BOOST_TEST(calls == 1);

  calls = 0;
  BOOST_CHECK_THROW(forgeyard::with_retry(
                        [&]() -> int {
                          ++calls;
                          throw Error("08006", "lost");
                        },
                        policy),
                    Error);
  BOOST_TEST(calls == 1);  // not idempotent: a lost connection is not retried
  policy.idempotent = true;
  calls = 0;
  BOOST_CHECK_THROW(forgeyard::with_retry(
                        [&]() -> int {
                          ++calls;
                          throw Error("08006", "lost");
                        },
                        policy),
                    Error);
  BOOST_TEST(calls == 4);

  calls = 0;
  BOOST_CHECK_THROW(forgeyard::with_retry(
                        [&]() -> int {
                          ++calls;
                          throw Error("FY001", "stale");
                        },
                        policy),
                    Error);
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(retry_delays_stay_under_the_cap) {
  forgeyard::RetryPolicy policy;
  policy.base_delay = 10ms;
  policy.max_delay = 50ms;
  for (int attempt = 1; attempt < 20; ++attempt) {
    auto d = forgeyard::retry_delay(attempt, policy);
    BOOST_TEST(d.count() >= 0);
    BOOST_TEST(d.count() <= 50'000);
  }
}

namespace {
struct FakeConn {
  static inline std::atomic<int> opened{0};
  bool healthy = true;
  FakeConn() { ++opened; }
  bool reusable() const { return healthy; }
};
}  // namespace

BOOST_AUTO_TEST_CASE(pool_bounds_connections_times_out_and_counts) {
  forgeyard::PoolOptions options;
  options.max_connections = 2;
  options.acquire_timeout = 50ms;
  forgeyard::detail::Pool<FakeConn> pool(options, [] { return std::make_unique<FakeConn>(); });
  {
    auto a = pool.acquire();
    auto b = pool.acquire();
    BOOST_TEST(pool.stats().in_use == 2);
    try {
      pool.acquire();
      BOOST_FAIL("expected a timeout");
    } catch (const Error& e) {
      BOOST_TEST(forgeyard::to_string(e.kind()) == "Timeout");
    }
    b->healthy = false;  // a broken connection is closed, not reused
  }
  auto s = pool.stats();
  BOOST_TEST(s.created == 2u);
  BOOST_TEST(s.closed == 1u);
  BOOST_TEST(s.idle == 1);
  BOOST_TEST(s.in_use == 0);
  BOOST_TEST(s.timed_out == 1u);
  BOOST_TEST(s.waited == 1u);
  auto c = pool.acquire();  // the idle one is reused
  BOOST_TEST(pool.stats().created == 2u);
}

BOOST_AUTO_TEST_CASE(pool_hands_a_returned_connection_to_a_waiter) {
  forgeyard::PoolOptions options;
  options.max_connections = 1;
  options.acquire_timeout = 5s;
  forgeyard::detail::Pool<FakeConn> pool(options, [] { return std::make_unique<FakeConn>(); });
  auto held = std::make_unique<forgeyard::detail::Pool<FakeConn>::Handle>(pool.acquire());
  std::thread giver([&] {
    std::this_thread::sleep_for(50ms);
    held.reset();
  });
  auto got = pool.acquire();
  giver.join();
  BOOST_TEST(pool.stats().created == 1u);
  BOOST_TEST(pool.stats().waited == 1u);
}

BOOST_AUTO_TEST_CASE(pool_gives_a_thread_back_the_connection_it_used_last) {
  forgeyard::PoolOptions options;
  options.max_connections = 2;
  forgeyard::detail::Pool<FakeConn> pool(options, [] { return std::make_unique<FakeConn>(); });
  FakeConn* mine = nullptr;
  FakeConn* theirs = nullptr;
  {
    auto a = pool.acquire();
    mine = &*a;
    std::thread other([&] {
      auto b = pool.acquire();
      theirs = &*b;
    });  // the other thread returns its connection last
    other.join();
  }
  BOOST_TEST(mine != theirs);
  for (int i = 0; i < 3; ++i) BOOST_TEST(&*pool.acquire() == mine);
  std::thread([&] { BOOST_TEST(&*pool.acquire() == theirs); }).join();
}

BOOST_AUTO_TEST_CASE(pool_drops_connections_past_their_lifetime) {
  forgeyard::PoolOptions options;
  options.max_connections = 1;
  options.max_lifetime = 1ms;
  forgeyard::detail::Pool<FakeConn> pool(options, [] { return std::make_unique<FakeConn>(); });
  {
    auto a = pool.acquire();
    std::this_thread::sleep_for(5ms);
  }
  auto b = pool.acquire();
  BOOST_TEST(pool.stats().created == 2u);
  BOOST_TEST(pool.stats().closed == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
