-- The catalog of the forgeyard extension as sorted, single lines, for tests/pg/upgrade.sh to compare
-- between databases that reached the same version by different paths (the full install script, or
-- an old version and the upgrade scripts). Each line names its kind first:
--   extension, schema    version, schema, relocatable, owner
--   function             one line per line of pg_get_functiondef (arguments and their defaults, result,
--                        language, volatility, strictness, parallel, security, settings, rows, body or
--                        library symbol), then owner
--   relation             kind, persistence, reloptions (autovacuum settings) and its TOAST table's, row
--                        security, replica identity, owner
--   column               position, type, not null, default, collation, identity, generated
--   index, constraint    pg_get_indexdef, pg_get_constraintdef (names included)
--   trigger              pg_get_triggerdef and its enabled state (O, D, R or A)
--   view                 one line per line of pg_get_viewdef
--   sequence, type       sequence parameters; every type in the schema (row and array types included)
--   grant                every privilege on the schema, relations, columns, functions, types
--   init-privs           pg_init_privs: the privileges pg_dump takes as the extension's own
--   comment              every comment on the extension, the schema and anything in it
--   config-dump          pg_extension_config_dump registrations: table or sequence and its condition
--   member, depend       extension membership; dependencies between objects in the schema
--   access-catalog       the rows of forgeyard.access_catalog (what each access kind grants)
WITH ns AS (SELECT 'forgeyard'::regnamespace::oid AS oid),
ext AS (SELECT x.* FROM pg_extension x WHERE x.extname = 'forgeyard'),
-- Objects in the schema (pg_identify_object names the schema of sub-objects: columns, constraints,
-- indexes, triggers, rules), plus the schema and the extension themselves. Only objects created
-- after initdb (oid >= 16384, FirstNormalObjectId) are looked at, for speed.
ours(classid, objid, objsubid) AS (
  SELECT o.classid, o.objid, o.objsubid
    FROM (SELECT classoid AS classid, objoid AS objid, objsubid FROM pg_description
          UNION SELECT classid, objid, objsubid FROM pg_depend
          UNION SELECT refclassid, refobjid, refobjsubid FROM pg_depend
          UNION SELECT classoid, objoid, objsubid FROM pg_init_privs) o,
         pg_identify_object(o.classid, o.objid, o.objsubid) i
   WHERE o.objid >= 16384 AND i.schema = 'forgeyard'
      OR (o.classid = 'pg_namespace'::regclass AND o.objid = (SELECT oid FROM ns))
      OR (o.classid = 'pg_extension'::regclass AND o.objid = (SELECT oid FROM ext))),
acls(object, acl) AS (
  SELECT 'schema forgeyard', n.nspacl FROM pg_namespace n, ns WHERE n.oid = ns.oid
  UNION ALL
  SELECT pg_describe_object('pg_class'::regclass, c.oid, 0), c.relacl
    FROM pg_class c, ns WHERE c.relnamespace = ns.oid
  UNION ALL
  SELECT pg_describe_object('pg_class'::regclass, a.attrelid, a.attnum), a.attacl
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid, ns
   WHERE c.relnamespace = ns.oid AND a.attnum > 0 AND a.attacl IS NOT NULL
  UNION ALL
  SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), p.proacl FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
  UNION ALL
  SELECT pg_describe_object('pg_type'::regclass, t.oid, 0), t.typacl FROM pg_type t, ns WHERE t.typnamespace = ns.oid)
