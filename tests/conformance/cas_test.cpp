// Compare-and-set by entity version: docs/sql-api.md#compare-and-set, on every backend.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <barrier>
#include <future>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "check.hpp"

using forgeyard::ErrorKind;
using forgeyard::Fields;

namespace {
struct CasFixture : conformance::Backend {
  std::string table;
  CasFixture() : table(unique_identifier("cas")) {
    create_versioned_table(table);
    exec_sql("INSERT INTO " + table + " (tenant_id, id, value, note) VALUES ('" + tenant + "', 1, 10, 'first')");
  }
  Fields key(std::int64_t id = 1) const { return {{"tenant_id", tenant}, {"id", id}}; }
  std::int64_t value_of(const forgeyard::VersionedRow& row) const {
    return std::get<std::int64_t>(row.values.at("value"));
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(compare_and_set, CasFixture)

BOOST_AUTO_TEST_CASE(a_new_row_starts_at_version_1_and_each_update_moves_it_by_one) {
  auto row = store->versioned_rows().get(table, key());
  BOOST_REQUIRE(row.has_value());
  BOOST_TEST(row->version == 1);
  BOOST_TEST(value_of(*row) == 10);
  BOOST_TEST(std::get<std::string>(row->values.at("note")) == "first");
  BOOST_TEST(store->versioned_rows().update(table, key(), 1, {{"value", std::int64_t{11}}, {"note", "second"}}) == 2);
  BOOST_TEST(store->versioned_rows().update(table, key(), 2, {{"note", nullptr}}) == 3);
  row = store->versioned_rows().get(table, key());
  BOOST_TEST(row->version == 3);
  BOOST_TEST(value_of(*row) == 11);
  BOOST_TEST(std::holds_alternative<std::nullptr_t>(row->values.at("note")));
}

BOOST_AUTO_TEST_CASE(a_stale_version_is_a_conflict_naming_expected_and_current) {
  store->versioned_rows().update(table, key(), 1, {{"value", std::int64_t{20}}});
  const auto e = conformance::expect_error([&] {
    store->versioned_rows().update(table, key(), 1, {{"value", std::int64_t{99}}});
  });
  BOOST_TEST(forgeyard::to_string(e.kind()) == "Conflict");
  BOOST_TEST(e.sqlstate() == "FY002");
  BOOST_TEST(e.detail() == "expected version 1, current version 2");
  BOOST_TEST(value_of(*store->versioned_rows().get(table, key())) == 20);  // the stale write was not applied
}

BOOST_AUTO_TEST_CASE(not_found_and_conflict_are_different_answers) {
  FY_CHECK_ERROR(store->versioned_rows().update(table, key(404), 1, {{"value", std::int64_t{1}}}), ErrorKind::NotFound,
                 "P0002");
  BOOST_TEST(!store->versioned_rows().get(table, key(404)).has_value());
  FY_CHECK_ERROR(store->versioned_rows().update("no_such_table_here", key(), 1, {{"value", std::int64_t{1}}}),
                 ErrorKind::NotFound, "42P01");
}

BOOST_AUTO_TEST_CASE(bad_keys_and_changes_are_refused_and_change_nothing) {
  auto& rows = store->versioned_rows();
  const Fields change{{"value", std::int64_t{5}}};
  FY_CHECK_ERROR(rows.update(table, key(), 1, {{"bogus", std::int64_t{1}}}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, key(), 1, {{"entity_version", std::int64_t{7}}}), ErrorKind::InvalidArgument,
                 "22023");
  FY_CHECK_ERROR(rows.update(table, key(), 1, {{"tenant_id", "other"}}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, key(), 1, {{"id", std::int64_t{2}}}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, key(), 1, {}), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, {{"id", std::int64_t{1}}}, 1, change), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, {{"tenant_id", tenant}}, 1, change), ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(
      rows.update(table, {{"tenant_id", tenant}, {"id", std::int64_t{1}}, {"nope", std::int64_t{1}}}, 1, change),
      ErrorKind::InvalidArgument, "22023");
  FY_CHECK_ERROR(rows.update(table, key(), 0, change), ErrorKind::InvalidArgument, "22023");
  const auto e = conformance::expect_error([&] { rows.update(table, key(), 1, {{"bogus", std::int64_t{1}}}); });
  BOOST_TEST(std::string(e.what()).find("bogus") != std::string::npos);
  auto row = rows.get(table, key());
  BOOST_TEST(row->version == 1);
  BOOST_TEST(value_of(*row) == 10);
}

BOOST_AUTO_TEST_CASE(only_versioned_tables_with_a_proper_column_are_accepted) {
  const std::string plain = unique_identifier("plain");
  exec_sql("CREATE TABLE " + plain + " (id integer PRIMARY KEY, value integer)");
  FY_CHECK_ERROR(store->versioned_rows().enable(plain), ErrorKind::InvalidArgument, "42703");
  const std::string nullable = unique_identifier("nullable");
  exec_sql("CREATE TABLE " + nullable + " (id integer PRIMARY KEY, entity_version bigint)");
  FY_CHECK_ERROR(store->versioned_rows().enable(nullable), ErrorKind::InvalidArgument, "22023");
  const std::string unversioned = unique_identifier("unversioned");
  exec_sql("CREATE TABLE " + unversioned + " (id integer PRIMARY KEY, entity_version bigint NOT NULL DEFAULT 1)");
  FY_CHECK_ERROR(store->versioned_rows().update(unversioned, {{"id", std::int64_t{1}}}, 1, {{"id", std::int64_t{2}}}),
                 ErrorKind::InvalidArgument, "22023");
  store->versioned_rows().enable(unversioned);
  store->versioned_rows().enable(unversioned);  // idempotent
}

BOOST_AUTO_TEST_CASE(a_key_may_add_tenant_id_to_a_globally_unique_id) {
  const std::string global = unique_identifier("global");
  exec_sql("CREATE TABLE " + global +
           " (id integer PRIMARY KEY, tenant_id text NOT NULL, value integer,"
           " entity_version " +
           std::string(is_postgres() ? "bigint" : "INTEGER") + " NOT NULL DEFAULT 1)");
  store->versioned_rows().enable(global);
  exec_sql("INSERT INTO " + global + " (id, tenant_id, value) VALUES (7, '" + tenant + "', 1)");
  const Fields k{{"tenant_id", tenant}, {"id", std::int64_t{7}}};
  BOOST_TEST(store->versioned_rows().update(global, k, 1, {{"value", std::int64_t{2}}}) == 2);
  FY_CHECK_ERROR(store->versioned_rows().update(global, {{"id", std::int64_t{7}}}, 2, {{"value", std::int64_t{3}}}),
                 ErrorKind::InvalidArgument, "22023");  // tenant_id is still required
  FY_CHECK_ERROR(store->versioned_rows().update(global, {{"tenant_id", tenant}, {"value", std::int64_t{2}}}, 2,
                                                {{"value", std::int64_t{3}}}),
                 ErrorKind::InvalidArgument, "22023");  // no unique key inside
}

BOOST_AUTO_TEST_CASE(values_are_bound_as_data) {
  const std::string hostile = "x'); DROP TABLE " + table + "; --\"";
  store->versioned_rows().update(table, key(), 1, {{"note", hostile}});
  BOOST_TEST(std::get<std::string>(store->versioned_rows().get(table, key())->values.at("note")) == hostile);
}

BOOST_AUTO_TEST_CASE(an_update_in_a_rolled_back_transaction_leaves_the_version) {
  {
    auto tx = store->begin();
    BOOST_TEST(tx->versioned_rows().update(table, key(), 1, {{"value", std::int64_t{50}}}) == 2);
    tx->rollback();
  }
  BOOST_TEST(store->versioned_rows().get(table, key())->version == 1);
}

BOOST_AUTO_TEST_CASE(eight_connections_from_one_expected_version_exactly_one_wins) {
  constexpr int racers = 8;
  std::vector<std::unique_ptr<forgeyard::Store>> stores;
  for (int i = 0; i < racers; ++i) stores.push_back(open_another(1));
  std::barrier start(racers);
  std::vector<std::future<bool>> results;
  for (int i = 0; i < racers; ++i)
    results.push_back(std::async(std::launch::async, [&, i] {
      start.arrive_and_wait();
      try {
        stores[i]->versioned_rows().update(table, key(), 1, {{"value", std::int64_t{100 + i}}});
        return true;
      } catch (const forgeyard::Error& e) {
        if (e.kind() != ErrorKind::Conflict) throw;
        return false;
      }
    }));
  int winners = 0;
  for (auto& r : results) winners += r.get() ? 1 : 0;
  BOOST_TEST(winners == 1);
  BOOST_TEST(store->versioned_rows().get(table, key())->version == 2);
}

BOOST_AUTO_TEST_CASE(no_increment_is_lost_across_four_threads) {
  constexpr int threads = 4;
  constexpr int per_thread = 500;  // 2,000 read-modify-write increments in all, hundreds of them conflicts
  std::atomic<int> conflicts{0}, busy{0}, failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      try {
        auto s = open_another(1);
        for (int i = 0; i < per_thread; ++i)
          for (;;) {
            try {
              auto row = s->versioned_rows().get(table, key());
              s->versioned_rows().update(table, key(), row->version, {{"value", value_of(*row) + 1}});
              break;
            } catch (const forgeyard::Error& e) {
              // A conflict is the point of the test. SerializationFailure is SQLite's busy
              // timeout running out for a writer that kept losing the lock: nothing was
              // written, so it is retried too. Anything else fails the test.
              if (e.kind() == ErrorKind::SerializationFailure) {
                ++busy;
                continue;
              }
              if (e.kind() != ErrorKind::Conflict) throw;
              ++conflicts;
            }
          }
      } catch (...) {
        ++failures;
      }
    });
  for (auto& w : workers) w.join();
  auto row = store->versioned_rows().get(table, key());
  BOOST_TEST(value_of(*row) == 10 + threads * per_thread);
  BOOST_TEST(row->version == 1 + threads * per_thread);
  BOOST_TEST(failures == 0);
  BOOST_TEST_MESSAGE("conflicts retried: " << conflicts.load() << ", busy retried: " << busy.load());
}

BOOST_AUTO_TEST_SUITE_END()
