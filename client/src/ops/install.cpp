// storage install: forgeyard into a PostgreSQL database, as either edition (forgeyard/install.hpp,
// docs/operations.md "Installing forgeyard"). The PL/pgSQL edition's plain install runs its scripts
// step by step, each in one transaction that first takes an advisory lock and runs the preflight
// (the refusals), so two installers take turns and the second finds nothing left to do. The psql
// script that `--print plpgsql` writes runs the same preflight and the same steps.
#include "forgeyard/install.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/core.hpp"
#include "forgeyard/error.hpp"
#include "forgeyard/version.hpp"
#include "instruments.hpp"
#include "ops/install_scripts.hpp"
#include "postgres/connection.hpp"

namespace forgeyard {

namespace sqlstate = fy::core::sqlstate;
using detail::PgConnection;
using detail::PgResult;
using detail::PgStatement;

std::string_view to_string(Edition edition) noexcept {
  return edition == Edition::Cpp ? "cpp" : "plpgsql";
}

std::optional<Edition> parse_edition(std::string_view text) noexcept {
  if (text == "cpp") return Edition::Cpp;
  if (text == "plpgsql") return Edition::Plpgsql;
  return std::nullopt;
}

namespace {

// pg_advisory_xact_lock's key for installers of this database: "fy_inst" in ASCII.
constexpr char install_lock_sql[] = "SELECT pg_catalog.pg_advisory_xact_lock(28839325086085748)";

struct Step {
  std::string from;  // empty: the full script
  std::string to;
  std::string sql;
  std::string name() const { return from.empty() ? to : from + "--" + to; }
};

std::vector<int> version_parts(const std::string& v) {
  std::vector<int> out;
  std::stringstream in(v);
  for (std::string part; std::getline(in, part, '.');) out.push_back(std::atoi(part.c_str()));
  return out;
}

bool older(const std::string& a, const std::string& b) {
  return version_parts(a) < version_parts(b);
}

// The embedded scripts of one flavour: "plain--" or "forgeyard--". The full script of this
// library's version, then the upgrade steps in order of their first version.
struct Flavour {
  Step full;
  std::vector<Step> steps;
};

Flavour flavour(const std::string& prefix) {
  Flavour f;
  const std::string version(forgeyard::version());
  for (const auto& s : detail::embedded_plpgsql_scripts()) {
    if (!s.name.starts_with(prefix) || !s.name.ends_with(".sql")) continue;
    const std::string rest = s.name.substr(prefix.size(), s.name.size() - prefix.size() - 4);
    const auto dash = rest.find("--");
    if (dash == std::string::npos) {
      if (rest == version) f.full = {"", rest, s.sql};
    } else {
      f.steps.push_back({rest.substr(0, dash), rest.substr(dash + 2), s.sql});
    }
  }
  if (f.full.sql.empty())
    throw Error(ErrorKind::Internal, sqlstate::internal_error,
                "this library holds no PL/pgSQL script of version " + version);
  std::sort(f.steps.begin(), f.steps.end(), [](const Step& a, const Step& b) { return older(a.from, b.from); });
  return f;
}

std::string quote_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// The refusals of a plain install, run first in each of its transactions (after the lock), by
// install_store and by the psql script alike. They change nothing.
std::string preflight_sql() {
  const std::string target = quote_literal(std::string(version()));
  return "DO $fy_preflight$\n"
         "DECLARE\n"
         "    target text := " +
         target +
         ";\n"
         "    installed text;\n"
         "BEGIN\n"
         "    SELECT e.extversion INTO installed FROM pg_catalog.pg_extension e WHERE e.extname = 'forgeyard';\n"
         "    IF FOUND THEN\n"
         "        RAISE EXCEPTION USING ERRCODE = '42710',\n"
         "            MESSAGE = pg_catalog.format('forgeyard %s is installed in this database as an extension; the plain"
         " install of the PL/pgSQL edition does not go over it', installed),\n"
         "            DETAIL = 'switching editions keeps every row but is its own step: docs/operations.md, \"Switching"
         " editions\"';\n"
         "    END IF;\n"
         "    IF pg_catalog.to_regclass('forgeyard_pl.installs') IS NOT NULL THEN\n"
         "        EXECUTE 'SELECT version FROM forgeyard_pl.installs ORDER BY n DESC LIMIT 1' INTO installed;\n"
         "        IF pg_catalog.string_to_array(installed, '.')::int[] > pg_catalog.string_to_array(target, '.')::int[]"
         " THEN\n"
         "            RAISE EXCEPTION USING ERRCODE = '22023',\n"
         "                MESSAGE = pg_catalog.format('this database holds forgeyard %s, newer than this script (%s)',"
         " installed, target),\n"
         "                DETAIL = 'install with the forgeyard of that version or newer; nothing was changed';\n"
         "        END IF;\n"
         "    ELSIF pg_catalog.to_regnamespace('forgeyard') IS NOT NULL THEN\n"
         "        RAISE EXCEPTION USING ERRCODE = '42710',\n"
         "            MESSAGE = 'schema forgeyard exists in this database but holds no forgeyard install',\n"
         "            DETAIL = 'drop or rename that schema first; nothing was changed';\n"
         "    ELSIF NOT pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE') THEN\n"
         "        RAISE EXCEPTION USING ERRCODE = '42501',\n"
         "            MESSAGE = pg_catalog.format('permission denied to install forgeyard: role %s needs the CREATE"
         " privilege on database %s', current_user, pg_catalog.current_database()),\n"
         "            DETAIL = pg_catalog.format('run it as the database owner, or GRANT CREATE ON DATABASE %I TO %I',"
         " pg_catalog.current_database(), current_user);\n"
         "    END IF;\n"
         "END\n"
         "$fy_preflight$;\n";
}

// What is installed, in one round trip, by the expressions health() and doctor read too.
const PgStatement state_sql{
    "",
    "SELECT " FY_INSTALLED_VERSION ", " FY_INSTALLED_EDITION
    ","
    "       EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'forgeyard'),"
    "       EXISTS (SELECT FROM pg_catalog.pg_available_extensions a WHERE a.name OPERATOR(pg_catalog.=) 'forgeyard')",
    0};

struct State {
  std::optional<Edition> edition;  // of what is installed
  std::string version;             // empty: nothing installed
  bool extension = false;          // installed as an extension (the C++ edition, or pg_tle's)
  bool cpp_available = false;      // the server has the C++ edition's control file
};

State read_state(PgConnection& conn) {
  State s;
  const PgResult r = conn.exec(state_sql, {});
  s.extension = r.boolean(0, 2);
  s.cpp_available = r.boolean(0, 3);
  if (!r.is_null(0, 0)) {
    s.version = r.text(0, 0);
    s.edition = !r.is_null(0, 1) && r.text(0, 1) == "plpgsql" ? Edition::Plpgsql : Edition::Cpp;
  }
  return s;
}

void report(const InstallOptions& options, const std::string& line) {
  if (options.progress) options.progress(line);
}

InstallResult install_cpp(PgConnection& conn, const State& state, const InstallOptions& options) {
  const std::string target(version());
  InstallResult result{Edition::Cpp, state.version, state.version, {}};
  if (!state.cpp_available)
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "this server offers no C++ edition of forgeyard (no forgeyard.control in its extension directory)",
                "install the PL/pgSQL edition: forgeyard storage install --edition plpgsql");
  conn.command("BEGIN");
  try {
    conn.script(install_lock_sql);
    const State now = read_state(conn);
    if (now.edition == Edition::Plpgsql)
      throw Error(ErrorKind::InvalidArgument, "42710",
                  "forgeyard " + now.version + " is installed in this database as the PL/pgSQL edition",
                  "switching editions keeps every row but is its own step: docs/operations.md, \"Switching editions\"");
    if (!now.version.empty() && older(target, now.version))
      throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                  "this database holds forgeyard " + now.version + ", newer than this forgeyard (" + target + ")",
                  "install with the forgeyard of that version or newer; nothing was changed");
    result.from_version = now.version;
    if (now.version.empty()) {
      report(options, "installing forgeyard " + target + " (C++ edition): CREATE EXTENSION forgeyard");
      conn.script("CREATE EXTENSION forgeyard VERSION " + quote_literal(target));
      result.steps.push_back(target);
    } else if (now.version != target) {
      report(options, "upgrading forgeyard " + now.version + " to " + target + " (C++ edition): ALTER EXTENSION");
      conn.script("ALTER EXTENSION forgeyard UPDATE TO " + quote_literal(target));
      result.steps.push_back(now.version + "--" + target);
    }
    conn.commit();
  } catch (...) {
    conn.rollback_quietly();
    throw;
  }
  result.version = target;
  return result;
}

