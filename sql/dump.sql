-- pg_dump keeps convctx's user data: every table that holds it is registered.
SELECT c.relname, d.cfg AS filter
FROM pg_catalog.pg_extension e,
     LATERAL unnest(e.extconfig, e.extcondition) AS d(oid, cfg)
     JOIN pg_catalog.pg_class c ON c.oid = d.oid
WHERE e.extname = 'convctx'
ORDER BY c.relname;

-- and no table of the extension is left out
SELECT c.relname AS unregistered_table
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                  WHERE e.extname = 'convctx' AND c.oid = ANY (e.extconfig))
ORDER BY 1;

-- the schema and every function, table and column explain themselves
SELECT p.oid::regprocedure AS function_without_comment
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'convctx'::regnamespace
  AND pg_catalog.obj_description(p.oid, 'pg_proc') IS NULL
ORDER BY 1;
SELECT c.relname AS relation_without_comment
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind IN ('r', 'v')
  AND pg_catalog.obj_description(c.oid, 'pg_class') IS NULL
ORDER BY 1;
SELECT pg_catalog.obj_description('convctx'::regnamespace, 'pg_namespace') IS NOT NULL AS schema_commented;
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'convctx';

-- every function: volatility, parallel safety and strictness as documented
SELECT proname, provolatile, proparallel, proisstrict
FROM pg_catalog.pg_proc
WHERE pronamespace = 'convctx'::regnamespace
ORDER BY proname;
