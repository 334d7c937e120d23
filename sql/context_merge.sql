-- context_merge and context_aspect: the pure functions over context objects.

-- NULL context means an empty one
SELECT convctx.context_merge(NULL, ARRAY['a', 'b']);
SELECT convctx.context_merge(NULL, NULL);
SELECT convctx.context_merge('{}', ARRAY['a']);
SELECT convctx.context_merge('{"activeNodeIds": []}', '{}');

-- LRU order: present ids keep their order, a re-referenced id moves to the end,
-- new ids are appended in the order given
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['b', 'd']);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['c']);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['a', 'b', 'c']);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['c', 'b', 'a']);

-- duplicates within node_ids collapse to their first occurrence; NULL and '' are ignored
SELECT convctx.context_merge(NULL, ARRAY['x', 'y', 'x', NULL, '', 'y', 'z']);
SELECT convctx.context_merge('{"activeNodeIds": ["a"]}', ARRAY[NULL, '']::text[]);
-- duplicates already in a stored list keep their most recent (last) position
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "a", "c", ""]}', ARRAY['d']);

-- other keys are kept untouched, nested values included
SELECT convctx.context_merge('{"activeNodeIds": ["a"], "flags": {"x": [1, {"y": null}]}, "v": 2}', ARRAY['b']);
SELECT convctx.context_merge('{"flags": {"x": true}}', ARRAY['b']);

-- ids are compared byte for byte: case, spaces and non-ASCII matter
SELECT convctx.context_merge('{"activeNodeIds": ["IE:VAT", "ie:vat"]}', ARRAY['IE:VAT ', 'Überweisung', 'IE:VAT']);

-- pruning: the least recently referenced ids go from the front
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['d', 'e'], 3);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', ARRAY['a'], 2);
SELECT convctx.context_merge(NULL, ARRAY['a', 'b', 'c', 'd'], 2);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b", "c"]}', NULL, 1);
-- max_nodes NULL falls back to convctx.max_active_nodes
SET convctx.max_active_nodes = 2;
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b"]}', ARRAY['c']);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b"]}', ARRAY['c'], NULL);
SELECT convctx.context_merge('{"activeNodeIds": ["a", "b"]}', ARRAY['c'], 5);
RESET convctx.max_active_nodes;
SELECT pg_catalog.jsonb_array_length(convctx.context_merge(NULL, (SELECT array_agg('n' || i) FROM generate_series(1, 300) i)) -> 'activeNodeIds');
SELECT convctx.context_merge(NULL, (SELECT array_agg('n' || i) FROM generate_series(1, 300) i)) -> 'activeNodeIds' ->> 0;
SET convctx.max_active_nodes = 0;
SET convctx.max_active_nodes = 'many';
SET convctx.max_active_nodse = 3;

-- a large merge stays exact
SELECT pg_catalog.jsonb_array_length(m -> 'activeNodeIds') AS n,
       m -> 'activeNodeIds' ->> 0 AS first, m -> 'activeNodeIds' ->> 9999 AS last
FROM (SELECT convctx.context_merge(
          convctx.context_merge(NULL, (SELECT array_agg('n' || i) FROM generate_series(1, 10000) i), 100000),
          (SELECT array_agg('n' || i) FROM generate_series(1, 10000, 2) i), 100000) AS m) s;

-- the result is the jsonb PostgreSQL builds for the same value, byte for
-- byte (context_merge writes it directly), and the same merge in SQL: other
-- keys of every type, nested, sorting before and after activeNodeIds,
-- numbers and containers at every alignment, more than 32 ids and pairs
-- (every 32nd JEntry holds an offset)
BEGIN;
CREATE CAST (jsonb AS bytea) WITHOUT FUNCTION;
-- (the cast compares bytes: equal values may differ)
SELECT '[1.0]'::jsonb = '[1]' AS equal, '[1.0]'::jsonb::bytea = '[1]'::jsonb::bytea AS same_bytes;
CREATE FUNCTION pg_temp.merge_sql(ctx jsonb, node_ids text[], max_nodes integer)
RETURNS jsonb LANGUAGE sql AS $$
SELECT coalesce(ctx, '{}') || jsonb_build_object('activeNodeIds', coalesce(to_jsonb(
           ids[greatest(n - max_nodes, 0) + 1:]), '[]'))
FROM (SELECT array_agg(id ORDER BY k) AS ids, count(*) AS n
      FROM (SELECT id, coalesce(min(ord) FILTER (WHERE referenced) + 1099511627776, max(ord)) AS k
            FROM (SELECT id, ord, false AS referenced
                  FROM jsonb_array_elements_text(ctx -> 'activeNodeIds') WITH ORDINALITY AS e(id, ord)
                  UNION ALL
                  SELECT id, ord, true
                  FROM unnest(node_ids) WITH ORDINALITY AS b(id, ord)) AS occurrences
            WHERE id <> ''
            GROUP BY id) AS keyed) AS merged
