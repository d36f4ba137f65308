#include "core/backup_manifest.hpp"

#include <charconv>

#include "core/canonical_json.hpp"
#include "core/digest.hpp"
#include "core/errors.hpp"

namespace fy::core {

namespace {

[[noreturn]] void invalid_manifest(const std::string& why) {
  throw Error(sqlstate::data_corrupted, "the backup manifest is invalid: " + why);
}

const Json& member(const Json& object, const char* name, Json::Kind kind, const std::string& where) {
  const Json* v = object.find(name);
  if (v == nullptr) invalid_manifest(where + " has no \"" + name + "\"");
  if (v->kind != kind) invalid_manifest(where + "\"" + name + "\" has the wrong type");
  return *v;
}

std::string text(const Json& object, const char* name, const std::string& where) {
  return member(object, name, Json::Kind::string, where).text;
}

std::int64_t integer(const Json& object, const char* name, const std::string& where) {
  const std::string& lexeme = member(object, name, Json::Kind::number, where).text;
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), value);
  if (ec != std::errc{} || end != lexeme.data() + lexeme.size() || value < 0)
    invalid_manifest(where + "\"" + name + "\" is not a non-negative integer: " + lexeme);
  return value;
}

bool is_hex(std::string_view s) {
  return from_hex(s).has_value();
}

bool safe_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name != backup_manifest_name;
}

}  // namespace

std::string to_json(const BackupManifest& m) {
  std::string out = "{\n";
  auto field = [&](const char* key, const std::string& value, bool quoted) {
    out += "  " + json_quote(key) + ": " + (quoted ? json_quote(value) : value) + ",\n";
  };
  field("format", std::to_string(m.format), false);
  field("forgeyard_version", m.forgeyard_version, true);
  field("backend", m.backend, true);
  field("schema_version", m.schema_version, true);
  field("server_version", m.server_version, true);
  field("created_at", m.created_at, true);
  out += "  \"migrations\": [";
  for (std::size_t i = 0; i < m.migrations.size(); ++i) {
    const auto& g = m.migrations[i];
    out += std::string(i ? "," : "") + "\n    {\"application\": " + json_quote(g.application) +
           ", \"version\": " + json_quote(g.version) + ", \"checksum\": " + json_quote(g.checksum) + "}";
  }
  out += m.migrations.empty() ? "],\n" : "\n  ],\n";
  out += "  \"files\": [";
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const auto& f = m.files[i];
    out += std::string(i ? "," : "") + "\n    {\"name\": " + json_quote(f.name) +
           ", \"size\": " + std::to_string(f.size) + ", \"sha256\": " + json_quote(f.sha256) + "}";
  }
  out += m.files.empty() ? "],\n" : "\n  ],\n";
  out += "  \"audit_heads\": [";
  for (std::size_t i = 0; i < m.audit_heads.size(); ++i) {
    const auto& h = m.audit_heads[i];
    out += std::string(i ? "," : "") + "\n    {\"tenant\": " + json_quote(h.tenant) +
           ", \"seq\": " + std::to_string(h.seq) + ", \"hash\": " + json_quote(h.hash) + "}";
  }
  out += m.audit_heads.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

BackupManifest parse_backup_manifest(std::string_view input) {
  Json root;
  try {
    root = parse_json(input, "manifest.json", 8);
  } catch (const Error& e) {
    invalid_manifest(e.what());
  }
  if (root.kind != Json::Kind::object) invalid_manifest("not a JSON object");
  BackupManifest m;
  const std::string top = "manifest ";
  const std::int64_t format = integer(root, "format", top);
  if (format < 1) invalid_manifest("format " + std::to_string(format) + " is not a format");
  if (format > backup_manifest_format)
    throw Error(sqlstate::invalid_parameter, "the backup's manifest format " + std::to_string(format) +
                                                 " is newer than this forgeyard reads (" +
                                                 std::to_string(backup_manifest_format) + "): use a newer forgeyard");
  m.format = static_cast<int>(format);
  m.forgeyard_version = text(root, "forgeyard_version", top);
  m.backend = text(root, "backend", top);
  if (m.backend != "sqlite" && m.backend != "postgresql") invalid_manifest("unknown backend \"" + m.backend + "\"");
  m.schema_version = text(root, "schema_version", top);
  if (m.schema_version.empty()) invalid_manifest("schema_version is empty");
  m.server_version = text(root, "server_version", top);
  m.created_at = text(root, "created_at", top);
  for (const Json& g : member(root, "migrations", Json::Kind::array, top).items) {
    if (g.kind != Json::Kind::object) invalid_manifest("a migration is not an object");
    m.migrations.push_back({text(g, "application", "a migration "), text(g, "version", "a migration "),
                            text(g, "checksum", "a migration ")});
  }
  for (const Json& f : member(root, "files", Json::Kind::array, top).items) {
    if (f.kind != Json::Kind::object) invalid_manifest("a file entry is not an object");
    BackupFile file{text(f, "name", "a file entry "), static_cast<std::uint64_t>(integer(f, "size", "a file entry ")),
                    text(f, "sha256", "a file entry ")};
    if (!safe_file_name(file.name)) invalid_manifest("file name \"" + file.name + "\" is not a plain file name");
    if (file.sha256.size() != 64 || !is_hex(file.sha256) || to_hex(*from_hex(file.sha256)) != file.sha256)
      invalid_manifest("the SHA-256 of " + file.name + " is not 64 lower-case hex digits");
    for (const auto& seen : m.files)
      if (seen.name == file.name) invalid_manifest(file.name + " is listed twice");
    m.files.push_back(std::move(file));
  }
  if (m.files.empty()) invalid_manifest("it lists no file");
  for (const Json& h : member(root, "audit_heads", Json::Kind::array, top).items) {
    if (h.kind != Json::Kind::object) invalid_manifest("an audit head is not an object");
    BackupAuditHead head{text(h, "tenant", "an audit head "), integer(h, "seq", "an audit head "),
                         text(h, "hash", "an audit head ")};
    if (!is_hex(head.hash)) invalid_manifest("the audit head hash of tenant " + head.tenant + " is not hex");
    m.audit_heads.push_back(std::move(head));
  }
  return m;
}

int migration_number(std::string_view name) {
  int n = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (ec != std::errc{} || end == name.data() || n < 0) return -1;
  return n;
}

int compare_versions(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& s) -> long {
    if (s.empty()) return 0;
    const auto dot = s.find('.');
    const std::string_view part = s.substr(0, dot);
    s = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
    long n = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc{} || end != part.data() + part.size() || part.empty())
      throw Error(sqlstate::invalid_parameter, "version \"" + std::string(part) + "\" is not dotted numbers");
    return n;
  };
  while (!a.empty() || !b.empty()) {
    const long x = next(a);
    const long y = next(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

void check_backup_not_newer(const BackupManifest& m, std::string_view known_schema) {
  bool newer = false;
  if (m.backend == "sqlite") {
    const int backup = migration_number(m.schema_version);
    if (backup < 0) invalid_manifest("schema_version \"" + m.schema_version + "\" is not a migration name");
    newer = backup > migration_number(known_schema);
  } else {
    try {
      newer = compare_versions(m.schema_version, known_schema) > 0;
    } catch (const Error&) {
      invalid_manifest("schema_version \"" + m.schema_version + "\" is not a version");
    }
  }
  if (newer)
    throw Error(sqlstate::invalid_parameter, "the backup's schema " + m.schema_version + " (forgeyard " +
                                                 m.forgeyard_version + ") is newer than this forgeyard understands (" +
                                                 std::string(known_schema) + "): restore it with a newer forgeyard");
}

}  // namespace fy::core
