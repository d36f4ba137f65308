// The audit chain's shared core: the canonical encoding reproduces the shipped test vectors
// (written by an independent reference, tests/vectors/make_vectors.py), and the verifier names
// the first bad seq.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/audit.hpp"
#include "core_errors.hpp"

namespace core = fy::core;

namespace {

std::vector<std::string> read_lines(const std::string& name) {
  std::ifstream in(std::filesystem::path(FORGEYARD_SOURCE_DIR) / "tests" / "vectors" / name);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

using unit::code_of;
using unit::message_of;

}  // namespace

BOOST_AUTO_TEST_SUITE(audit_core)

BOOST_AUTO_TEST_CASE(reproduces_the_chain_vectors) {
  const std::vector<std::string> lines = read_lines("audit-v1.jsonl");
  BOOST_REQUIRE_EQUAL(lines.size(), 5u);
  std::string prev = core::genesis_hash();
  for (const std::string& line : lines) {
    core::AuditEvent e = core::parse_audit_json_line(line);
    BOOST_TEST(e.prev_hash == prev);
    BOOST_TEST(core::to_hex(core::audit_hash(e)) == core::to_hex(e.hash), "seq " << e.seq);
    prev = e.hash;
  }
  const core::Verification v = core::verify_exported_chain(lines, core::Anchor{5, prev});
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == 5);
  BOOST_TEST(!v.first_bad_seq.has_value());
}

BOOST_AUTO_TEST_CASE(reproduces_the_canonical_json_vectors) {
  const std::vector<std::string> lines = read_lines("canonical-json.jsonl");
  BOOST_REQUIRE_GE(lines.size(), 20u);
  for (const std::string& line : lines) {
    const core::Json vector = core::parse_json(line, "vector", core::max_details_depth);
    const std::string& input = vector.find("input")->text;
    const std::string& expected = vector.find("canonical")->text;
    BOOST_TEST(core::canonical_details(input) == expected, input);
    // Canonical text is a fixed point.
    BOOST_TEST(core::canonical_details(expected) == expected, input);
  }
}

BOOST_AUTO_TEST_CASE(an_export_line_round_trips) {
  for (const std::string& line : read_lines("audit-v1.jsonl")) {
    const core::AuditEvent e = core::parse_audit_json_line(line);
    const core::AuditEvent back = core::parse_audit_json_line(core::audit_json_line(e));
    BOOST_TEST(core::audit_encoding(back) == core::audit_encoding(e));
    BOOST_TEST(back.hash == e.hash);
    BOOST_TEST(back.prev_hash == e.prev_hash);
  }
}

// The verifier reads an event_id in every spelling `audit append --event-id` accepts (PostgreSQL's,
// core::parse_uuid): the same event, the same hash, the chain still verifies; anything else is 22023.
BOOST_AUTO_TEST_CASE(an_export_line_takes_every_uuid_spelling_that_append_takes) {
  const std::vector<std::string> lines = read_lines("audit-v1.jsonl");
  const core::AuditEvent e = core::parse_audit_json_line(lines.front());
  const std::string dashed = core::format_uuid(e.event_id);
  std::string undashed = dashed;
  std::erase(undashed, '-');
  std::string upper = dashed;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string by_four;  // a dash after every group of four digits
  for (std::size_t i = 0; i < undashed.size(); ++i) by_four += (i > 0 && i % 4 == 0 ? "-" : "") + undashed.substr(i, 1);
  for (const std::string& spelling : {"{" + dashed + "}", undashed, upper, by_four, "{" + undashed + "}"}) {
    BOOST_REQUIRE(core::parse_uuid(spelling));  // what append takes
    std::vector<std::string> changed = lines;
    changed.front().replace(changed.front().find(dashed), dashed.size(), spelling);
    const core::AuditEvent back = core::parse_audit_json_line(changed.front());
    BOOST_TEST(back.event_id == e.event_id, spelling);
    BOOST_TEST(core::audit_hash(back) == e.hash, spelling);
    BOOST_TEST(core::verify_exported_chain(changed, std::nullopt).ok, spelling);
  }
  for (const std::string& bad : {dashed.substr(1), "{" + dashed, dashed + "0", "g" + dashed.substr(1)}) {
    std::string changed = lines.front();
    changed.replace(changed.find(dashed), dashed.size(), bad);
    BOOST_CHECK_THROW(core::parse_audit_json_line(changed), core::Error);
  }
}