$$;
CREATE TEMP TABLE merge_cases (name text, ctx jsonb, ids text[], max_nodes integer);
INSERT INTO merge_cases VALUES
    ('null ctx', NULL, ARRAY['a', 'b'], 10),
    ('empty ctx, no ids', '{}', NULL, 10),
    ('every type around', '{"a": 1.5, "b": true, "c": null, "dd": "str", "e": false, "activeNodeIdA": [1, 2.25, "x"],
      "activeNodeIds": ["x", "y"], "activeNodeIdz": {"q": [1, {"r": null}], "s": 7}, "flags": {"x": [1, {"y": null}]},
      "zzzzzzzzzzzzzz": -0.000001, "k": "abc", "n": 12345.678}', ARRAY['y', 'w'], 10),
    ('no list, keys both sides', '{"k": "abc", "n": 3.5, "zzzzzzzzzzzzzzz": [true], "activeNodeIdr": "odd"}', ARRAY['a'], 10),
    ('only a longer key', '{"zzzzzzzzzzzzzzzzz": {"n": 1e100}}', ARRAY['a'], 10),
    ('only a shorter key', '{"n": 1}', ARRAY['a', 'b'], 1),
    ('41 stored, 30 new', jsonb_build_object('activeNodeIds', (SELECT jsonb_agg('n' || i) FROM generate_series(1, 41) i), 'v', 2.5),
        (SELECT array_agg(CASE WHEN i % 2 = 0 THEN 'n' || i ELSE 'm' || i END) FROM generate_series(1, 60) i), 1000),
    ('100 stored, pruned', jsonb_build_object('activeNodeIds', (SELECT jsonb_agg(repeat('i', i % 5) || i) FROM generate_series(1, 100) i)),
        ARRAY['3', 'ii7', 'new', NULL, ''], 70),
    ('batch alone over max', '{"activeNodeIds": ["a", "b"]}', (SELECT array_agg('b' || i) FROM generate_series(1, 80) i), 33),
    ('40 pairs of every type', (SELECT jsonb_object_agg(repeat('k', i % 17) || i,
            CASE i % 5 WHEN 0 THEN to_jsonb(i * 1.5) WHEN 1 THEN to_jsonb(repeat('s', i % 7))
                       WHEN 2 THEN jsonb_build_array(i, 'x', i * 0.25) WHEN 3 THEN 'null'
                       ELSE jsonb_build_object('n', i % 3 = 0, 'm', repeat('t', i % 3)) END)
         || jsonb_build_object('activeNodeIds', jsonb_build_array('a', 'b', 'c'))
         FROM generate_series(1, 40) i), ARRAY['c', 'd'], 3),
    ('nulls across the bitmap', '{"activeNodeIds": ["v4", "w"]}',
        (SELECT array_agg(CASE WHEN i % 3 = 0 THEN NULL WHEN i % 5 = 0 THEN '' ELSE 'v' || i END) FROM generate_series(1, 40) i), 100),
    ('varchar ids', '{"activeNodeIds": ["b"]}', ARRAY['a', 'b', 'c']::varchar[], 100),
    ('40 pairs, no list', (SELECT jsonb_object_agg('key' || i, CASE WHEN i % 2 = 0 THEN to_jsonb(i + 0.5) ELSE to_jsonb('v' || i) END)
         FROM generate_series(1, 40) i), (SELECT array_agg('x' || i) FROM generate_series(1, 50) i), 45);
SELECT name,
       convctx.context_merge(ctx, ids, max_nodes) = pg_temp.merge_sql(ctx, ids, max_nodes) AS equal,
       convctx.context_merge(ctx, ids, max_nodes)::bytea = pg_temp.merge_sql(ctx, ids, max_nodes)::bytea AS same_bytes
FROM merge_cases;
SELECT convctx.context_merge(ctx, ids, max_nodes) FROM merge_cases WHERE name = 'every type around';
ROLLBACK;

-- errors: each is 22023 and names the problem
SELECT convctx.context_merge('[]', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('"a"', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('null', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": "a"}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": {"a": 1}}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": null}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": ["a", 1]}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": ["a", null]}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{"activeNodeIds": [["a"]]}', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{}', ARRAY['a'], 0);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{}', ARRAY['a'], -5);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_merge('{}', ARRAY[['a', 'b'], ['c', 'd']]);
\echo :LAST_ERROR_SQLSTATE
-- a stored list that is not all strings is reported before node ids of 2 dimensions
SELECT convctx.context_merge('{"activeNodeIds": ["a", 1]}', ARRAY[['a', 'b'], ['c', 'd']]);
\echo :LAST_ERROR_SQLSTATE

-- context_aspect: the prompt paragraph
SELECT convctx.context_aspect('{"activeNodeIds": ["vat", "vrt"]}',
    '[{"id": "vrt", "prefLabel": "Vehicle Registration Tax (VRT)", "jurisdiction": "IE",
       "shortDescription": "tax levied on registration of vehicles in Ireland."},
      {"id": "vat", "prefLabel": "Value-Added Tax (VAT)", "jurisdiction": "IE",
       "shortDescription": "general indirect tax on goods and services in Ireland."}]');