SELECT line FROM (
  SELECT 'extension ' || x.extname || ' version=' || x.extversion || ' schema=' || x.extnamespace::regnamespace
         || ' relocatable=' || x.extrelocatable || ' owner=' || x.extowner::regrole AS line
    FROM ext x
  UNION ALL
  SELECT 'schema ' || n.nspname || ' owner=' || n.nspowner::regrole FROM pg_namespace n, ns WHERE n.oid = ns.oid
  UNION ALL
  -- The numbered lines keep a function's definition in order after the sort.
  SELECT 'function ' || p.oid::regprocedure || ' ' || lpad(d.n::text, 3, '0') || ' ' || d.line
    FROM pg_proc p, ns, string_to_table(pg_get_functiondef(p.oid), E'\n') WITH ORDINALITY d(line, n)
   WHERE p.pronamespace = ns.oid
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure || ' owner=' || p.proowner::regrole
    FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
  UNION ALL
  SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text
         || ' options=' || coalesce(c.reloptions::text, '') || ' toast_options=' || coalesce(t.reloptions::text, '')
         || ' rls=' || c.relrowsecurity || '/' || c.relforcerowsecurity || ' replident=' || c.relreplident::text
         || ' owner=' || c.relowner::regrole
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
  UNION ALL
  SELECT 'column ' || c.relname || '.' || a.attname
         || ' position=' || row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum)
         || ' ' || format_type(a.atttypid, a.atttypmod) || ' notnull=' || a.attnotnull
         || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
         || ' collation=' || coalesce(co.collname, '') || ' identity=' || a.attidentity::text
         || ' generated=' || a.attgenerated::text
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
    LEFT JOIN pg_collation co ON co.oid = a.attcollation
   WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' clustered=' || i.indisclustered
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN ns ON c.relnamespace = ns.oid
  UNION ALL
  SELECT 'constraint ' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN ns ON c.relnamespace = ns.oid
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN ns ON c.relnamespace = ns.oid
   WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'view ' || c.relname || ' ' || lpad(d.n::text, 3, '0') || ' ' || d.line
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid,
         string_to_table(pg_get_viewdef(c.oid), E'\n') WITH ORDINALITY d(line, n)
   WHERE c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'sequence ' || c.relname || ' type=' || format_type(s.seqtypid, NULL) || ' start=' || s.seqstart
         || ' increment=' || s.seqincrement || ' min=' || s.seqmin || ' max=' || s.seqmax || ' cache=' || s.seqcache
         || ' cycle=' || s.seqcycle
    FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN ns ON c.relnamespace = ns.oid
  UNION ALL
  SELECT 'type ' || t.typname || ' kind=' || t.typtype::text
         || ' relation=' || coalesce(nullif(t.typrelid, 0)::regclass::text, '')
         || ' element=' || coalesce(nullif(t.typelem, 0)::regtype::text, '')
         || ' base=' || coalesce(nullif(t.typbasetype, 0)::regtype::text, '') || ' owner=' || t.typowner::regrole
    FROM pg_type t, ns WHERE t.typnamespace = ns.oid
  UNION ALL
  SELECT 'grant ' || a.object || ' to ' || coalesce(g.rolname, 'PUBLIC') || ' ' || e.privilege_type
         || ' grantable=' || e.is_grantable || ' by ' || e.grantor::regrole
    FROM acls a, aclexplode(a.acl) e LEFT JOIN pg_roles g ON g.oid = e.grantee
  UNION ALL
  SELECT 'grant ' || a.object || ' default (no ACL)' FROM acls a WHERE a.acl IS NULL
  UNION ALL
  SELECT 'init-privs ' || pg_describe_object(p.classoid, p.objoid, p.objsubid) || ' ' || p.privtype::text
         || ' ' || p.initprivs::text
    FROM pg_init_privs p JOIN ours o ON (o.classid, o.objid, o.objsubid) = (p.classoid, p.objoid, p.objsubid)
  UNION ALL
  SELECT 'comment ' || pg_describe_object(d.classoid, d.objoid, d.objsubid) || ': ' || d.description
    FROM pg_description d JOIN ours o ON (o.classid, o.objid, o.objsubid) = (d.classoid, d.objoid, d.objsubid)
  UNION ALL
  -- As a set: the order of registration does not matter to pg_dump.
  SELECT 'config-dump ' || c.cfg::regclass || ' condition=' || coalesce(c.cond, '')
    FROM ext x, unnest(x.extconfig, x.extcondition) c(cfg, cond)
  UNION ALL
  SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN ext x ON d.refobjid = x.oid AND d.refclassid = 'pg_extension'::regclass
   WHERE d.deptype = 'e'
  UNION ALL
  SELECT 'depend ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ' on '
         || pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' type=' || d.deptype::text
    FROM pg_depend d
    JOIN ours o ON (o.classid, o.objid, o.objsubid) = (d.classid, d.objid, d.objsubid)
    JOIN ours r ON (r.classid, r.objid, r.objsubid) = (d.refclassid, d.refobjid, d.refobjsubid)
   WHERE d.deptype <> 'e'
  UNION ALL
  SELECT 'access-catalog ' || a.access || ' ' || a.privilege || ' ' || a.object FROM forgeyard.access_catalog a
) lines ORDER BY line;