InstallResult install_plpgsql(PgConnection& conn, const InstallOptions& options) {
  const Flavour plain = flavour("plain--");
  const std::string target(version());
  const std::string preflight = preflight_sql();
  InstallResult result{Edition::Plpgsql, "", "", {}};
  bool first = true;
  for (;;) {
    conn.command("BEGIN");
    try {
      conn.script(install_lock_sql);
      conn.script(preflight);
      const State now = read_state(conn);
      if (first) result.from_version = now.version;
      first = false;
      const Step* step = nullptr;
      if (now.version.empty()) {
        step = &plain.full;
      } else if (now.version != target) {
        for (const Step& s : plain.steps)
          if (s.from == now.version) step = &s;
        if (step == nullptr)
          throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                      "no upgrade step of the PL/pgSQL edition starts at " + now.version + " (this forgeyard is " +
                          target + ")",
                      "upgrade with a forgeyard release between the two first");
      }
      if (step == nullptr) {
        conn.rollback_quietly();
        result.version = now.version;
        return result;
      }
      report(options, step->from.empty()
                          ? "installing forgeyard " + step->to + " (PL/pgSQL edition)"
                          : "upgrading forgeyard " + step->from + " to " + step->to + " (PL/pgSQL edition)");
      conn.script(step->sql);
      conn.commit();
      result.steps.push_back(step->name());
    } catch (...) {
      conn.rollback_quietly();
      throw;
    }
  }
}

