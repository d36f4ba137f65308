// The helpers every command file uses (cli.hpp).
#include "cli.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <type_traits>
#include <utility>

namespace forgeyard::cli {

Store& Context::store() {
  if (!store_) store_ = open(url, options);
  return *store_;
}

ReadClass Context::read() const {
  return max_lag.empty() ? ReadClass::strong() : ReadClass::eventual(parse_duration(max_lag));
}

CLI::Option* add_repeated(CLI::App& command, const std::string& name, std::vector<std::string>& values,
                          const std::string& description, const std::string& type_name) {
  // One value per occurrence, so `--key a=1 TABLE` does not take TABLE as a second key.
  return command.add_option(name, values, description)
      ->type_name(type_name)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

namespace {
// Largest first, for format_duration.
constexpr std::pair<const char*, std::int64_t> duration_units[] = {
    {"d", 86'400'000'000}, {"h", 3'600'000'000}, {"m", 60'000'000}, {"s", 1'000'000}, {"ms", 1'000}, {"us", 1}};
}  // namespace

Duration parse_duration(const std::string& s) {
  std::size_t end = 0;
  long long n = 0;
  try {
    n = std::stoll(s, &end);
  } catch (const std::exception&) {
    throw Usage("bad duration: " + s);
  }
  const std::string unit = s.substr(end).empty() ? "s" : s.substr(end);
  for (const auto& [name, usecs] : duration_units) {
    if (unit != name) continue;
    std::int64_t total = 0;  // "9223372036854775807d" would overflow: refused, not wrapped
    if (__builtin_mul_overflow(static_cast<std::int64_t>(n), usecs, &total)) throw Usage("duration out of range: " + s);
    return Duration(total);
  }
  throw Usage("bad duration unit in " + s + " (use ms, s, m, h, d)");
}

std::string format_duration(std::int64_t usecs) {
  for (const auto& [name, unit] : duration_units)
    if (usecs != 0 && usecs % unit == 0) return std::to_string(usecs / unit) + name;
  return "0s";
}

std::int64_t parse_int(const std::string& s, const char* what) {
  std::size_t end = 0;
  try {
    long long v = std::stoll(s, &end);
    if (end == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw Usage(std::string("bad ") + what + ": " + s);
}

std::string iso(TimePoint t) {
  const std::int64_t us = unix_usecs(t);
  std::time_t secs = static_cast<std::time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1'000'000));
  return buf;
}

Fields parse_fields(const std::vector<std::string>& pairs, const std::vector<std::string>& nulls, const char* option) {
  Fields fields;
  for (const std::string& p : pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) throw Usage(std::string("--") + option + " takes COL=VALUE, not " + p);
    fields[p.substr(0, eq)] = p.substr(eq + 1);
  }
  for (const std::string& c : nulls) fields[c] = nullptr;
  return fields;
}

void print_value(const Value& v) {
  std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>)
          std::cout << "NULL";
        else if constexpr (std::is_same_v<T, bool>)
          std::cout << (x ? "true" : "false");
        else
          std::cout << x;
      },
      v);
}

std::string read_stdin() {
  std::string all;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) all.append(buf, n);
  return all;
}

}  // namespace forgeyard::cli