BOOST_AUTO_TEST_CASE(the_verifier_names_the_first_bad_seq) {
  const std::vector<std::string> good = read_lines("audit-v1.jsonl");
  const std::string head = core::parse_audit_json_line(good.back()).hash;

  std::vector<std::string> edited = good;  // event 3's actor changed, hash left alone
  const auto at = edited[2].find("\"actor\":\"bob");
  BOOST_REQUIRE(at != std::string::npos);
  edited[2].replace(at, 12, "\"actor\":\"eve");
  core::Verification v = core::verify_exported_chain(edited, std::nullopt);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 3);
  BOOST_TEST(v.checked == 2);
  BOOST_TEST(v.reason->find("does not match its contents") != std::string::npos);

  // Event 3 rewritten with a consistent hash: the link from event 4 breaks.
  core::AuditEvent three = core::parse_audit_json_line(good[2]);
  three.actor = "eve";
  three.hash = core::audit_hash(three);
  std::vector<std::string> rehashed = good;
  rehashed[2] = core::audit_json_line(three);
  v = core::verify_exported_chain(rehashed, std::nullopt);
  BOOST_TEST(*v.first_bad_seq == 4);
  BOOST_TEST(v.reason->find("prev_hash of event 4") != std::string::npos);

  std::vector<std::string> gap = good;  // event 2 deleted
  gap.erase(gap.begin() + 1);
  v = core::verify_exported_chain(gap, std::nullopt);
  BOOST_TEST(*v.first_bad_seq == 2);
  BOOST_TEST(v.reason->find("missing") != std::string::npos);

  std::vector<std::string> cut(good.begin(), good.begin() + 3);   // tail cut after 3
  BOOST_TEST(core::verify_exported_chain(cut, std::nullopt).ok);  // undetectable without an anchor
  v = core::verify_exported_chain(cut, core::Anchor{5, head});
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 4);
  BOOST_TEST(v.reason->find("tail was cut") != std::string::npos);

  v = core::verify_exported_chain(good, core::Anchor{5, core::genesis_hash()});  // rewritten up to the anchor
  BOOST_TEST(*v.first_bad_seq == 5);
  BOOST_TEST(v.reason->find("anchor") != std::string::npos);

  v = core::verify_exported_chain({good[0], "{not json"}, std::nullopt);
  BOOST_TEST(!v.ok);
  BOOST_TEST(*v.first_bad_seq == 2);
  BOOST_TEST(v.reason->find("line 2") != std::string::npos);

  // A partial export (from seq 3) trusts its first prev_hash and checks the rest.
  std::vector<std::string> partial(good.begin() + 2, good.end());
  v = core::verify_exported_chain(partial, core::Anchor{5, head});
  BOOST_TEST(v.ok);
  BOOST_TEST(v.checked == 3);
  // An anchor it does not reach back to cannot be checked: refused, not passed.
  const std::string two = core::parse_audit_json_line(good[1]).hash;
  BOOST_TEST(code_of([&] { core::verify_exported_chain(partial, core::Anchor{2, two}); }) == "22023");
}

BOOST_AUTO_TEST_CASE(details_must_be_a_small_json_object) {
  BOOST_TEST(code_of([] { core::canonical_details("[1]"); }) == "22023");
  BOOST_TEST(message_of([] { core::canonical_details("[1]"); }).find("JSON object") != std::string::npos);
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":01}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1} x"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"\\u0000\"}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"\\ud800\"}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"\\udc00\"}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"\xc3\x28\"}"); }) == "22023");      // bad UTF-8
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"\xed\xa0\x80\"}"); }) == "22023");  // encoded surrogate
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":\"tab\there\"}"); }) == "22023");     // raw control
  std::string deep = "{\"a\":";
  for (int i = 0; i < core::max_details_depth; ++i) deep += "[";
  for (int i = 0; i < core::max_details_depth; ++i) deep += "]";
  deep += "}";
  BOOST_TEST(code_of([&] { core::canonical_details(deep); }) == "22023");
  std::string ok_depth = "{\"a\":";
  for (int i = 0; i < core::max_details_depth - 2; ++i) ok_depth += "[";
  for (int i = 0; i < core::max_details_depth - 2; ++i) ok_depth += "]";
  ok_depth += "}";
  BOOST_TEST(code_of([&] { core::canonical_details(ok_depth); }) == "none");
  // Depth counts objects and arrays, not the scalar inside: 64 objects around a number fit.
  std::string objects;
  for (int i = 0; i < core::max_details_depth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(core::max_details_depth, '}');
  BOOST_TEST(code_of([&] { core::canonical_details(objects); }) == "none");
  BOOST_TEST(code_of([&] { core::canonical_details("{\"b\":" + objects + "}"); }) == "22023");
  // Size is measured in canonical form: whitespace does not count, a huge exponent does.
  const std::string fits = "{\"a\":\"" + std::string(core::max_details_bytes - 8, 'x') + "\"}";
  BOOST_TEST(code_of([&] { core::canonical_details(fits); }) == "none");
  const std::string over = "{\"a\":\"" + std::string(core::max_details_bytes - 7, 'x') + "\"}";
  BOOST_TEST(message_of([&] { core::canonical_details(over); }).find("over 65536 bytes") != std::string::npos);
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1e999999999999}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1e-999999999999}"); }) == "22023");
  // Numbers PostgreSQL's numeric cannot hold are refused on every store, even when short enough.
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1e-17000}"); }) == "22023");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1e-16383}"); }) == "none");
  BOOST_TEST(code_of([] { core::canonical_details("{\"a\":1e16000}"); }) == "none");
}

