-- The PL/pgSQL edition's compare-and-set: the twin of extension/cas.cpp (docs/sql-api.md#compare-and-set,
-- docs/architecture.md). These functions are SECURITY INVOKER and act on the caller's own tables,
-- so their statements are built here as the C++ builds them: identifiers from the catalog, quoted
-- with quote_ident (PostgreSQL's quote_identifier), values never in the SQL text (key and changes
-- travel as jsonb parameters typed by jsonb_to_record with the columns' own types). The C++
-- edition keeps each table's description per backend until an invalidation; here it is read from
-- the catalog at each call. Column names are taken in byte order (COLLATE "C"), as the C++ sorts
-- them, so that the first offending one and the lists in messages are the same. Being SECURITY
-- INVOKER, they cannot call forgeyard_pl's helpers (only their owner may): each body is whole.

-- @body fy_versioning_trigger
-- INSERT starts at 1; UPDATE moves expected -> expected + 1. It runs no SQL, and runs with the
-- search_path of whoever writes the row: every name is qualified.
DECLARE
    next_version bigint;
    current_version bigint;
BEGIN
    IF TG_WHEN OPERATOR(pg_catalog.<>) 'BEFORE' OR TG_LEVEL OPERATOR(pg_catalog.<>) 'ROW' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@',
            MESSAGE = 'the versioning trigger must fire BEFORE, FOR EACH ROW';
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        next_version := NEW.entity_version;
        IF next_version IS NULL OR next_version OPERATOR(pg_catalog.<>) 1 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = pg_catalog.format('a new row of %I.%I must start at entity_version 1', TG_TABLE_SCHEMA, TG_TABLE_NAME),
                DETAIL = pg_catalog.format('it was inserted with %s', COALESCE(next_version::pg_catalog.text, 'NULL'));
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        next_version := NEW.entity_version;
    ELSE
        next_version := OLD.entity_version;   -- the C++ reads the trigger tuple for any other event
    END IF;
    current_version := COALESCE(OLD.entity_version, 0);
    IF next_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@',
            MESSAGE = pg_catalog.format('entity_version of %I.%I must not be NULL', TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF next_version OPERATOR(pg_catalog.=) current_version THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.version_conflict@',
            MESSAGE = pg_catalog.format('an UPDATE of %I.%I must set entity_version to the expected version + 1',
                                        TG_TABLE_SCHEMA, TG_TABLE_NAME),
            DETAIL = pg_catalog.format('current version %s; the UPDATE did not change it', current_version);
    END IF;
    IF next_version OPERATOR(pg_catalog.<>) (current_version OPERATOR(pg_catalog.+) 1) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.version_conflict@',
            MESSAGE = pg_catalog.format('version conflict on %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME),
            DETAIL = pg_catalog.format('expected version %s, current version %s',
                                       next_version OPERATOR(pg_catalog.-) 1, current_version);
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        RETURN NEW;
    END IF;
    RETURN OLD;
END

-- @body fy_enable_versioning
-- Every UPDATE of rel must then move entity_version from expected to expected + 1. The trigger is
-- created with the caller's rights.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    is_bigint boolean;
    not_null boolean;
    default_one boolean;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'rel must not be NULL';
    END IF;
    SELECT rel::pg_catalog.regclass::pg_catalog.text, c.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning')
      INTO t_name, kind, t_versioned
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- DEFAULT 1, '1', 1::bigint and '1'::bigint are the same default.
    SELECT a.atttypid = 'pg_catalog.int8'::regtype, a.attnotnull,
           pg_get_expr(d.adbin, d.adrelid) = ANY (ARRAY['1', '''1''::bigint', '(1)::bigint'])
      INTO is_bigint, not_null, default_one
      FROM pg_catalog.pg_attribute a
      LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = rel AND a.attname = 'entity_version' AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_column@', MESSAGE = t_name || ' has no entity_version column',
            DETAIL = 'add: entity_version bigint NOT NULL DEFAULT 1';
    END IF;
    IF NOT is_bigint OR NOT not_null OR NOT coalesce(default_one, false) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'entity_version of ' || t_name || ' must be bigint NOT NULL DEFAULT 1';
    END IF;
    IF NOT has_table_privilege(rel, 'UPDATE') THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.insufficient_privilege@',
            MESSAGE = 'permission denied: UPDATE on ' || t_name || ' is needed to version it';
    END IF;
    IF NOT t_versioned THEN
        EXECUTE 'CREATE TRIGGER forgeyard_versioning BEFORE INSERT OR UPDATE ON ' || t_name
                || ' FOR EACH ROW EXECUTE FUNCTION forgeyard.versioning_trigger()';
    END IF;
END

-- @body fy_disable_versioning
-- Drops the trigger again (the column and its values stay); whether the table was versioned.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'rel must not be NULL';
    END IF;
    SELECT rel::pg_catalog.regclass::pg_catalog.text, c.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning')
      INTO t_name, kind, t_versioned
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    IF t_versioned THEN
        EXECUTE 'DROP TRIGGER forgeyard_versioning ON ' || t_name;
    END IF;
    RETURN t_versioned;
END

-- @body fy_cas_update
-- The UPDATE through jsonb_to_record (docs/architecture.md, step 4). The C++ edition binds the
-- values of "the typed form" (every value a JSON scalar, every column plain, at most 32
-- parameters) as parameters of the columns' own types, made by the types' input functions with
-- the columns' typmods before its statement runs: a value its column refuses is refused before
-- the row is looked at (and before the statement's privilege check). Here those values are made
-- first by jsonb_to_record, which reads them the same way (the changes, then the key, each in
-- column-name order), and then the UPDATE runs as in the other form.
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    key_names text[];
    change_names text[];
    known text[];
    has_tenant boolean;
    has_version boolean;
    generated text[];
    key_record text;
    key_cond text;
    change_record text;
    set_list text;
    value_list text;
    typed boolean;
    key_unique boolean;
    c text;
    new_version bigint;
    n bigint;
    current_version bigint;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'rel must not be NULL';
    END IF;
    -- read_table(), for the columns the call names (and tenant_id, entity_version): the table's
    -- regclass name and kind, its trigger, the arguments' top-level keys (sorted in byte order;
    -- none unless an object), which named columns exist (and which are generated), the pieces of
    -- the statements (column definition lists of jsonb_to_record, the key condition, the SET
    -- lists), whether the call takes the typed form (every named column plain: a base, enum,
    -- range or multirange type that is not an array, json or jsonb; every value a JSON scalar),
    -- and whether the key contains every column of the primary key or of a unique index (no
    -- expressions, no predicates).
    SELECT rel::pg_catalog.regclass::pg_catalog.text, rc.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning'),
           kx.key_names, kx.change_names, coalesce(ax.known, '{}'), coalesce(ax.has_tenant, false),
           coalesce(ax.has_version, false), coalesce(ax.generated, '{}'), ax.key_record, ax.key_cond, ax.change_record,
           ax.set_list, ax.value_list, coalesce(ax.typed, false),
           EXISTS (SELECT FROM pg_catalog.pg_index i
                    WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND i.indisunique AND i.indpred IS NULL
                      AND i.indexprs IS NULL AND i.indkey::pg_catalog.int2[] OPERATOR(pg_catalog.<@) ax.key_nums)
      INTO t_name, kind, t_versioned, key_names, change_names, known, has_tenant, has_version, generated,
           key_record, key_cond, change_record, set_list, value_list, typed, key_unique
      FROM pg_catalog.pg_class rc,
           LATERAL (SELECT ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(key) OPERATOR(pg_catalog.=) 'object' THEN key END) j(k)
                                  ORDER BY j.k COLLATE "C") AS key_names,
                           ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(changes) OPERATOR(pg_catalog.=) 'object' THEN changes END) j(k)
                                  ORDER BY j.k COLLATE "C") AS change_names
                    OFFSET 0) kx,
           LATERAL (SELECT pg_catalog.array_agg(x.name) AS known,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'tenant_id') AS has_tenant,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'entity_version') AS has_version,
                           pg_catalog.array_agg(x.name) FILTER (WHERE x.generated) AS generated,
                           pg_catalog.array_agg(x.attnum) FILTER (WHERE x.is_key) AS key_nums,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_record,
                           pg_catalog.string_agg('t.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||)
                                                 ' OPERATOR(pg_catalog.=) k.' OPERATOR(pg_catalog.||) x.q, ' AND '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_cond,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS change_record,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS set_list,
                           pg_catalog.string_agg('c.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS value_list,
                           pg_catalog.bool_and(x.plain AND pg_catalog.jsonb_typeof(
                                                   CASE WHEN x.is_key THEN key ELSE changes END OPERATOR(pg_catalog.->) x.name)
                                                 OPERATOR(pg_catalog.<>) ALL ('{object,array}'::pg_catalog.text[]))
                             FILTER (WHERE x.is_key OR x.is_change) AS typed
                      FROM (SELECT at.attname::pg_catalog.text AS name, pg_catalog.quote_ident(at.attname) AS q, at.attnum,
                                   at.attgenerated OPERATOR(pg_catalog.<>) '' AS generated,
                                   pg_catalog.format_type(at.atttypid, at.atttypmod) AS type,
                                   y.typtype OPERATOR(pg_catalog.=) ANY ('{b,e,r,m}'::pg_catalog."char"[])
                                     AND y.typcategory OPERATOR(pg_catalog.<>) 'A'
                                     AND y.oid OPERATOR(pg_catalog.<>) ALL ('{114,3802}'::pg_catalog.oid[]) AS plain,   -- json, jsonb
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names) AS is_key,
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names) AS is_change
                              FROM pg_catalog.pg_attribute at
                              JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) at.atttypid
                             WHERE at.attrelid OPERATOR(pg_catalog.=) rel AND at.attnum OPERATOR(pg_catalog.>) 0
                               AND NOT at.attisdropped
                               AND (at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names)
                                    OR at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names)
                                    OR at.attname OPERATOR(pg_catalog.=) ANY ('{tenant_id,entity_version}'::pg_catalog.name[]))) x) ax
     WHERE rc.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- versioned_table(): the table must have entity_version and the trigger.
    IF NOT has_version THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = t_name || ' has no entity_version column';
    END IF;
    IF NOT t_versioned THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = t_name || ' is not under version control',
            DETAIL = format('call forgeyard.enable_versioning(''%s'') first', t_name);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'key must not be NULL';
    END IF;
    IF expected_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'expected_version must not be NULL';
    END IF;
    IF changes IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'changes must not be NULL';
    END IF;
    IF expected_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'expected_version must be at least 1';
    END IF;
    IF jsonb_typeof(key) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'key must be a JSON object';
    END IF;
    IF jsonb_typeof(changes) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'changes must be a JSON object';
    END IF;
    -- check_key(): existing columns, tenant_id where the table has one, and the columns of the
    -- primary key or of a unique index (tenant_id may come on top of a globally unique id).
    IF cardinality(key_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'key must name at least one column';
    END IF;
    FOREACH c IN ARRAY key_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('key names unknown column "%s" of %s', c, t_name);
        END IF;
    END LOOP;
    IF has_tenant AND NOT 'tenant_id' = ANY (key_names) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'key must include tenant_id: ' || t_name || ' has a tenant_id column';
    END IF;
    IF NOT key_unique THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('key columns (%s) do not contain the primary key or a unique index of %s',
                             array_to_string(key_names, ','), t_name);
    END IF;
    -- check_changes(): existing columns, not the version, tenant_id, a key or a generated column.
    IF cardinality(change_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'changes must name at least one column';
    END IF;
    FOREACH c IN ARRAY change_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('changes name unknown column "%s" of %s', c, t_name);
        END IF;
        IF c = 'entity_version' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'changes must not set entity_version: cas_update sets it to expected + 1';
        END IF;
        IF c = 'tenant_id' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'changes must not set tenant_id';
        END IF;
        IF c = ANY (key_names) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('changes must not set key column "%s"', c);
        END IF;
        IF c = ANY (generated) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('changes must not set generated column "%s"', c);
        END IF;
    END LOOP;
    IF typed AND 1 + cardinality(change_names) + cardinality(key_names) <= 32 THEN
        EXECUTE 'SELECT (SELECT true FROM pg_catalog.jsonb_to_record($1) AS c(' || change_record || '))'
                || ' AND (SELECT true FROM pg_catalog.jsonb_to_record($2) AS k(' || key_record || '))'
          USING changes, key;
    END IF;
    EXECUTE 'UPDATE ' || t_name || ' t SET (' || set_list || 'entity_version) = (SELECT ' || value_list
            || '$3 OPERATOR(pg_catalog.+) 1 FROM pg_catalog.jsonb_to_record($2) AS c(' || change_record || '))'
            || ' FROM pg_catalog.jsonb_to_record($1) AS k(' || key_record || ') WHERE ' || key_cond
            || ' AND t.entity_version OPERATOR(pg_catalog.=) $3 RETURNING t.entity_version'
       INTO new_version
      USING key, changes, expected_version;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.internal_error@',
            MESSAGE = 'cas_update matched more than one row of ' || t_name;
    END IF;
    IF n = 0 THEN
        -- Tell the answers apart: no row (P0002) or another version (FY002).
        EXECUTE 'SELECT t.entity_version FROM ' || t_name || ' t, pg_catalog.jsonb_to_record($1) AS k(' || key_record
                || ') WHERE ' || key_cond
           INTO current_version
          USING key;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n = 0 THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.no_data_found@',
                MESSAGE = 'no row of ' || t_name || ' matches the key';
        END IF;
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.version_conflict@', MESSAGE = 'version conflict on ' || t_name,
            DETAIL = format('expected version %s, current version %s', expected_version, coalesce(current_version, 0));
    END IF;
    RETURN coalesce(new_version, 0);
END

-- @body fy_cas_get
-- The row named by key as jsonb, with its entity_version; no row when the key matches none.
-- t.*, not t: a column named "t" would make the bare alias ambiguous (42702).
DECLARE
    t_name text;
    kind "char";
    t_versioned boolean;
    key_names text[];
    change_names text[];
    known text[];
    has_tenant boolean;
    has_version boolean;
    generated text[];
    key_record text;
    key_cond text;
    change_record text;
    set_list text;
    value_list text;
    typed boolean;
    key_unique boolean;
    c text;
    r record;
    found_row boolean := false;
    row_json jsonb;
    row_version bigint;
BEGIN
    IF rel IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'rel must not be NULL';
    END IF;
    -- read_table(), for the columns the call names (and tenant_id, entity_version): the table's
    -- regclass name and kind, its trigger, the arguments' top-level keys (sorted in byte order;
    -- none unless an object), which named columns exist (and which are generated), the pieces of
    -- the statements (column definition lists of jsonb_to_record, the key condition, the SET
    -- lists), whether the call takes the typed form (every named column plain: a base, enum,
    -- range or multirange type that is not an array, json or jsonb; every value a JSON scalar),
    -- and whether the key contains every column of the primary key or of a unique index (no
    -- expressions, no predicates).
    SELECT rel::pg_catalog.regclass::pg_catalog.text, rc.relkind,
           EXISTS (SELECT FROM pg_catalog.pg_trigger g
                    WHERE g.tgrelid OPERATOR(pg_catalog.=) rel AND g.tgname OPERATOR(pg_catalog.=) 'forgeyard_versioning'),
           kx.key_names, kx.change_names, coalesce(ax.known, '{}'), coalesce(ax.has_tenant, false),
           coalesce(ax.has_version, false), coalesce(ax.generated, '{}'), ax.key_record, ax.key_cond, ax.change_record,
           ax.set_list, ax.value_list, coalesce(ax.typed, false),
           EXISTS (SELECT FROM pg_catalog.pg_index i
                    WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND i.indisunique AND i.indpred IS NULL
                      AND i.indexprs IS NULL AND i.indkey::pg_catalog.int2[] OPERATOR(pg_catalog.<@) ax.key_nums)
      INTO t_name, kind, t_versioned, key_names, change_names, known, has_tenant, has_version, generated,
           key_record, key_cond, change_record, set_list, value_list, typed, key_unique
      FROM pg_catalog.pg_class rc,
           LATERAL (SELECT ARRAY(SELECT j.k FROM pg_catalog.jsonb_object_keys(
                                     CASE WHEN pg_catalog.jsonb_typeof(key) OPERATOR(pg_catalog.=) 'object' THEN key END) j(k)
                                  ORDER BY j.k COLLATE "C") AS key_names,
                           '{}'::pg_catalog.text[] AS change_names
                    OFFSET 0) kx,
           LATERAL (SELECT pg_catalog.array_agg(x.name) AS known,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'tenant_id') AS has_tenant,
                           pg_catalog.bool_or(x.name OPERATOR(pg_catalog.=) 'entity_version') AS has_version,
                           pg_catalog.array_agg(x.name) FILTER (WHERE x.generated) AS generated,
                           pg_catalog.array_agg(x.attnum) FILTER (WHERE x.is_key) AS key_nums,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_record,
                           pg_catalog.string_agg('t.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||)
                                                 ' OPERATOR(pg_catalog.=) k.' OPERATOR(pg_catalog.||) x.q, ' AND '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_key) AS key_cond,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.type, ', '
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS change_record,
                           pg_catalog.string_agg(x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS set_list,
                           pg_catalog.string_agg('c.' OPERATOR(pg_catalog.||) x.q OPERATOR(pg_catalog.||) ', ', ''
                                                 ORDER BY x.name COLLATE "C") FILTER (WHERE x.is_change) AS value_list,
                           pg_catalog.bool_and(x.plain AND pg_catalog.jsonb_typeof(
                                                   CASE WHEN x.is_key THEN key ELSE NULL::pg_catalog.jsonb END OPERATOR(pg_catalog.->) x.name)
                                                 OPERATOR(pg_catalog.<>) ALL ('{object,array}'::pg_catalog.text[]))
                             FILTER (WHERE x.is_key OR x.is_change) AS typed
                      FROM (SELECT at.attname::pg_catalog.text AS name, pg_catalog.quote_ident(at.attname) AS q, at.attnum,
                                   at.attgenerated OPERATOR(pg_catalog.<>) '' AS generated,
                                   pg_catalog.format_type(at.atttypid, at.atttypmod) AS type,
                                   y.typtype OPERATOR(pg_catalog.=) ANY ('{b,e,r,m}'::pg_catalog."char"[])
                                     AND y.typcategory OPERATOR(pg_catalog.<>) 'A'
                                     AND y.oid OPERATOR(pg_catalog.<>) ALL ('{114,3802}'::pg_catalog.oid[]) AS plain,   -- json, jsonb
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names) AS is_key,
                                   at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names) AS is_change
                              FROM pg_catalog.pg_attribute at
                              JOIN pg_catalog.pg_type y ON y.oid OPERATOR(pg_catalog.=) at.atttypid
                             WHERE at.attrelid OPERATOR(pg_catalog.=) rel AND at.attnum OPERATOR(pg_catalog.>) 0
                               AND NOT at.attisdropped
                               AND (at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.key_names)
                                    OR at.attname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (kx.change_names)
                                    OR at.attname OPERATOR(pg_catalog.=) ANY ('{tenant_id,entity_version}'::pg_catalog.name[]))) x) ax
     WHERE rc.oid OPERATOR(pg_catalog.=) rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.undefined_object@', MESSAGE = 'relation does not exist';
    END IF;
    -- An UPDATE moving a row between partitions re-inserts it (version != 1).
    IF kind = 'p' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'rel must be a plain table, not a partitioned one: ' || t_name,
            DETAIL = 'version its partitions one by one';
    END IF;
    IF kind <> 'r' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'rel must be a table: ' || t_name;
    END IF;
    -- versioned_table(): the table must have entity_version and the trigger.
    IF NOT has_version THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = t_name || ' has no entity_version column';
    END IF;
    IF NOT t_versioned THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = t_name || ' is not under version control',
            DETAIL = format('call forgeyard.enable_versioning(''%s'') first', t_name);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.null_value@', MESSAGE = 'key must not be NULL';
    END IF;
    IF jsonb_typeof(key) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'key must be a JSON object';
    END IF;
    -- check_key(): existing columns, tenant_id where the table has one, and the columns of the
    -- primary key or of a unique index (tenant_id may come on top of a globally unique id).
    IF cardinality(key_names) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'key must name at least one column';
    END IF;
    FOREACH c IN ARRAY key_names LOOP
        IF NOT c = ANY (known) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = format('key names unknown column "%s" of %s', c, t_name);
        END IF;
    END LOOP;
    IF has_tenant AND NOT 'tenant_id' = ANY (key_names) THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'key must include tenant_id: ' || t_name || ' has a tenant_id column';
    END IF;
    IF NOT key_unique THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = format('key columns (%s) do not contain the primary key or a unique index of %s',
                             array_to_string(key_names, ','), t_name);
    END IF;
    -- Every matching row is read and the last one kept, as the C++ does (a key names one row).
    FOR r IN EXECUTE 'SELECT pg_catalog.to_jsonb(t.*) AS j, t.entity_version AS v FROM ' || t_name
                     || ' t, pg_catalog.jsonb_to_record($1) AS k(' || key_record || ') WHERE ' || key_cond
               USING key LOOP
        found_row := true;
        row_json := r.j;
        row_version := coalesce(r.v, 0);
    END LOOP;
    IF found_row THEN
        RETURN QUERY SELECT row_json, row_version;
    END IF;
END