-- label falls back to name, then id; no jurisdiction, no description; unknown ids by id
SELECT convctx.context_aspect('{"activeNodeIds": ["a", "b", "c", "d", "e"]}',
    '[{"id": "a", "name": "Name A", "shortDescription": ""},
      {"id": "b", "prefLabel": "", "name": null, "jurisdiction": ""},
      {"id": "c", "prefLabel": "Label C", "name": "Name C", "jurisdiction": "UK"},
      {"id": "d", "prefLabel": "Label D", "extra": [1, 2]},
      {"id": "d", "prefLabel": "second object for d is ignored"},
      {"id": "zz", "prefLabel": "not active"}]');
-- nodes NULL or empty: ids only; repeated and empty active ids are listed once / skipped
SELECT convctx.context_aspect('{"activeNodeIds": ["a", "", "b", "a"]}', NULL);
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[]');
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}');
-- no active ids: NULL
SELECT convctx.context_aspect('{"activeNodeIds": []}', '[]') IS NULL AS is_null;
SELECT convctx.context_aspect('{"other": 1}', '[{"id": "a"}]') IS NULL AS is_null;
SELECT convctx.context_aspect('{"activeNodeIds": [""]}', NULL) IS NULL AS is_null;
SELECT convctx.context_aspect(NULL, '[{"id": "a"}]') IS NULL AS is_null;
-- errors
SELECT convctx.context_aspect('[]', '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": [1]}', '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '{"id": "a"}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '"a"');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '["a"]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"prefLabel": "x"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"id": 7}]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"id": "a", "prefLabel": 3}]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"id": "a", "jurisdiction": ["IE"]}]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.context_aspect('{"activeNodeIds": ["a"]}', '[{"id": "a", "shortDescription": {}}]');
\echo :LAST_ERROR_SQLSTATE

-- ids crafted to share one value of PostgreSQL's unkeyed hash (made by
-- test/bench/hash_flood/idmap_collide.c): the id set hashes them with a per-backend key,
-- and the merge stays correct (and linear: see README, Performance)
CREATE TEMP TABLE crafted AS SELECT regexp_split_to_array(btrim($$
:UQub7:Rv.;( k+~0@QP/bF;c (*%SuORi^XFr -Xe?@d<Oa4&p kCb]0XJSWm^N 3&)x(Q0H3:+q <CQOPxqHIZj. J^Tls^md3d<C
NUY0aFpmvH+4 zZk>2A5l!c7V s78#T[)`=cC= >P.GT75_Hun: gf;UtP`6T]T= Miq[QO%l#Iye VHE@Xg~foSxq q|>:n=Goi%Oy
QdY5+D!nLb.L o>aEOCzb?NaH rZ5X76GfRQz6 !C8X~o4q+G~: jgmACGB%A0UU 4a6DI=Nq+Y!* 5rG3<+uQwanx +L#R8JVUZ5D&
I`pH+Huj`w7Y <t+xqSNSQHCV Dw<:.e*0m<T* ^3e.j?2hD`=t wgEtHSTL;_;f oh~z&2MFx@xX L1eN==PVlMV7 V0^2AH`WC7Bn
Cqf1o%LXZ^XT -U(ifZ|qw;r8 (g=^UUF__Na= .Hpd%x>q`rk: L.yA?yKLhf6C GKajb2Lbg6M! ym#_dH/OQ8<> <i)fX5G|DA~V
*~3B_~^^6@.X !+EcOW0on[!? ;+Kl!w*uU]## y~OW&p2Qt0F4 K>Gwd8g?:I03 tlT;RmTsf_8> C)|MTC48N4EF pkj^k_:?lEH1
@j9)G_:;pG)_ [HZWLf+-&+a@ IL`Z01UEWgnf PGXJXw9tTjnM Iw`2-ofZ)ck* b.u>:.w/yN_6 T~iO7*IK33|q mwU~FEr>1`?]
IHejXEn_fj(f _xSJvI.XACMq &Xoh.&!!4B&1 qLJp?U.?`@D3 GnAT>cR9z;ce T+:fqYd(k]^_ f=rYulvWlRkT `c/XRftmZYAG$$, E' \n'), '\s+') AS ids;
SELECT cardinality(ids) AS ids, (SELECT count(DISTINCT hashtext(i)) FROM unnest(ids) i) AS unkeyed_hash_values FROM crafted;
SELECT jsonb_array_length(m -> 'activeNodeIds') AS kept, m -> 'activeNodeIds' = to_jsonb(ids) AS in_order
FROM crafted, convctx.context_merge(convctx.context_merge(NULL, ids), ids || ids, 100) m;
-- the first half referenced again moves behind the second; the cap keeps the newest
SELECT m -> 'activeNodeIds' = to_jsonb(ids[33:64] || ids[1:32]) AS moved
FROM crafted, convctx.context_merge(convctx.context_merge(NULL, ids), ids[1:32]) m;
SELECT m -> 'activeNodeIds' = to_jsonb(ids[55:64]) AS capped
FROM crafted, convctx.context_merge(NULL, ids, 10) m;