BOOST_AUTO_TEST_CASE(append_input_is_checked) {
  core::AuditEvent e;
  e.tenant = "t";
  e.actor = "a";
  e.action = "b";
  e.resource = "c";
  BOOST_TEST(code_of([&] { core::check_audit_input(e); }) == "none");
  auto with = [&](auto change) {
    core::AuditEvent copy = e;
    change(copy);
    return code_of([&] { core::check_audit_input(copy); });
  };
  BOOST_TEST(with([](auto& c) { c.actor = ""; }) == "22023");
  BOOST_TEST(with([](auto& c) { c.action = std::string(core::max_action_bytes + 1, 'x'); }) == "22001");
  BOOST_TEST(with([](auto& c) { c.resource = ""; }) == "22023");
  BOOST_TEST(with([](auto& c) { c.payload_digest = std::string(); }) == "22023");
  BOOST_TEST(with([](auto& c) { c.payload_digest = std::string(65, 'x'); }) == "22001");
  BOOST_TEST(with([](auto& c) { c.payload_ref = std::string(); }) == "22023");
  BOOST_TEST(with([](auto& c) { c.payload_ref = std::string(core::max_payload_ref_bytes + 1, 'x'); }) == "22001");
  // Text is UTF-8 without NUL, as every store can hold, read back and export it.
  BOOST_TEST(with([](auto& c) { c.actor = std::string("al\0ice", 6); }) == "22021");
  BOOST_TEST(with([](auto& c) { c.resource = "bad\xff"; }) == "22021");
  BOOST_TEST(with([](auto& c) { c.action = "cut\xc3"; }) == "22021");
  BOOST_TEST(with([](auto& c) { c.tenant = "t\xed\xa0\x80"; }) == "22021");  // an encoded surrogate
  BOOST_TEST(with([](auto& c) { c.payload_ref = std::string("r\0", 2); }) == "22021");
  BOOST_TEST(with([](auto& c) { c.actor = "j\xc3\xbcrgen \xe2\x98\x83 \xf0\x9f\x98\x80"; }) == "none");
}

