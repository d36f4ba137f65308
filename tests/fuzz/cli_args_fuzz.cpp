// The command line (client/cli), as an operator or a script types it: the input is split into
// words at newlines and parsed as `forgeyard WORD...` without running a command or opening a
// store. Parsing ends in exit 0 (help), 2 (a usage error, with a message) or a selected command;
// nothing escapes as an exception. Each word is also read as a duration, an integer and a
// COL=VALUE field the way the commands read their values: a duration that is accepted prints
// back in a form that reads as the same duration, and every refusal is a usage error.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "client/cli/app.hpp"
#include "client/cli/cli.hpp"
#include "fuzz.hpp"

namespace {

struct Silence {  // help and usage text go nowhere (they are checked by tests/cli)
  std::ostringstream sink;
  Silence() {
    std::cout.rdbuf(sink.rdbuf());
    std::cerr.rdbuf(sink.rdbuf());
  }
};

void values(const std::string& word) {
  using forgeyard::cli::Usage;
  try {
    const forgeyard::Duration d = forgeyard::cli::parse_duration(word);
    const std::string printed = forgeyard::cli::format_duration(d.count());
    FUZZ_CHECK(forgeyard::cli::parse_duration(printed) == d);
  } catch (const Usage&) {
  }
  try {
    const std::int64_t v = forgeyard::cli::parse_int(word, "value");
    FUZZ_CHECK(forgeyard::cli::parse_int(std::to_string(v), "value") == v);
  } catch (const Usage&) {
  }
  try {
    const auto fields = forgeyard::cli::parse_fields({word}, {}, "set");
    FUZZ_CHECK(fields.size() == 1);
  } catch (const Usage&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Silence silence;
  if (size > 4096) return 0;
  std::vector<std::string> words;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    words.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  if (words.size() > 32) return 0;
  std::string selected;
  const int code = forgeyard::cli::parse_only(words, selected);
  FUZZ_CHECK(code == -1 || code == 0 || code == 2);
  if (code == -1) FUZZ_CHECK(!selected.empty());
  for (const auto& w : words) values(w);
  return 0;
}
