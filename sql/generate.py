#!/usr/bin/env python3
"""Generates both editions' scripts from the one SQL source (docs/architecture.md, "Two editions").

    sql/generate.py OUTDIR [--embed FILE.cpp]

Reads sql/src/forgeyard.sql (the whole API at the version in VERSION), the upgrade steps
sql/src/forgeyard--A--B.sql, and the PL/pgSQL bodies in extension/*.sql, and writes:

    OUTDIR/cpp/forgeyard--V.sql          the C++ edition's full script (CREATE EXTENSION)
    OUTDIR/cpp/forgeyard--A--B.sql       its upgrade steps from sql/src
    OUTDIR/plpgsql/forgeyard--V.sql      the PL/pgSQL edition as an extension script (pg_tle)
    OUTDIR/plpgsql/forgeyard--A--B.sql   its upgrade steps (from its first version on)
    OUTDIR/plpgsql/plain--V.sql          the PL/pgSQL edition as a plain script: no extension,
                                         no transaction control, no psql meta-command (the CLI's
                                         `storage install` wraps it; `--print plpgsql` too)
    OUTDIR/plpgsql/plain--A--B.sql       its upgrade steps, plain
    FILE.cpp (--embed)                   the PL/pgSQL edition's scripts as C++ for the client library
                                         (client/src/ops/install_scripts.hpp), in string literals of
                                         at most 60,000 bytes each, cut at line ends

Every declaration is shared. A function the source declares `LANGUAGE c ... AS 'MODULE_PATHNAME',
'sym'` is, in the PL/pgSQL edition, the same declaration with the body that extension/*.sql gives
for `sym`:

    -- @body sym            (a PL/pgSQL body, DECLARE ... BEGIN ... END)
    -- @body sym sql        (an SQL body)
    -- @helper              (CREATE statements of the PL/pgSQL edition's own functions, in the
                             schema forgeyard_pl; PL/pgSQL, or SQL where the planner should
                             inline them)
    -- @statement name      (one SQL statement both editions run, with $1, $2, ... parameters:
                             a body names it @statement.name@, which becomes a quoted literal
                             for EXECUTE ... USING, or @statement.name(a, b)@, which becomes
                             the statement itself with $1 -> (a), $2 -> (b), for static SQL in
                             a body or helper; OUTDIR/statements.hpp has it for the C++ edition
                             as fy::statements::name)

A block runs to the next marker. A declared symbol without a body, or a body for no declared
symbol, is an error: the PL/pgSQL edition has every function of the API. `@EDITION@` and `@VERSION@` are replaced everywhere, and in the
bodies `@sqlstate.NAME@` by the code core/errors.hpp names NAME (the one SQLSTATE map).

The PL/pgSQL edition's scripts run with check_function_bodies off, as pg_dump's output does: the
API's SQL bodies may call helpers, and helpers may name the API's tables and their row types, so
no order of creation would let each body be checked as it is created. tests/pg/editions.sh runs
every function's validator once the whole script has run.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The first version that has a PL/pgSQL edition: its upgrade steps start here.
PLPGSQL_SINCE = (0, 8, 0)
DECLARATION = re.compile(
    r"(CREATE (?:OR REPLACE )?FUNCTION [^;]*?)\bLANGUAGE c\b([^;]*?)AS 'MODULE_PATHNAME', '(\w+)'", re.S)
MARKER = re.compile(r"^-- @(body|helper|statement)\b[ \t]*(\w*)[ \t]*(\w*)[ \t]*$", re.M)
QUOTE = "$fy_body$"


def version_tuple(text):
    return tuple(int(p) for p in text.split("."))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_sqlstates():
    text = read(os.path.join(ROOT, "core", "errors.hpp"))
    return dict(re.findall(r'inline constexpr char (\w+)\[\] = "(\w{5})";', text))


def with_sqlstates(text, rel, codes):
    def code(m):
        if m.group(1) not in codes:
            sys.exit(f"{rel}: core/errors.hpp names no sqlstate {m.group(1)}")
        return codes[m.group(1)]
    return re.sub(r"@sqlstate\.(\w+)@", code, text)


def read_bodies():
    bodies, helpers, where, codes = {}, [], {}, read_sqlstates()
    statements = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "extension", "*.sql"))):
        rel = os.path.relpath(path, ROOT)
        text = with_sqlstates(read(path), rel, codes)
        marks = list(MARKER.finditer(text))
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            block = text[m.end():end].strip("\n") + "\n"
            if m.group(1) == "helper":
                helpers.append(f"-- ({rel})\n" + block)
                continue
            if m.group(1) == "statement":
                name = m.group(2)
                if not name or m.group(3) or name in statements:
                    sys.exit(f"{rel}: bad or repeated statement marker: {m.group(0)!r}")
                # The block's leading comment lines say what it is; the statement follows them.
                statements[name] = re.sub(r"\A(?:--[^\n]*\n)*", "", block)
                continue
            sym, lang = m.group(2), (m.group(3) or "plpgsql")
            if not sym or lang not in ("plpgsql", "sql"):
                sys.exit(f"{rel}: bad marker line: {m.group(0)!r}")
            if sym in bodies:
                sys.exit(f"{rel}: a second body for {sym} (the first is in {where[sym]})")
            if QUOTE in block:
                sys.exit(f"{rel}: the body of {sym} contains {QUOTE}")
            bodies[sym], where[sym] = (lang, block), rel
    used = set()

    def literal(m):
        name = m.group(1)
        if name not in statements:
            sys.exit(f"a body names @statement.{name}@, which no extension/*.sql declares")
        used.add(name)
        tag = f"$fy_{name}$"
        if tag in statements[name]:
            sys.exit(f"statement {name} contains {tag}")
        return tag + statements[name] + tag
    def inline(m):
        # @statement.name(a, b)@: the statement itself, $1 -> (a), $2 -> (b), for a static SQL
        # statement in PL/pgSQL (planned once per session) where EXECUTE would plan every call.
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if name not in statements:
            sys.exit(f"a body names @statement.{name}(...)@, which no extension/*.sql declares")
        used.add(name)
        text = statements[name].strip().rstrip(";")
        params = {int(k) for k in re.findall(r"\$(\d+)", text)}
        if params != set(range(1, len(args) + 1)):
            sys.exit(f"@statement.{name}(...)@ gives {len(args)} arguments for parameters {sorted(params)}")
        return re.sub(r"\$(\d+)", lambda p: "(" + args[int(p.group(1)) - 1] + ")", text)
    expand = [(r"@statement\.(\w+)\(([^()@]*)\)@", inline), (r"@statement\.(\w+)@", literal)]
    for sym, (lang, block) in bodies.items():
        for pattern, fn in expand:
            block = re.sub(pattern, fn, block)
        bodies[sym] = (lang, block)
    for i, block in enumerate(helpers):
        for pattern, fn in expand:
            block = re.sub(pattern, fn, block)
        helpers[i] = block
    if set(statements) - used:
        sys.exit("statements no body runs: " + ", ".join(sorted(set(statements) - used)))
    return bodies, helpers, statements


def statements_header(statements):
    out = ["// Generated by sql/generate.py from the @statement blocks of extension/*.sql: the SQL the\n"
           "// two editions share. Do not edit.\n#pragma once\n\nnamespace fy::statements {\n"]
    for name, text in sorted(statements.items()):
        if ')SQL"' in text:
            sys.exit(f"statement {name} contains )SQL\"")
        out.append(f'\ninline constexpr const char* {name} = R"SQL(\n{text})SQL";\n')
    out.append("\n}  // namespace fy::statements\n")
    return "".join(out)


def substitute(text, edition, version):
    return text.replace("@EDITION@", edition).replace("@VERSION@", version)


def to_plpgsql(text, bodies, missing, used):
    def replace(m):
        head, attrs, sym = m.group(1), m.group(2), m.group(3)
        used.add(sym)
        if sym not in bodies:
            missing.add(sym)
            return m.group(0)
        lang, body = bodies[sym]
        return f"{head}LANGUAGE {lang}{attrs}AS {QUOTE}\n{body}{QUOTE}"
    return DECLARATION.sub(replace, text)


def redefinitions(source, bodies, missing, used):
    """Every C-declared function of the source with its current body, as CREATE OR REPLACE: an
    upgrade step of the PL/pgSQL edition ends with them, so that a body fixed in extension/*.sql
    reaches databases installed at an earlier version (the C++ edition's arrive with the library)."""
    out = ["\n-- Every function's body as this version has it (sql/generate.py).\n"]
    for m in DECLARATION.finditer(source):
        decl = re.sub(r"^CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", m.group(0))
        out.append(to_plpgsql(decl, bodies, missing, used) + ";\n")
    return "".join(out)


def strip_guard(text):
    # The "\echo Use CREATE EXTENSION ... \quit" line: a psql meta-command.
    return re.sub(r"^\\echo .*\\quit\n", "", text, flags=re.M)


def recorded(text, version):
    return text + f"\nINSERT INTO forgeyard_pl.installs (version) VALUES ('{version}');\n"


def plain(text):
    # Outside an extension: no pg_extension_config_dump (pg_dump dumps every row of a plain install).
    text = re.sub(r"^SELECT pg_catalog\.pg_extension_config_dump\([^;]*\);\n", "", text, flags=re.M)
    if "pg_extension_config_dump" in text:
        sys.exit("a pg_extension_config_dump call the plain script cannot drop (one per line, at the start)")
    # Nor a member taken out of the extension before it is dropped (an upgrade step's, so that its
    # pg_extension_config_dump registration goes with it).
    text = re.sub(r"^ALTER EXTENSION forgeyard DROP [^;]*;\n", "", text, flags=re.M)
    if re.search(r"^ALTER EXTENSION", text, flags=re.M):
        sys.exit("an ALTER EXTENSION the plain script cannot drop (ALTER EXTENSION forgeyard DROP ..., one a line)")
    return text


def unchecked(text):
    return "SET check_function_bodies = off;\n" + text + "RESET check_function_bodies;\n"


def schemas(plain_install):
    out = []
    if plain_install:
        out.append("CREATE SCHEMA forgeyard;\n")
    out.append("-- The PL/pgSQL edition's own functions (extension/*.sql, @helper), at the end of this script: not\n"
               "-- part of the API, executable only by the API's owner.\n"
               "CREATE SCHEMA forgeyard_pl;\n"
               "COMMENT ON SCHEMA forgeyard_pl IS\n"
               "  'The PL/pgSQL edition''s internal functions; not an API: call the functions of schema forgeyard.';\n\n")
    if plain_install:
        out.append("-- The plain install's record: each install and upgrade step adds its version (forgeyard.version()\n"
                   "-- reads the last). An extension has pg_extension.extversion instead.\n"
                   "CREATE TABLE forgeyard_pl.installs (\n"
                   "    n            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
                   "    version      text        NOT NULL,\n"
                   "    installed_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),\n"
                   "    installed_by name        NOT NULL DEFAULT current_user\n"
                   ");\n\n")
    return "".join(out)


def helper_section(helpers):
    out = ["\n-- The PL/pgSQL edition's own functions (extension/*.sql, @helper).\n"]
    out.extend(re.sub(r"^CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", h, flags=re.M) + "\n" for h in helpers)
    out.append("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA forgeyard_pl FROM PUBLIC;\n")
    return "".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def embed(path, scripts):
    def literal(sql):
        chunks, chunk = [], ""
        for line in sql.splitlines(keepends=True):
            if chunk and len((chunk + line).encode()) > 60000:
                chunks.append(chunk)
                chunk = ""
            chunk += line
        chunks.append(chunk)
        for c in chunks:
            if len(c.encode()) > 65000:
                sys.exit("a line of a script is longer than a C++ string literal may be")
            if ")fy_sql\"" in c:
                sys.exit("a script contains the raw string delimiter )fy_sql\"")
        return ", ".join(f'R"fy_sql({c})fy_sql"' for c in chunks)
    rows = "".join(f'      {{"{name}", join({{{literal(sql)}}})}},\n' for name, sql in sorted(scripts.items()))
    text = ("// Generated by sql/generate.py --embed from sql/src and extension/*.sql. Do not edit.\n"
            '#include <initializer_list>\n#include <string_view>\n\n'
            '#include "ops/install_scripts.hpp"\n\n'
            "namespace forgeyard::detail {\n\n"
            "namespace {\n"
            "// A script's pieces: no string literal may pass 65,536 bytes (-Woverlength-strings).\n"
            "std::string join(std::initializer_list<std::string_view> parts) {\n"
            "  std::string out;\n"
            "  for (std::string_view p : parts) out += p;\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n\n"
            "std::vector<EditionScript> embedded_plpgsql_scripts() {\n"
            "  return {\n" + rows + "  };\n}\n\n}  // namespace forgeyard::detail\n")
    write(path, text)


def main():
    argv = sys.argv[1:]
    embed_to = None
    if "--embed" in argv:
        i = argv.index("--embed")
        if i + 1 >= len(argv):
            sys.exit(__doc__)
        embed_to = argv[i + 1]
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    version = read(os.path.join(ROOT, "VERSION")).strip()
    source = read(os.path.join(ROOT, "sql", "src", "forgeyard.sql"))
    steps = sorted(glob.glob(os.path.join(ROOT, "sql", "src", "forgeyard--*--*.sql")))
    bodies, helpers, statements = read_bodies()
    missing, used = set(), set()

    write(os.path.join(out, "cpp", f"forgeyard--{version}.sql"), substitute(source, "cpp", version))
    write(os.path.join(out, "statements.hpp"), statements_header(statements))
    full = to_plpgsql(strip_guard(substitute(source, "plpgsql", version)), bodies, missing, used)
    write(os.path.join(out, "plpgsql", f"forgeyard--{version}.sql"), unchecked(schemas(False) + full + helper_section(helpers)))
    write(os.path.join(out, "plpgsql", f"plain--{version}.sql"),
          recorded(unchecked(schemas(True) + plain(full) + helper_section(helpers)), version))
    for step in steps:
        name = os.path.basename(step)
        frm, to = re.match(r"forgeyard--([\d.]+)--([\d.]+)\.sql$", name).groups()
        text = read(step)
        write(os.path.join(out, "cpp", name), substitute(text, "cpp", to))
        if version_tuple(frm) >= PLPGSQL_SINCE:
            pl = to_plpgsql(strip_guard(substitute(text, "plpgsql", to)), bodies, missing, used)
            pl += redefinitions(substitute(source, "plpgsql", version), bodies, missing, used)
            write(os.path.join(out, "plpgsql", name), unchecked(pl + helper_section(helpers)))
            write(os.path.join(out, "plpgsql", f"plain--{frm}--{to}.sql"),
                  recorded(unchecked(plain(pl) + helper_section(helpers)), to))
    for n in os.listdir(os.path.join(out, "plpgsql")):
        text = read(os.path.join(out, "plpgsql", n)) if n.endswith(".sql") else ""
        code = re.sub(r"--[^\n]*", "", text)
        if re.search(r"MODULE_PATHNAME|\bLANGUAGE\s+c\b", code, re.I):
            sys.exit(f"{n}: a declaration the generator did not turn into PL/pgSQL (LANGUAGE c or MODULE_PATHNAME left)")
    if embed_to:
        pl = os.path.join(out, "plpgsql")
        embed(embed_to, {n: read(os.path.join(pl, n)) for n in os.listdir(pl) if n.endswith(".sql")})
    unused = set(bodies) - used
    if unused:
        sys.exit("bodies for no declared function: " + ", ".join(sorted(unused)))
    if missing:
        sys.exit("functions with no PL/pgSQL body in extension/*.sql: " + " ".join(sorted(missing)))


if __name__ == "__main__":
    main()