BOOST_AUTO_TEST_CASE(timestamps_and_uuids_have_one_text_form) {
  BOOST_TEST(core::format_timestamp(0) == "1970-01-01T00:00:00.000000Z");
  BOOST_TEST(core::format_timestamp(-1) == "1969-12-31T23:59:59.999999Z");
  BOOST_TEST(core::format_timestamp(951782400123456) == "2000-02-29T00:00:00.123456Z");
  for (std::int64_t t : {0LL, -1LL, 951782400123456LL, 1796040000000001LL, -62135596800000000LL})
    BOOST_TEST(*core::parse_timestamp(core::format_timestamp(t)) == t);
  BOOST_TEST(*core::parse_timestamp("2026-11-29T13:00:00.5+01:00") ==
             *core::parse_timestamp("2026-11-29T12:00:00.500000Z"));
  BOOST_TEST(!core::parse_timestamp("2026-11-29 12:00:00"));  // no zone
  BOOST_TEST(!core::parse_timestamp("2026-13-01T00:00:00Z"));
  // An offset that moves the instant out of 0000-9999 (found by the duration fuzz target).
  BOOST_TEST(!core::parse_timestamp("0000-01-01T00:00:30+10:01"));
  BOOST_TEST(!core::parse_timestamp("9999-12-31T23:59:59-00:01"));
  BOOST_TEST(core::format_timestamp(*core::parse_timestamp("0000-01-01T10:01:00+10:01")) ==
             "0000-01-01T00:00:00.000000Z");
  BOOST_TEST(core::format_timestamp(*core::parse_timestamp("9999-12-31T23:59:59.999999Z")) ==
             "9999-12-31T23:59:59.999999Z");
  const std::string id = "0123456789abcdef0123456789abcdef";
  const std::string bytes = *core::from_hex(id);
  BOOST_TEST(core::format_uuid(bytes) == "01234567-89ab-cdef-0123-456789abcdef");
  BOOST_TEST(*core::parse_uuid("01234567-89AB-cdef-0123-456789abcdef") == bytes);
  BOOST_TEST(!core::parse_uuid("--234567-89ab-cdef-0123-456789abcdef"));
  // An export line carries the 8-4-4-4-12 layout only.
  BOOST_TEST(*core::parse_dashed_uuid("01234567-89AB-cdef-0123-456789abcdef") == bytes);
  BOOST_TEST(!core::parse_dashed_uuid("0123456789abcdef0123456789abcdef"));
  BOOST_TEST(!core::parse_dashed_uuid("{01234567-89ab-cdef-0123-456789abcde}"));
  BOOST_TEST(!core::parse_dashed_uuid("0123-4567-89ab-cdef-0123-456789abcdef"));
  BOOST_TEST(!core::parse_uuid("01234567-89ab-cdef-0123-456789abcdeg"));
  BOOST_TEST(!core::parse_timestamp("2026-02-31T00:00:00Z"));
  BOOST_TEST(!core::parse_timestamp("2023-02-29T00:00:00Z"));
  BOOST_TEST(core::parse_timestamp("2024-02-29T00:00:00Z").has_value());
  BOOST_TEST(!core::parse_timestamp("2026-04-31T00:00:00Z"));
}

// One parser for every uuid the core, the client and the SQLite shim read: exactly the spellings
// PostgreSQL's uuid input accepts (its string_to_uuid), so both backends take the same event_ids.
BOOST_AUTO_TEST_CASE(uuids_parse_as_postgresql_parses_them) {
  const std::string bytes = *core::from_hex("a8098c1af86e11dabd1a00112444be1e");
  for (const char* same : {"a8098c1a-f86e-11da-bd1a-00112444be1e", "A8098C1A-F86E-11DA-BD1A-00112444BE1E",
                           "{a8098c1a-f86e-11da-bd1a-00112444be1e}", "a8098c1af86e11dabd1a00112444be1e",
                           "{a8098c1af86e11dabd1a00112444be1e}", "a809-8c1a-f86e-11da-bd1a-0011-2444-be1e",
                           "a8098c1a-f86e11da-bd1a00112444be1e"}) {
    const std::optional<std::string> parsed = core::parse_uuid(same);
    BOOST_TEST((parsed && *parsed == bytes), same);
  }
  for (const char* bad : {"", "{}", "not-a-uuid", "a8098c1a-f86e-11da-bd1a-00112444be1",  // 31 digits
                          "a8098c1a-f86e-11da-bd1a-00112444be1e0",                        // 33 digits
                          "a8098c1a-f86e-11da-bd1a-00112444be1e-",                        // '-' after the last group
                          "-a8098c1a-f86e-11da-bd1a-00112444be1e", "a-8098c1af86e11dabd1a00112444be1e",
                          "a8098c1a--f86e-11da-bd1a-00112444be1e", "{a8098c1a-f86e-11da-bd1a-00112444be1e",
                          "a8098c1a-f86e-11da-bd1a-00112444be1e}", " a8098c1a-f86e-11da-bd1a-00112444be1e",
                          "a8098c1a-f86e-11da-bd1a-00112444be1e ", "(a8098c1a-f86e-11da-bd1a-00112444be1e)",
                          "a8098c1a-f86e-11da-bd1a-00112444be1g"})
    BOOST_TEST(!core::parse_uuid(bad), bad);
  BOOST_TEST(!core::parse_uuid(std::string("a8098c1a-f86e-11da-bd1a-00112444be1e\0", 37)));
  // Whatever the spelling read, the one written (export lines, error messages) is canonical.
  BOOST_TEST(core::format_uuid(*core::parse_uuid("{A8098C1AF86E11DABD1A00112444BE1E}")) ==
             "a8098c1a-f86e-11da-bd1a-00112444be1e");
}

BOOST_AUTO_TEST_SUITE_END()