// A psql \if around one step: run when `condition` (SQL giving one boolean) holds.
std::string psql_step(const std::string& preflight, const std::string& condition, const Step& step) {
  return "\n-- Step " + step.name() + "\nBEGIN;\n" + install_lock_sql + " AS fy_locked \\gset\n" + preflight +
         "SELECT (" + condition + ") AS fy_run \\gset\n\\if :fy_run\n\\echo forgeyard: step " + step.name() + "\n" +
         step.sql + "\\endif\nCOMMIT;\n";
}

std::string plpgsql_psql_script() {
  const Flavour plain = flavour("plain--");
  const std::string preflight = preflight_sql();
  std::string out =
      "-- forgeyard " + std::string(version()) +
      ", the PL/pgSQL edition: installs it, or upgrades an earlier plain install, in the database psql\n"
      "-- connects to. Run it as the database owner (a role with CREATE on the database; no superuser):\n"
      "--   psql -v ON_ERROR_STOP=1 -f this.sql 'postgresql://owner@host/db'\n"
      "-- Each step runs in one transaction, after an advisory lock and the same checks as\n"
      "-- `forgeyard storage install`; a step already done is skipped, so the script is safe to run again.\n"
      "\\set ON_ERROR_STOP on\n";
  out += psql_step(preflight, "pg_catalog.to_regclass('forgeyard_pl.installs') IS NULL", plain.full);
  for (const Step& s : plain.steps)
    out += psql_step(preflight, "forgeyard.version() OPERATOR(pg_catalog.=) " + quote_literal(s.from), s);
  // A database that no step took to this version (one with no path from its version) fails here,
  // as storage install refuses it.
  out +=
      "\n-- Where the steps ended\nDO $fy_check$\nBEGIN\n"
      "    IF forgeyard.version() IS DISTINCT FROM " +
      quote_literal(std::string(version())) +
      " THEN\n"
      "        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('this database holds forgeyard "
      "%s, and no step of this script starts there', forgeyard.version()),\n"
      "            DETAIL = 'upgrade with a forgeyard release between the two first';\n"
      "    END IF;\nEND\n$fy_check$;\n";
  return out;
}

