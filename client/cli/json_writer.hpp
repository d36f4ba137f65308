// The CLI's --json output: a small writer that places the commas and escapes strings (RFC 8259).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace forgeyard::cli {

// A JSON string of `text`: quotes, backslashes and control characters escaped, other bytes as
// they are (names and details are UTF-8). Every --json output of the CLI quotes through this.
std::string json_string(std::string_view text);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
  JsonWriter& value(bool flag);
  JsonWriter& null();
  // A JSON value as it is (canonical JSON the store returned).
  JsonWriter& raw(std::string_view json);
  // key(name).value(v)
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open object or array: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace forgeyard::cli
