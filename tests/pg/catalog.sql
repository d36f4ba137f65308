-- The catalog of the forgeyard extension as sorted lines: functions (signature, security,
-- settings, volatility, grants, comment), relations (kind, options, grants, comment), columns,
-- indexes, constraints, triggers, config-dump registrations and extension membership.
-- tests/pg/upgrade.sh compares it between an upgraded and a freshly installed database.
WITH ns AS (SELECT 'forgeyard'::regnamespace AS oid),
acl AS (
  SELECT a.objoid, a.kind, string_agg(a.grantee || ':' || a.privilege_type, ',' ORDER BY a.grantee, a.privilege_type) AS acl
    FROM (SELECT p.oid AS objoid, 'f' AS kind, coalesce(r.rolname, 'PUBLIC') AS grantee, e.privilege_type
            FROM pg_proc p, ns, aclexplode(p.proacl) e LEFT JOIN pg_roles r ON r.oid = e.grantee
           WHERE p.pronamespace = ns.oid
          UNION ALL
          SELECT c.oid, 'r', coalesce(r.rolname, 'PUBLIC'), e.privilege_type
            FROM pg_class c, ns, aclexplode(c.relacl) e LEFT JOIN pg_roles r ON r.oid = e.grantee
           WHERE c.relnamespace = ns.oid) a
   GROUP BY a.objoid, a.kind)
SELECT line FROM (
  SELECT 'function ' || p.oid::regprocedure || ' returns ' || pg_get_function_result(p.oid)
         || ' secdef=' || p.prosecdef || ' volatile=' || p.provolatile::text || ' strict=' || p.proisstrict
         || ' config=' || coalesce(p.proconfig::text, '') || ' lang=' || l.lanname
         || ' src=' || coalesce(p.prosrc, '') || ' acl=' || coalesce(a.acl, '')
         || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '') AS line
    FROM pg_proc p JOIN ns ON p.pronamespace = ns.oid JOIN pg_language l ON l.oid = p.prolang
    LEFT JOIN acl a ON a.objoid = p.oid AND a.kind = 'f'
  UNION ALL
  SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' options=' || coalesce(c.reloptions::text, '')
         || ' acl=' || coalesce(a.acl, '') || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '')
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid LEFT JOIN acl a ON a.objoid = c.oid AND a.kind = 'r'
  UNION ALL
  SELECT 'column ' || c.relname || '.' || at.attname || ' ' || format_type(at.atttypid, at.atttypmod)
         || ' notnull=' || at.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
         || ' comment=' || coalesce(col_description(c.oid, at.attnum), '')
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid
    JOIN pg_attribute at ON at.attrelid = c.oid AND at.attnum > 0 AND NOT at.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = at.attnum
   WHERE c.relkind IN ('r', 'v')
  UNION ALL
  SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN ns ON c.relnamespace = ns.oid
  UNION ALL
  SELECT 'constraint ' || c.relname || ' ' || pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN ns ON c.relnamespace = ns.oid
  UNION ALL
  SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
    FROM pg_class c JOIN ns ON c.relnamespace = ns.oid WHERE c.relkind = 'v'
  UNION ALL
  SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN ns ON c.relnamespace = ns.oid
   WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'config-dump ' || cfg::regclass
    FROM pg_extension x, unnest(x.extconfig) cfg WHERE x.extname = 'forgeyard'
  UNION ALL
  SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    FROM pg_depend d JOIN pg_extension x ON d.refobjid = x.oid AND d.refclassid = 'pg_extension'::regclass
   WHERE x.extname = 'forgeyard' AND d.deptype = 'e'
) lines ORDER BY line;