std::string pg_tle_script() {
  const Flavour ext = flavour("forgeyard--");
  const std::string v(version());
  auto dollar = [](const std::string& sql) {
    if (sql.find("$fy_tle$") != std::string::npos || sql.find("$_pgtle_") != std::string::npos)
      throw Error(ErrorKind::Internal, sqlstate::internal_error, "a script holds a dollar quote pg_tle refuses");
    return "$fy_tle$" + sql + "$fy_tle$";
  };
  std::string out =
      "-- forgeyard " + v +
      ", the PL/pgSQL edition, registered with pg_tle (trusted-language extensions): run it as a role\n"
      "-- holding pgtle_admin, in each database that should have forgeyard; then CREATE EXTENSION forgeyard\n"
      "-- (or ALTER EXTENSION forgeyard UPDATE) there. A version or step already registered is left as it is.\n"
      "BEGIN;\n";
  auto registered = [](const std::string& version) {
    return "NOT EXISTS (SELECT FROM pgtle.available_extension_versions() a WHERE a.name = 'forgeyard' AND a.version = " +
           quote_literal(version) + ")";
  };
  out += "SELECT pgtle.install_extension('forgeyard', " + quote_literal(v) +
         ", 'leases with fencing epochs and other coordination semantics (PL/pgSQL edition)', " + dollar(ext.full.sql) +
         ", '{}'::text[], 'forgeyard')\n WHERE " + registered(v) + ";\n";
  for (const Step& s : ext.steps) {
    out += "SELECT pgtle.install_update_path('forgeyard', " + quote_literal(s.from) + ", " + quote_literal(s.to) +
           ", " + dollar(s.sql) +
           ")\n WHERE NOT EXISTS (SELECT FROM pgtle.extension_update_paths('forgeyard') p"
           " WHERE p.source = " +
           quote_literal(s.from) + " AND p.target = " + quote_literal(s.to) + " AND p.path IS NOT NULL);\n";
  }
  out += "SELECT pgtle.set_default_version('forgeyard', " + quote_literal(v) + ");\nCOMMIT;\n";
  return out;
}

}  // namespace

InstallResult install_store(std::string_view url, const InstallOptions& options) {
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://"))
    throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
                "storage install is for PostgreSQL stores (postgresql://...); a SQLite store migrates when opened");
  PgConnection conn{std::string(url), false};
  const State state = read_state(conn);
  Edition edition =
      options.edition.value_or(state.edition.value_or(state.cpp_available ? Edition::Cpp : Edition::Plpgsql));
  if (state.edition && *state.edition != edition)
    throw Error(ErrorKind::InvalidArgument, "42710",
                "forgeyard " + state.version + " is installed in this database as the " +
                    std::string(to_string(*state.edition)) + " edition, not the " + std::string(to_string(edition)) +
                    " edition",
                "switching editions keeps every row but is its own step: docs/operations.md, \"Switching editions\"");
  // The PL/pgSQL edition that pg_tle installed is an extension: pg_tle's registered scripts
  // upgrade it, not the plain install's.
  if (edition == Edition::Plpgsql && state.extension) {
    if (state.version == std::string(version())) return {Edition::Plpgsql, state.version, state.version, {}};
    throw Error(ErrorKind::InvalidArgument, "42710",
                "forgeyard " + state.version + " is installed in this database through pg_tle",
                "register this version with `forgeyard storage install --print pg_tle`, then ALTER EXTENSION "
                "forgeyard UPDATE");
  }
  return edition == Edition::Cpp ? install_cpp(conn, state, options) : install_plpgsql(conn, options);
}

std::string install_script(std::string_view kind) {
  if (kind == "plpgsql") return plpgsql_psql_script();
  if (kind == "pg_tle") return pg_tle_script();
  throw Error(ErrorKind::InvalidArgument, sqlstate::invalid_parameter,
              "unknown install script " + std::string(kind) + ": plpgsql or pg_tle");
}

}  // namespace forgeyard
