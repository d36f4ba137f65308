// What the commands that work on a store's URL print (storage backup, restore, copy, verify,
// install): key=value lines or one JSON object, and progress lines on stderr.
#pragma once

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "forgeyard/backup.hpp"
#include "json_writer.hpp"

namespace forgeyard::cli {

// key=value lines, or one JSON object: the same fields either way.
class Output {
 public:
  explicit Output(bool json) : json_(json) {}
  void field(const std::string& key, const std::string& value) { add(key, json_string(value), value); }
  void field(const std::string& key, std::int64_t value) { add(key, std::to_string(value), std::to_string(value)); }
  void flag(const std::string& key, bool value) { add(key, value ? "true" : "false", value ? "true" : "false"); }
  void raw(const std::string& key, const std::string& json, const std::vector<std::string>& lines) {
    if (json_) {
      fields_.push_back(json_string(key) + ": " + json);
    } else {
      for (const auto& l : lines) text_ += key + "=" + l + "\n";
    }
  }
  void print() const {
    if (!json_) {
      std::cout << text_;
      return;
    }
    std::cout << "{";
    for (std::size_t i = 0; i < fields_.size(); ++i) std::cout << (i ? ", " : "") << fields_[i];
    std::cout << "}\n";
  }

 private:
  void add(const std::string& key, const std::string& json, const std::string& text) {
    if (json_)
      fields_.push_back(json_string(key) + ": " + json);
    else
      text_ += key + "=" + text + "\n";
  }
  bool json_;
  std::vector<std::string> fields_;
  std::string text_;
};

inline ProgressFn progress_on_stderr() {
  return [](const std::string& line) { std::cerr << "forgeyard: " << line << "\n"; };
}

}  // namespace forgeyard::cli
