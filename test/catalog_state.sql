-- catalog_state: everything an install of convctx puts in the catalog, one
-- row per object (kind, name, props), comparable between two installs made
-- by different paths (sql/upgrade.sql: a fresh CREATE EXTENSION against an
-- older version updated with ALTER EXTENSION UPDATE), or of convctx_recall
-- after SET catalog_state.extension = convctx_recall. Names, not OIDs;
-- privileges sorted (their order in an ACL means nothing); column order as
-- the rank among live columns (an update leaves dropped ones behind).
CREATE TEMP VIEW catalog_state AS
WITH ext AS (SELECT e.oid, e.extnamespace AS nsp FROM pg_extension e
             WHERE e.extname = coalesce(nullif(current_setting('catalog_state.extension', true), ''), 'convctx'))
SELECT 'extension' AS kind, e.extname::text AS name,
       e.extversion || ' relocatable ' || e.extrelocatable::text || ' schema ' || e.extnamespace::regnamespace::text
           || ' owner ' || pg_get_userbyid(e.extowner) AS props
FROM pg_extension e, ext WHERE e.oid = ext.oid
UNION ALL
-- the tables pg_dump dumps, and which of their rows
SELECT 'config_dump', x.oid::regclass::text, coalesce(x.cond, '-')
FROM pg_extension e, ext, unnest(e.extconfig, e.extcondition) AS x(oid, cond)
WHERE e.oid = ext.oid
UNION ALL
-- what DROP EXTENSION drops (pg_depend deptype 'e')
SELECT 'member', pg_describe_object(d.classid, d.objid, d.objsubid), 'member'
FROM pg_depend d, ext
WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
UNION ALL
SELECT 'schema', n.nspname::text,
       'owner ' || pg_get_userbyid(n.nspowner) || ' acl ' || coalesce(array(SELECT a::text FROM unnest(n.nspacl) a ORDER BY 1)::text, 'default')
           || ' comment ' || coalesce(obj_description(n.oid, 'pg_namespace'), '-')
FROM pg_namespace n, ext WHERE n.oid = ext.nsp
UNION ALL
-- the cluster's roles that the install scripts create and grant to
SELECT 'role', r.rolname::text,
       concat_ws(' ', r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
                 r.rolreplication, r.rolbypassrls, r.rolconnlimit, r.rolvaliduntil, r.rolconfig::text)
           || ' member of ' || coalesce((SELECT string_agg(m.roleid::regrole::text || CASE WHEN m.admin_option THEN ' with admin' ELSE '' END, ', ' ORDER BY 1)
                                          FROM pg_auth_members m WHERE m.member = r.oid), '-')
           || ' comment ' || coalesce(shobj_description(r.oid, 'pg_authid'), '-')
FROM pg_roles r WHERE r.rolname IN ('convctx_app', 'convctx_admin', 'convctx_audit')
UNION ALL
-- signature, symbol, volatility, strictness, parallel safety, cost, rows,
-- SET search_path, SECURITY DEFINER or not: all in the definition
SELECT 'function', p.oid::regprocedure::text,
       pg_get_functiondef(p.oid) || ' owner ' || pg_get_userbyid(p.proowner)
           || ' acl ' || coalesce(array(SELECT a::text FROM unnest(p.proacl) a ORDER BY 1)::text, 'default')
           || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
FROM pg_proc p, ext WHERE p.pronamespace = ext.nsp
UNION ALL
SELECT 'relation', c.relname::text,
       c.relkind::text || ' ' || c.relpersistence::text || ' replident ' || c.relreplident::text
           || ' rls ' || c.relrowsecurity::text || ' force ' || c.relforcerowsecurity::text
           || ' options ' || coalesce(array(SELECT o FROM unnest(c.reloptions) o ORDER BY 1)::text, '-')
           || ' owner ' || pg_get_userbyid(c.relowner)
           || ' acl ' || coalesce(array(SELECT a::text FROM unnest(c.relacl) a ORDER BY 1)::text, 'default')
           || ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '-')
           || CASE c.relkind WHEN 'v' THEN ' view ' || pg_get_viewdef(c.oid)
                             WHEN 'i' THEN ' index ' || pg_get_indexdef(c.oid)
                             ELSE '' END
FROM pg_class c, ext WHERE c.relnamespace = ext.nsp
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       (rank() OVER (PARTITION BY c.oid ORDER BY a.attnum))::text || ' ' || format_type(a.atttypid, a.atttypmod)
           || ' collate ' || coalesce((SELECT collname FROM pg_collation WHERE oid = a.attcollation), '-')
           || ' not null ' || a.attnotnull::text
           || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
           || ' generated ' || a.attgenerated::text || ' identity ' || a.attidentity::text
           || ' storage ' || a.attstorage::text || ' compression ' || a.attcompression::text
           || ' stattarget ' || a.attstattarget::text
           || ' acl ' || coalesce(nullif(array(SELECT x::text FROM unnest(a.attacl) x ORDER BY 1)::text, '{}'), '-')
           || ' comment ' || coalesce(col_description(c.oid, a.attnum), '-')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
CROSS JOIN ext
WHERE c.relnamespace = ext.nsp AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', con.conrelid::regclass::text || '.' || con.conname,
       con.contype::text || ' ' || pg_get_constraintdef(con.oid)
           || ' deferrable ' || con.condeferrable::text || ' deferred ' || con.condeferred::text
           || ' valid ' || con.convalidated::text || ' noinherit ' || con.connoinherit::text
           || ' comment ' || coalesce(obj_description(con.oid, 'pg_constraint'), '-')
FROM pg_constraint con, ext WHERE con.connamespace = ext.nsp
UNION ALL
SELECT 'policy', pol.polrelid::regclass::text || '.' || pol.polname,
       pol.polcmd::text || ' permissive ' || pol.polpermissive::text
           || ' to ' || array(SELECT CASE WHEN r = 0 THEN 'public' ELSE r::regrole::text END FROM unnest(pol.polroles) r ORDER BY 1)::text
           || ' using ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-')
           || ' check ' || coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '-')
           || ' comment ' || coalesce(obj_description(pol.oid, 'pg_policy'), '-')
FROM pg_policy pol JOIN pg_class c ON c.oid = pol.polrelid CROSS JOIN ext
WHERE c.relnamespace = ext.nsp
UNION ALL
-- user triggers (internal ones, such as those of foreign keys, carry OIDs
-- in their names and follow from the constraints)
SELECT 'trigger', t.tgrelid::regclass::text || '.' || t.tgname,
       pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
           || ' comment ' || coalesce(obj_description(t.oid, 'pg_trigger'), '-')
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid CROSS JOIN ext
WHERE c.relnamespace = ext.nsp AND NOT t.tgisinternal
UNION ALL
SELECT 'type', t.typname::text, t.typtype::text || ' ' || coalesce(t.typrelid::regclass::text, '-')
FROM pg_type t, ext WHERE t.typnamespace = ext.nsp;
