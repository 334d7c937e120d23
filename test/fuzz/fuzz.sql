-- test/fuzz/fuzz.sql: the generator and runner of the randomized hostile-input
-- test test/t/005_fuzz.pl. It lives in schema fuzz of the test's own cluster
-- and is never installed with the extension.
--
-- fuzz.setup(seed) fills the pools of values once (the big ones too: 1 MB
-- strings, 10^5-element jsonb, nesting 1000); fuzz.run_batch(seed, batch,
-- per_function) then calls every public routine of schema convctx
-- per_function times, in a random order, each call with random arguments
-- and in its own subtransaction. An error whose SQLSTATE is not documented
-- for that routine (fuzz.spec.allowed, from the README) is written to
-- fuzz.failure with the call as SQL, so it can be replayed by hand.
--
-- Randomness comes only from random(), seeded per batch with setseed(), so
-- the same seed and settings replay the same calls (turn ids, which the
-- server draws, differ; which stored turn a call names does not).

CREATE SCHEMA fuzz;

------------------------------------------------------------------------------
-- Which routine gets which arguments, and which SQLSTATEs it may raise.
--
-- kinds: one per parameter, naming its generator:
--   sid rid iid      session, request, identity ids (conversation_id is a sid,
--                    a context's user_id an iid)
--   content query schedule tenant   other text
--   turn             a uuid naming a turn (of this session, another session,
--                    another tenant, unknown, ...)
--   limit batch      integers; bool; nodes (text[] of node ids); role (regrole)
--   time             a timestamptz given as text, cast in the call
--   records          a batch of convctx.jsonl records (import_records): a
--                    session and its turns, one line damaged when hostile
--   j:ROLE           jsonb with a known shape: ctx nodes meta chunks citations
--                    questions inferred answers state history labels clar
-- allowed: the README's Errors table read for the routine's arguments
-- (22004 NULL required argument, 22023 bad value or shape, 54000 id over
-- 1024 bytes or text over convctx.max_text_bytes, P0002 turn not in this
-- session, 55000 wrong state / pg_cron, CV001 link conflict; 42501 for the
-- tenant binding functions of 0.2.0).
------------------------------------------------------------------------------

CREATE TABLE fuzz.spec (
    sig      text PRIMARY KEY,          -- regprocedure text, e.g. convctx.purge(integer)
    kinds    text[] NOT NULL,
    allowed  text[] NOT NULL
);

INSERT INTO fuzz.spec VALUES
  ('convctx.current_tenant()', '{}', '{54000}'),
  ('convctx.use_tenant(text)', '{tenant}', '{22004,54000,25P01,42501}'),
  ('convctx.list_conversations(text,text,integer)', '{iid,content,limit}', '{22004,22023,54000}'),
  ('convctx.set_session_title(text,text)', '{sid,content}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.conversation_turns(text,bigint,bigint,integer,boolean)', '{sid,limit,limit,limit,bool}',
   '{22004,22023,54000}'),
  ('convctx.replay_conversation(text,integer)', '{sid,batch}', '{22004,22023,54000}'),
  ('convctx.import_records(text[],text,boolean,text,jsonb)',
   '{records,content,bool,iid,j:idmap}', '{22004,22023,22P02,22P04,22P05,22007,22008,22003,23505,54000,55000,CV001}'),
  ('convctx.export_records(text,text,timestamp with time zone,timestamp with time zone)',
   '{sid,iid,time,time}', '{22023,54000,22007,22008}'),
  ('convctx.export_messages(text,text,timestamp with time zone,timestamp with time zone)',
   '{sid,iid,time,time}', '{22023,54000,22007,22008}'),
  ('convctx.context_merge(jsonb,text[],integer)', '{j:ctx,nodes,limit}', '{22023}'),
  ('convctx.context_load(text)', '{sid}', '{22004,22023,54000}'),
  ('convctx.context_save(text,jsonb,text)', '{sid,j:ctx,iid}', '{22004,22023,54000}'),
  ('convctx.context_add(text,text[],text)', '{sid,nodes,iid}', '{22004,22023,54000}'),
  ('convctx.context_aspect(jsonb,jsonb)', '{j:ctx,j:nodes}', '{22023}'),
  ('convctx.start_turn(text,text,text,text,text,boolean,jsonb,text,text,text)',
   '{sid,rid,content,iid,content,bool,j:meta,content,content,content}', '{22004,22023,54000,CV001}'),
  ('convctx.finalize_turn(text,uuid,text,text,boolean,jsonb,text)',
   '{sid,turn,content,content,bool,j:meta,tenant}', '{22004,22023,54000,P0002,55000,42501}'),
  ('convctx.begin_turn(text,text,text,integer,text,text,jsonb,text,boolean,text,text,text)',
   '{sid,rid,content,limit,iid,tenant,j:meta,content,bool,content,content,content}',
   '{22004,22023,54000,CV001,42501}'),
  ('convctx.recent_turns(text,integer)', '{sid,limit}', '{22004,22023,54000}'),
  ('convctx.recent_turns_json(text,integer)', '{sid,limit}', '{22004,22023,54000}'),
  ('convctx.link_session(text,text,boolean)', '{iid,sid,bool}', '{22004,22023,54000,CV001}'),
  ('convctx.replace_turn(text,uuid,text,text,jsonb)',
   '{sid,turn,content,content,j:meta}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.redact_turn(text,uuid)', '{sid,turn}', '{22004,22023,54000,P0002}'),
  ('convctx.redact_session(text)', '{sid}', '{22004,22023,54000}'),
  ('convctx.erase_identity(text)', '{iid}', '{22004,22023,54000}'),
  ('convctx.retention_settings()', '{}', '{}'),
  ('convctx.purge(integer)', '{batch}', '{22004,22023,54000}'),
  ('convctx.purge_all(integer)', '{batch}', '{22004,22023,54000}'),
  ('convctx.schedule_retention(text)', '{schedule}', '{22004,22023,55000}'),
  ('convctx.unschedule_retention()', '{}', '{55000}'),
  ('convctx.distribute()', '{}', '{55000}'),
  ('convctx.conversation_state(text,integer)', '{sid,limit}', '{22004,22023,54000}'),
  ('convctx.set_summary(text,text,uuid,bigint)', '{sid,content,turn,limit}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.turns_to_summarize(text,integer,integer)', '{sid,limit,limit}', '{22004,22023,54000}'),
  ('convctx.render_conversation_state(jsonb)', '{j:state}', '{22023}'),
  ('convctx.record_retrieval(text,uuid,jsonb,jsonb)',
   '{sid,turn,j:chunks,j:citations}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.context_history(text,integer,jsonb)', '{sid,limit,j:chunks}', '{22004,22023,54000}'),
  ('convctx.render_context_history(jsonb,jsonb)', '{j:history,j:labels}', '{22023}'),
  ('convctx.is_followup(text,text)', '{query,sid}', '{22004,22023,54000}'),
  ('convctx.record_clarification(text,uuid,jsonb,jsonb)',
   '{sid,turn,j:questions,j:inferred}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.clarification_context(text,uuid,jsonb)',
   '{sid,turn,j:answers}', '{22004,22023,54000,P0002,55000}'),
  ('convctx.render_clarification(jsonb,text)', '{j:clar,content}', '{22023}'),
  ('convctx.bind_role_tenant(regrole,text)', '{role,tenant}', '{22004,22023,54000,42501,42704}'),
  ('convctx.unbind_role_tenant(regrole)', '{role}', '{22004,42501}'),
  -- 0.3.0: bindings by role name (42622 a name longer than a role name can be)
  ('convctx.bind_role_tenant(text,text)', '{rolename,tenant}', '{22004,22023,42622,54000,42501,42704}'),
  ('convctx.bind_role_all_tenants(text)', '{rolename}', '{22004,22023,42622,42501,42704}'),
  ('convctx.unbind_role_tenant(text)', '{rolename}', '{22004,22023,42622,42501}'),
  ('convctx.bindings()', '{}', '{}'),
  ('convctx.unresolved_bindings()', '{}', '{}'),
  ('convctx.admin_sessions(text)', '{sid}', '{22023,54000}'),
  ('convctx.admin_stats()', '{}', '{}'),
  ('convctx.admin_audit()', '{}', '{}'),
  ('convctx.admin_session_turns(text)', '{sid}', '{22004,22023,54000}');

-- (routine, SQLSTATE) pairs seen raised although the README does not
-- document them, reported by the test as TODO instead of failing it. Each
-- row must say where it was reported; empty when everything is documented.
CREATE TABLE fuzz.known_gap (
    fname    text NOT NULL,
    sqlstate text NOT NULL,
    note     text NOT NULL,
    PRIMARY KEY (fname, sqlstate)
);

------------------------------------------------------------------------------
-- Value pools. expr is an SQL expression that yields the value by itself
-- (no fuzz schema needed), so a failing call can be written down as SQL.
-- big values are picked rarely and read from the table when picked.
------------------------------------------------------------------------------

CREATE TABLE fuzz.val (
    id    serial PRIMARY KEY,
    kind  text    NOT NULL CHECK (kind IN ('text', 'jsonb', 'textarr')),
    role  text    NOT NULL,
    big   boolean NOT NULL DEFAULT false,
    expr  text    NOT NULL,
    t     text,
    j     jsonb,
    a     text[],
    paths text[]                        -- of j, for fuzz.mutate (small values only)
);
CREATE INDEX ON fuzz.val (kind, role, big);

-- Facts the test passes in (the OID of a role that was bound and dropped).
CREATE TABLE fuzz.param (
    k  text PRIMARY KEY,
    v  text NOT NULL
);

-- What went wrong, and what was seen.
CREATE TABLE fuzz.failure (
    id        serial PRIMARY KEY,
    batch     integer NOT NULL,
    call_no   integer NOT NULL,
    fname     text NOT NULL,
    sqlstate  text NOT NULL,
    message   text,
    detail    text,
    context   text,
    repro     text NOT NULL
);
CREATE TABLE fuzz.tally (
    fname     text NOT NULL,
    sqlstate  text NOT NULL,            -- '00000' for success
    n         bigint NOT NULL,
    PRIMARY KEY (fname, sqlstate)
);
CREATE TABLE fuzz.timing (
    fname     text PRIMARY KEY,
    calls     bigint NOT NULL,
    call_ms   numeric NOT NULL,         -- inside the routine (and its subtransaction)
    gen_ms    numeric NOT NULL          -- making its arguments
);
CREATE TABLE fuzz.slow (
    batch     integer NOT NULL,
    call_no   integer NOT NULL,
    fname     text NOT NULL,
    ms        numeric NOT NULL,
    sqlstate  text NOT NULL,
    repro     text NOT NULL
);
CREATE TABLE fuzz.gen_error (
    batch     integer NOT NULL,
    fname     text NOT NULL,
    sqlstate  text NOT NULL,
    message   text
);
CREATE TABLE fuzz.batch_log (
    batch     integer PRIMARY KEY,
    calls     integer NOT NULL,
    errors    integer NOT NULL,
    unexpected integer NOT NULL,
    ms        numeric NOT NULL
);

------------------------------------------------------------------------------
-- Helpers
------------------------------------------------------------------------------

-- A setseed() argument in [-1, 1] from the run's seed and the batch number.
CREATE FUNCTION fuzz.seedval(seed bigint, batch integer) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT ((hashint8(seed * 1000003 + batch)::bigint + 2147483648) % 2000000001)::double precision
           / 1000000000.0 - 1.0
$$;

-- A short, replayable SQL form of a value that did not come from a pool.
CREATE FUNCTION fuzz.lit(v text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN v IS NULL THEN 'NULL'
                WHEN octet_length(v) <= 20000 THEN quote_literal(v)
                ELSE format('/* %s bytes, md5 %s */ %L', octet_length(v), md5(v), left(v, 80) || '...')
           END
$$;

-- Paths of every value inside a jsonb value (not the root), as text[].
CREATE FUNCTION fuzz.paths(j jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    WITH RECURSIVE p(path, v) AS (
        SELECT ARRAY[]::text[], j
        UNION ALL
        SELECT p.path || c.k, c.v
          FROM p, LATERAL (
                SELECT e.key AS k, e.value AS v
                  FROM jsonb_each(CASE WHEN jsonb_typeof(p.v) = 'object' THEN p.v END) e
                UNION ALL
                SELECT (a.ord - 1)::text, a.value
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p.v) = 'array' THEN p.v END)
                       WITH ORDINALITY a(value, ord)) c
         WHERE cardinality(p.path) < 6)
    SELECT coalesce(array_agg(array_to_string(path, chr(31)) ORDER BY path), '{}')
      FROM p WHERE cardinality(path) > 0
$$;

-- A well-shaped value made wrong in one place: a value of another JSON type
-- at one key or element (usually), that key removed, or an unknown key or
-- element added. wrong holds the replacement values.
CREATE FUNCTION fuzz.mutate(j jsonb, ps text[], wrong jsonb[]) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    p text[];
    w jsonb := wrong[1 + floor(random() * cardinality(wrong))::int];
    r double precision := random();
    parent jsonb;
BEGIN
    IF cardinality(ps) = 0 OR random() < 0.05 THEN
        RETURN w;                       -- the whole value of the wrong type
    END IF;
    p := string_to_array(ps[1 + floor(random() * cardinality(ps))::int], chr(31));
    IF r < 0.75 THEN
        RETURN jsonb_set(j, p, w);
    ELSIF r < 0.87 THEN
        RETURN j #- p;
    END IF;
    parent := CASE WHEN cardinality(p) = 1 THEN j ELSE j #> p[1:cardinality(p) - 1] END;
    IF jsonb_typeof(parent) = 'object' THEN
        RETURN jsonb_set(j, p[1:cardinality(p) - 1] || 'zz_unknown'::text, w, true);
    END IF;
    RETURN jsonb_insert(j, p, w, random() < 0.5);
END $$;

-- Index of a random small pool value of a role (map: role -> [indexes]).
CREATE FUNCTION fuzz.pick(map jsonb, role text) RETURNS integer
LANGUAGE sql AS $$
    SELECT (map -> role ->> floor(random() * jsonb_array_length(map -> role))::int)::int
$$;

------------------------------------------------------------------------------
-- Pools
------------------------------------------------------------------------------

CREATE FUNCTION fuzz.add(kind text, role text, expr text, big boolean DEFAULT false)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO fuzz.val (kind, role, big, expr) VALUES (kind, role, big, expr)
$$;

CREATE FUNCTION fuzz.setup(seed bigint) RETURNS text
LANGUAGE plpgsql AS $setup$
DECLARE
    r record;
    deep_arr text := $$(repeat('[', 1000) || repeat(']', 1000))::jsonb$$;
    deep_obj text := $$(repeat('{"a": ', 1000) || '1' || repeat('}', 1000))::jsonb$$;
    deep_mix text := $$(repeat('[{"k": ', 500) || 'null' || repeat('}]', 500))::jsonb$$;
    planes text := $$(SELECT string_agg(chr(c), '') FROM unnest(ARRAY[65, 233, 8364, 65533, 65279, 65534, 65535, 64976, 66376, 128512, 131072, 196608, 262144, 327680, 393216, 458752, 524288, 589824, 655360, 720896, 786432, 851968, 917505, 917760, 983040, 1048573, 1048576, 1114109, 1114111]) c)$$;
    ctl text := $$(SELECT string_agg(chr(c), '') FROM generate_series(1, 31) c) || chr(127) || chr(133) || chr(8232) || chr(8233)$$;
    incompressible text := $$(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32) i)$$;
    s text;
BEGIN
    PERFORM setseed(fuzz.seedval(seed, 0));

    -- Hostile text, for every text position -------------------------------
    FOREACH s IN ARRAY ARRAY[
        $$''$$, $$' '$$, $$E'\t\n\r'$$, $$'x'$$, $$'0'$$, $$'NULL'$$, $$'null'$$,
        $$repeat('a', 1024)$$, $$repeat('a', 1025)$$,
        $$repeat('€', 341) || 'a'$$, $$repeat('€', 342)$$,                 -- 1024 / 1026 bytes, 342 chars
        $$repeat(chr(128512), 256)$$, $$repeat(chr(128512), 257)$$,        -- 4-byte characters
        incompressible, incompressible || $$ || 'z'$$,
        planes, 'repeat(' || planes || ', 10)',
        $$chr(57344) || chr(63743) || chr(983040) || chr(1048576)$$,        -- private use
        $$'e' || repeat(chr(769), 200)$$,                                   -- combining marks
        $$chr(8238) || 'abc' || chr(8237) || 'مرحبا بالعالم' || 'שלום'$$,   -- RTL
        $$chr(8203) || chr(8204) || chr(8205) || chr(65279) || chr(8288)$$, -- zero-width
        $$chr(128104) || chr(8205) || chr(128105) || chr(8205) || chr(128103)$$,
        $$'\ud800'$$, $$'\udfff\ud800'$$, $$'\u0000'$$, $$'\\u0000'$$, $$'\x00'$$, $$E'\\x00\\xff'$$,
        $$'\0'$$, $$'\'$$, $$'\\\\'$$, $$'"'$$, $$''''$$, $$'`'$$, $$'"''`\'$$,
        $$'%s%n%x%p%d%%'$$, $$'%.99999999s'$$, $$'{0}{1}$1$2'$$,
        $$'''); DROP TABLE convctx.turn; --'$$, $$'"}]}'$$, $$'{"activeNodeIds": ["a"]}'$$, $$'['$$,
        ctl, $$repeat(' ', 100)$$, $$chr(160) || chr(12288)$$,
        $$'e' || chr(769) || 'stás seguro'$$, $$'İı ß ẞ ǅ ﬁ ΣΑΣ'$$, $$'ARE YOU SURE'$$,
        $$'¿ESTÁS SEGURO?'$$, $$'tell me more'$$, $$'law'$$, $$'s0'$$, $$'r0'$$, $$'u0'$$,
        $$'* * * * *'$$, $$'-1 * * * *'$$, $$'99999999999 * * * *'$$, $$'* * * * * *'$$,
        $$'0 0 31 2 *'$$, $$'@reboot'$$, $$'1 seconds'$$, $$'60 seconds'$$, $$'59 59 23 31 12 7'$$]
    LOOP
        PERFORM fuzz.add('text', 'hostile', s);
    END LOOP;
    -- 1 MB: exactly convctx.max_text_bytes, one byte over, of 4-byte characters,
    -- hardly compressible, and one million words
    PERFORM fuzz.add('text', 'hostile', $$repeat('x', 1048576)$$, true);
    PERFORM fuzz.add('text', 'hostile', $$repeat('x', 1048577)$$, true);
    PERFORM fuzz.add('text', 'hostile', $$repeat(chr(66376), 262144)$$, true);
    PERFORM fuzz.add('text', 'hostile', $$(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i)$$, true);
    PERFORM fuzz.add('text', 'hostile', $$repeat('law ok ', 174762)$$, true);
    PERFORM fuzz.add('text', 'hostile', $$repeat('¿estás seguro? ', 65536)$$, true);

    -- Ids that are valid, some of them odd: the data accumulates under these.
    -- anon-* are never linked on purpose (see run_batch): the anonymous cap
    -- and the expiry of anonymous sessions need such sessions to grow
    FOREACH s IN ARRAY ARRAY[$$'s0'$$, $$'s1'$$, $$'s2'$$, $$'s3'$$, $$'s4'$$, $$'s5'$$,
                             $$'sé☃-' || chr(1114111)$$, $$repeat('S', 1024)$$, $$'s p a c e'$$,
                             $$'anon-0'$$, $$'anon-1'$$, $$'anon-2'$$]
    LOOP
        PERFORM fuzz.add('text', 'sid', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'r0'$$, $$'r1'$$, $$'r2'$$, $$'r3'$$, $$'r4'$$, $$'r5'$$, $$'r6'$$,
                             $$'r7'$$, $$'ŕ-' || chr(128512)$$, $$repeat('R', 1024)$$]
    LOOP
        PERFORM fuzz.add('text', 'rid', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'u0'$$, $$'u1'$$, $$'u2'$$, $$'ü-' || chr(917505)$$, $$repeat('U', 1024)$$]
    LOOP
        PERFORM fuzz.add('text', 'iid', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'What is VAT?'$$, $$'How is VRT calculated?'$$,
        $$'¿Qué protege la Constitución sobre la vida?'$$, $$'tell me more'$$, $$'¿Estás seguro?'$$,
        $$'Explain article 15 of the law'$$, $$'ok'$$, $$'Answer one'$$, $$'Answer two'$$,
        $$'El artículo 15 reconoce el derecho a la vida [1].'$$, $$'A ' || repeat('b ', 300)$$]
    LOOP
        PERFORM fuzz.add('text', 'content', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'¿Estás seguro?'$$, $$'are you sure'$$, $$'ARE YOU SURE about that claim now'$$,
        $$'tell me more about it please right now'$$, $$'What does article 15 of the code say?'$$,
        $$'ok'$$, $$'Explícame más sobre esto por favor ahora mismo'$$, $$'can you clarify'$$,
        $$'Law'$$, $$'Is VAT charged on second-hand cars imported from Japan?'$$, $$'¿qué quieres decir?'$$]
    LOOP
        PERFORM fuzz.add('text', 'query', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'*/10 * * * *'$$, $$'0 3 * * *'$$, $$'*/5 * * * *'$$, $$'15 4 1 * *'$$]
    LOOP
        PERFORM fuzz.add('text', 'schedule', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'tA'$$, $$'tB'$$, $$'tC'$$, $$'tenant ☃'$$]
    LOOP
        PERFORM fuzz.add('text', 'tenant', s);
    END LOOP;
    -- role names for the binding functions of 0.3.0: existing roles (never the
    -- calling one), a dropped and a renamed bound role's old names, a
    -- built-in role, and names that no role has
    FOREACH s IN ARRAY ARRAY[$$'fuzz_app'$$, $$'fuzz_other'$$, $$'convctx_app'$$, $$'fuzz "odd" role'$$,
                             $$'fuzz_gone'$$, $$'fuzz_renamed'$$, $$'pg_monitor'$$, $$'FUZZ_APP'$$,
                             $$repeat('r', 63)$$]
    LOOP
        PERFORM fuzz.add('text', 'rolename', s);
    END LOOP;
    -- convctx.tenant of the calling session: mostly '', tA and tB (the same
    -- session and request ids in each), now and then an odd one
    FOREACH s IN ARRAY ARRAY[$$''$$, $$''$$, $$'tA'$$, $$'tA'$$, $$'tA'$$, $$'tB'$$, $$'tB'$$, $$'tB'$$]
    LOOP
        PERFORM fuzz.add('text', 'settenant', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'tenant ☃ ' || chr(1114111)$$, $$repeat('T', 1024)$$, incompressible,
                             $$'x' || (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 90) i)$$]
    LOOP
        PERFORM fuzz.add('text', 'oddtenant', s);
    END LOOP;
    FOREACH s IN ARRAY ARRAY[$$'n1'$$, $$'n2'$$, $$'n3'$$, $$'n4'$$, $$'n5'$$, $$'n6'$$, $$'ie:vat'$$, $$'ie:vrt'$$]
    LOOP
        PERFORM fuzz.add('text', 'node', s);
    END LOOP;

    -- Hostile jsonb: every JSON type, odd scalars, deep and huge ------------
    FOREACH s IN ARRAY ARRAY[
        $$'null'::jsonb$$, $$'true'::jsonb$$, $$'false'::jsonb$$, $$'0'::jsonb$$, $$'-0'::jsonb$$,
        $$'-1'::jsonb$$, $$'3.14'::jsonb$$, $$'1e1000'::jsonb$$, $$'-1e-1000'::jsonb$$,
        $$'""'::jsonb$$, $$'"str"'::jsonb$$, $$'"\\ud800"'::jsonb$$, $$'"\\u0000"'::jsonb$$,
        $$'[]'::jsonb$$, $$'{}'::jsonb$$, $$'[null]'::jsonb$$, $$'{"": null}'::jsonb$$,
        $$'{"a": 1}'::jsonb$$, $$'[1, "a", null, true, {}, []]'::jsonb$$, $$'[[[]]]'::jsonb$$,
        $$'[{}]'::jsonb$$, $$'[{"id": null}]'::jsonb$$, $$'[{"id": ""}]'::jsonb$$,
        'to_jsonb(' || planes || ')', $$jsonb_build_object(chr(1114111), chr(65279), '', '')$$,
        deep_arr, deep_obj, deep_mix, $$jsonb_build_array(to_jsonb(repeat('a', 1025)))$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'hostile', s);
    END LOOP;
    PERFORM fuzz.add('jsonb', 'hostile', $$(SELECT jsonb_agg(i) FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('jsonb', 'hostile', $$(SELECT jsonb_agg('n' || i) FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('jsonb', 'hostile', $$(SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('jsonb', 'hostile', $$to_jsonb(repeat('x', 1048576))$$, true);

    -- Replacement values for fuzz.mutate: one of each JSON type and some odd ones
    FOREACH s IN ARRAY ARRAY[
        $$'null'::jsonb$$, $$'true'::jsonb$$, $$'false'::jsonb$$, $$'0'::jsonb$$, $$'-1'::jsonb$$,
        $$'2147483648'::jsonb$$, $$'1.5'::jsonb$$, $$'1e308'::jsonb$$, $$'""'::jsonb$$,
        $$'"str"'::jsonb$$, $$'"\\ud800"'::jsonb$$, $$'[]'::jsonb$$, $$'{}'::jsonb$$,
        $$'[1]'::jsonb$$, $$'["a"]'::jsonb$$, $$'{"a": 1}'::jsonb$$, $$'[[]]'::jsonb$$,
        deep_arr, deep_obj, 'to_jsonb(' || planes || ')']
    LOOP
        PERFORM fuzz.add('jsonb', 'wrong', s);
    END LOOP;

    -- Well-shaped jsonb of each argument role ---------------------------------
    FOREACH s IN ARRAY ARRAY[$${}$$, $${"u0": "u1"}$$, $${"u1": "u0", "u2": "someone else"}$$,
                             $${"u0": 1}$$, $${"": "x"}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'idmap', quote_literal(s) || '::jsonb');
    END LOOP;
    FOREACH s IN ARRAY ARRAY[
        $${"activeNodeIds": []}$$, $${"activeNodeIds": ["n1", "n2", "n3"]}$$,
        $${"activeNodeIds": ["n2"], "flags": {"crossBorder": true}, "other": [1, 2]}$$,
        $${}$$, $${"activeNodeIds": ["ie:vat", "ie:vrt", "n4", "n5", "n6"], "k": "v"}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'ctx', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'ctx', $$jsonb_build_object('activeNodeIds', '["n1"]'::jsonb, 'deep', $$ || deep_arr || ')');
    PERFORM fuzz.add('jsonb', 'ctx', $$(SELECT jsonb_build_object('activeNodeIds', jsonb_agg('n' || i)) FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('jsonb', 'ctx', $$(SELECT jsonb_build_object('activeNodeIds', jsonb_agg('n' || (i % 7))) FROM generate_series(1, 100000) i)$$, true);

    FOREACH s IN ARRAY ARRAY[
        $$[{"id": "n1", "prefLabel": "Node one", "name": "N1", "jurisdiction": "IE", "shortDescription": "the first node."}, {"id": "n2", "name": "only a name"}, {"id": "n3", "prefLabel": "", "name": "", "jurisdiction": null, "shortDescription": null}]$$,
        $$[{"id": "ie:vat", "prefLabel": "Value-Added Tax (VAT)", "jurisdiction": "IE", "shortDescription": "general indirect tax."}]$$,
        $$[]$$, $$[{"id": "n9"}, {"id": "n1", "extra": [1, {"x": null}]}]$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'nodes', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'nodes', $$(SELECT '[' || string_agg('{"id": "n' || i || '", "prefLabel": "L", "shortDescription": "d"}', ', ') || ']' FROM generate_series(1, 100000) i)::jsonb$$, true);

    FOREACH s IN ARRAY ARRAY[
        $${"channel": "web", "ip": "203.0.113.9", "device_type": "mobile", "locale": "en", "client_version": "1.2", "user_agent_hash": "abc", "other": "dropped"}$$,
        $${}$$, $${"ip": "::1"}$$, $${"ip_hash": "given", "channel": "api"}$$, $${"locale": "es-ES", "channel": null}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'meta', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'meta', $$jsonb_build_object('channel', $$ || deep_obj || ')');
    PERFORM fuzz.add('jsonb', 'meta', $$(SELECT jsonb_object_agg('k' || i, i) || '{"channel": "web"}' FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('jsonb', 'meta', $$jsonb_build_object('channel', repeat('c', 1048576))$$, true);
    PERFORM fuzz.add('jsonb', 'meta', $$jsonb_build_object('ip', repeat('1', 1048576))$$, true);

    FOREACH s IN ARRAY ARRAY[
        $$[{"id": "c1", "text": "Todos tienen derecho a la vida.", "title": "Artículo 15", "source": "Constitución Española"}, {"id": "c2", "text": "El que matare a otro...", "title": "Artículo 138", "source": "Código Penal", "path": "/cp/138", "number": 138}]$$,
        $$[{"id": "c3", "text": "Se garantiza la libertad ideológica."}]$$,
        $$[{"id": "c1", "text": "again"}, {"id": "c4", "text": "", "title": null}, {"id": "c5", "text": "t5", "source": "S"}]$$,
        $$[]$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'chunks', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'chunks', $$jsonb_build_array(jsonb_build_object('id', 'c6', 'text', 't', 'extra', $$ || deep_mix || '))');
    PERFORM fuzz.add('jsonb', 'chunks', $$(SELECT '[' || string_agg('{"id": "c' || i || '", "text": "t"}', ', ') || ']' FROM generate_series(1, 100000) i)::jsonb$$, true);
    PERFORM fuzz.add('jsonb', 'chunks', $$jsonb_build_array(jsonb_build_object('id', 'cbig', 'text', repeat('t', 1048576)))$$, true);

    FOREACH s IN ARRAY ARRAY[$$[{"id": "c1"}]$$, $$[{"id": "c2"}, {"id": "c3"}]$$,
        $$[{"id": "c7", "text": "a full citation", "title": "T"}]$$, $$[]$$, $$[{"id": "nowhere"}]$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'citations', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'citations', $$('[' || repeat('{"id": "c1"}, {"id": "c2"}, ', 50000) || '{"id": "c3"}]')::jsonb$$, true);

    FOREACH s IN ARRAY ARRAY[
        $$[{"question": "Where do you live?", "id": "q1", "type": "location"}, {"question": "Which tax?", "id": "q2"}]$$,
        $$[{"question": "only a question"}]$$, $$[]$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'questions', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'questions', $$('[' || repeat('{"question": "q", "id": "q1"}, ', 99999) || '{"question": "last"}]')::jsonb$$, true);

    FOREACH s IN ARRAY ARRAY[$${"detected_location": "IE", "detected_scope": "VAT", "reasoning": "because"}$$,
                             $${}$$, $${"detected_location": "", "reasoning": null, "other": [1]}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'inferred', quote_literal(s) || '::jsonb');
    END LOOP;

    FOREACH s IN ARRAY ARRAY[$${"q1": "Dublin", "q2": ""}$$, $${}$$, $${"q9": "nobody asked"}$$, $${"q1": "  "}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'answers', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'answers', $$(SELECT jsonb_object_agg('q' || i, 'a' || i) FROM generate_series(1, 100000) i)$$, true);

    FOREACH s IN ARRAY ARRAY[
        $${"conversation_id": "s1", "message_count": 3, "is_first_message": false, "recent_messages": [{"role": "user", "text": "hi", "timestamp": "2024-01-01T00:00:00+00:00"}, {"role": "assistant", "text": "hello"}, {"role": "user", "text": "more"}], "referenced_entities": ["n1", "n2"], "summary": "a summary", "needs_summary": false}$$,
        $${"conversation_id": "s2", "message_count": 0, "is_first_message": true, "recent_messages": [], "referenced_entities": [], "summary": null, "needs_summary": false}$$,
        $${}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'state', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'state', $$('{"recent_messages": [' || repeat('{"role": "user", "text": "' || repeat('w', 20) || '"}, ', 99999) || '{"role": "assistant", "text": "a"}], "referenced_entities": [' || repeat('"e", ', 99999) || '"e"]}')::jsonb$$, true);

    FOREACH s IN ARRAY ARRAY[
        $$[{"index": 1, "section": "immediate", "turns_ago": 1, "chunk": {"id": "c1", "text": "t1", "title": "T1", "source": "S1"}}, {"index": 2, "section": "history", "turns_ago": 2, "chunk": {"id": "c2", "text": "t2"}}, {"index": 3, "section": "current", "chunk": {"id": "c3", "text": "t3", "title": "T3"}}]$$,
        $$[]$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'history', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'history', $$(SELECT '[' || string_agg('{"index": ' || i || ', "section": "' || (ARRAY['immediate', 'history', 'current'])[i % 3 + 1] || '", "turns_ago": 1, "chunk": {"id": "c' || i || '", "text": "t"}}', ', ') || ']' FROM generate_series(1, 100000) i)::jsonb$$, true);

    FOREACH s IN ARRAY ARRAY[$${"immediate": "=== CONTEXTO INMEDIATO ===", "history": "=== HISTÓRICO (hace {n} turnos) ===", "current": "=== ACTUAL ==="}$$,
                             $${}$$, $${"history": "{n}{n}{n} %s %n {0}"}$$, $${"bogus": "x"}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'labels', quote_literal(s) || '::jsonb');
    END LOOP;

    FOREACH s IN ARRAY ARRAY[
        $${"originalDescription": "My car was imported", "questionsAsked": [{"question": "Where?", "id": "q1", "type": "location"}, {"question": "When?", "id": "q2"}], "inferredContext": {"detected_location": "IE", "detected_scope": "VRT", "reasoning": "import"}, "answers": {"q1": "Dublin", "q2": ""}}$$,
        $${"originalDescription": "x", "questionsAsked": [], "inferredContext": {}, "answers": {}}$$,
        $${}$$]
    LOOP
        PERFORM fuzz.add('jsonb', 'clar', quote_literal(s) || '::jsonb');
    END LOOP;
    PERFORM fuzz.add('jsonb', 'clar', $$(SELECT '{"originalDescription": "d", "questionsAsked": [' || string_agg('{"question": "q", "id": "q' || i || '"}', ', ') || '], "answers": {' || string_agg('"q' || i || '": "a"', ', ') || '}}' FROM generate_series(1, 100000) i)::jsonb$$, true);

    -- Hostile text[] for node id lists (stored as array literals) -------------
    FOREACH s IN ARRAY ARRAY[
        $$'{}'::text[]$$, $$'{NULL}'::text[]$$, $$'{""}'::text[]$$, $$'{"", NULL, n1}'::text[]$$,
        $$'{{n1,n2},{n3,n4}}'::text[]$$, $$'{{{n1}}}'::text[]$$, $$'[0:2]={n1,n2,n3}'::text[]$$,
        $$'[-5:-4]={n1,n1}'::text[]$$, $$ARRAY[repeat('a', 1025), repeat('€', 400)]$$,
        'ARRAY[' || planes || $$, '\ud800', '%s%n', '''', E'\\']$$]
    LOOP
        PERFORM fuzz.add('textarr', 'hostile', s);
    END LOOP;
    PERFORM fuzz.add('textarr', 'hostile', $$(SELECT array_agg('n' || i) FROM generate_series(1, 100000) i)$$, true);
    PERFORM fuzz.add('textarr', 'hostile', $$array_fill('n1'::text, ARRAY[100000])$$, true);
    PERFORM fuzz.add('textarr', 'hostile', $$ARRAY[repeat('x', 1048576)]$$, true);

    -- Evaluate every expression once.
    FOR r IN SELECT id, kind, expr FROM fuzz.val ORDER BY id LOOP
        IF r.kind = 'text' THEN
            EXECUTE 'UPDATE fuzz.val SET t = ' || r.expr || ' WHERE id = $1' USING r.id;
        ELSIF r.kind = 'jsonb' THEN
            EXECUTE 'UPDATE fuzz.val SET j = ' || r.expr || ' WHERE id = $1' USING r.id;
        ELSE
            EXECUTE 'UPDATE fuzz.val SET a = ' || r.expr || ' WHERE id = $1' USING r.id;
        END IF;
    END LOOP;
    -- Well-shaped values made wrong are generated per call (fuzz.mutate).
    UPDATE fuzz.val SET paths = fuzz.paths(j) WHERE kind = 'jsonb' AND NOT big;

    RETURN (SELECT format('%s pool values, %s of them big', count(*), count(*) FILTER (WHERE big))
              FROM fuzz.val);
END
$setup$;

------------------------------------------------------------------------------
-- The routines that exist, each with its generator; a routine without one,
-- or whose signature changed, is listed by fuzz.missing() and fails the test.
------------------------------------------------------------------------------

CREATE FUNCTION fuzz.missing() RETURNS SETOF text LANGUAGE sql AS $$
    SELECT p.oid::regprocedure::text
      FROM pg_proc p
     WHERE p.pronamespace = 'convctx'::regnamespace
       AND p.prokind IN ('f', 'p')
       AND p.prorettype <> 'trigger'::regtype
       AND NOT EXISTS (SELECT FROM fuzz.spec s
                        WHERE s.sig = p.oid::regprocedure::text
                          AND cardinality(s.kinds) = p.pronargs)
     ORDER BY 1
$$;

-- Per installed routine: its name, kinds, how each argument maps to the
-- EXECUTE parameter slots, and the SQL of a call with k = nreq..n arguments.
-- Slots: $1-$10 text, $11-$14 jsonb, $15-$17 integer, $18-$19 uuid,
-- $20-$21 boolean, $22 text[], $23 regrole; a timestamptz takes a text
-- slot, cast in the call.
CREATE FUNCTION fuzz.routines() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    r record;
    res jsonb := '[]';
    slots int[];
    types text[];
    casts text[];
    next jsonb;
    ty text;
    k int;
    sqls text[];
    call text;
    argl text;
BEGIN
    FOR r IN
        SELECT s.sig, s.kinds, s.allowed, p.proname, p.prokind, p.pronargs,
               p.proretset OR p.prorettype = 'record'::regtype AS settish,
               p.pronargs - p.pronargdefaults AS nreq,
               ARRAY(SELECT t::regtype::text FROM unnest(p.proargtypes) WITH ORDINALITY u(t, o)
                      ORDER BY o) AS argtypes
          FROM fuzz.spec s
          JOIN pg_proc p ON p.oid = to_regprocedure(s.sig)
         WHERE cardinality(s.kinds) = p.pronargs
         ORDER BY s.sig
    LOOP
        next := '{"text": 1, "jsonb": 11, "integer": 15, "uuid": 18, "boolean": 20, "text[]": 22, "regrole": 23}';
        slots := '{}';
        types := '{}';
        casts := '{}';
        FOR k IN 1..r.pronargs LOOP
            ty := r.argtypes[k];
            casts := casts || CASE WHEN ty = 'timestamp with time zone' THEN '::pg_catalog.timestamptz' ELSE '' END;
            IF ty = 'timestamp with time zone' THEN
                ty := 'text';
            END IF;
            -- a bigint (set_summary's redaction generation) takes an integer slot
            IF ty = 'bigint' THEN
                ty := 'integer';
            END IF;
            IF NOT next ? ty THEN
                RAISE EXCEPTION 'fuzz: no parameter slot for type % of %', ty, r.sig;
            END IF;
            slots := slots || (next ->> ty)::int;
            types := types || ty;
            next := jsonb_set(next, ARRAY[ty], to_jsonb((next ->> ty)::int + 1));
        END LOOP;
        IF (next ->> 'text')::int > 11 OR (next ->> 'jsonb')::int > 15 OR (next ->> 'integer')::int > 18
           OR (next ->> 'uuid')::int > 20 OR (next ->> 'boolean')::int > 22
           OR (next ->> 'text[]')::int > 23 OR (next ->> 'regrole')::int > 24 THEN
            RAISE EXCEPTION 'fuzz: too many parameters of one type in %', r.sig;
        END IF;
        sqls := '{}';
        FOR k IN r.nreq..r.pronargs LOOP
            SELECT coalesce(string_agg('$' || slots[i] || casts[i], ', ' ORDER BY i), '') INTO argl
              FROM generate_series(1, k) i;
            IF r.prokind = 'p' THEN
                call := format('CALL convctx.%I(%s)', r.proname, argl);
            ELSIF NOT r.settish THEN
                call := format('SELECT 1, convctx.%I(%s)::text', r.proname, argl);
            ELSE
                call := format('SELECT count(*)::int, (array_agg(x::text))[1] FROM convctx.%I(%s) AS x',
                               r.proname, argl);
            END IF;
            sqls := sqls || call;
        END LOOP;
        res := res || jsonb_build_object('sig', r.sig, 'name', r.proname, 'proc', r.prokind = 'p',
                                         'kinds', to_jsonb(r.kinds), 'slots', to_jsonb(slots),
                                         'types', to_jsonb(types), 'nreq', r.nreq, 'n', r.pronargs,
                                         'sql', to_jsonb(sqls), 'allowed', to_jsonb(r.allowed));
    END LOOP;
    RETURN res;
END $$;

------------------------------------------------------------------------------
-- A turn id for a call on session sid of tenant ten: the newest current
-- version or any version of this session, a turn of another session or of
-- the same session id in another tenant, an unknown or odd uuid, or NULL.
------------------------------------------------------------------------------

CREATE FUNCTION fuzz.pick_turn(ten text, sid text, sids text[], valid boolean, fname text,
                               OUT u uuid, OUT e text)
LANGUAGE plpgsql AS $$
DECLARE
    r double precision := random();
    other text;
    oten text;
BEGIN
    IF valid THEN
        r := 0.1 + random() * 0.55;    -- one of this session's turns
    END IF;
    IF r < 0.07 THEN
        u := NULL;
        e := 'NULL';
        RETURN;
    ELSIF r < 0.3 AND fname = 'finalize_turn' THEN
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = ten AND session_id = sid AND replaced_by_turn_id IS NULL
           AND deleted_at IS NULL AND finalized_at IS NULL
         ORDER BY turn_no DESC LIMIT 1;
        e := 'newest open turn of the session';
    ELSIF r < 0.3 AND fname <> 'redact_turn' THEN
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = ten AND session_id = sid AND replaced_by_turn_id IS NULL
           AND deleted_at IS NULL AND finalized_at IS NOT NULL
         ORDER BY turn_no DESC LIMIT 1;
        e := 'newest finalized turn of the session';
    ELSIF r < 0.45 THEN
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = ten AND session_id = sid AND replaced_by_turn_id IS NULL
         ORDER BY turn_no DESC LIMIT 1;
        e := 'newest turn of the session';
    ELSIF r < 0.65 THEN
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = ten AND session_id = sid ORDER BY random() LIMIT 1;
        e := 'a turn (any version) of the session';
    ELSIF r < 0.75 THEN
        other := sids[1 + floor(random() * cardinality(sids))::int];
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = ten AND session_id = other AND session_id IS DISTINCT FROM sid
         ORDER BY random() LIMIT 1;
        e := 'a turn of another session';
    ELSIF r < 0.85 THEN
        oten := (ARRAY['', 'tA', 'tB'])[1 + floor(random() * 3)::int];
        SELECT turn_id INTO u FROM convctx.turn
         WHERE tenant_id = oten AND tenant_id IS DISTINCT FROM ten AND session_id = sid
         ORDER BY random() LIMIT 1;
        e := 'a turn of the same session id in another tenant';
    ELSIF r < 0.95 THEN
        u := md5(random()::text)::uuid;
        e := 'unknown';
    ELSE
        u := (ARRAY['00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
                    '00000000-0000-4000-8000-000000000000'])[1 + floor(random() * 3)::int]::uuid;
        e := 'odd';
    END IF;
    IF u IS NULL THEN
        u := md5(random()::text)::uuid;
        e := 'unknown (' || e || ': none)';
    END IF;
    e := quote_literal(u::text) || '::uuid /* ' || e || ' */';
END $$;

------------------------------------------------------------------------------
-- Now and then, move time forward for some rows (their timestamps back), so
-- that purge has expired anonymous sessions, old turns and stale contexts to
-- delete. Only timestamps change.
------------------------------------------------------------------------------

CREATE FUNCTION fuzz.time_travel(sids text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    sid text := sids[1 + floor(random() * cardinality(sids))::int];
    ten text := (ARRAY['', 'tA', 'tB'])[1 + floor(random() * 3)::int];
BEGIN
    UPDATE convctx.session SET last_activity_at = last_activity_at - interval '2 days'
     WHERE tenant_id = ten AND session_id = sid;
    -- the oldest turns of the session, every version of each
    UPDATE convctx.turn SET created_at = created_at - interval '8 days',
                            finalized_at = finalized_at - interval '8 days'
     WHERE tenant_id = ten AND session_id = sid
       AND turn_no <= (SELECT 1 + floor(random() * last_turn_no) FROM convctx.session
                        WHERE tenant_id = ten AND session_id = sid);
    UPDATE convctx.conversation_context SET updated_at = updated_at - interval '31 days'
     WHERE tenant_id = ten AND conversation_id = sid;
    -- sessions nobody named: the fresh ones of earlier batches
    UPDATE convctx.session SET last_activity_at = last_activity_at - interval '2 days'
     WHERE session_id LIKE 'fresh-%' AND random() < 0.3;
END $$;

------------------------------------------------------------------------------
-- One batch: every installed routine per_fn times, in random order.
------------------------------------------------------------------------------

-- trace: log every call (as SQL) before it is made, to find the call that
-- crashed a batch: a crashed batch rolls back, so rerunning it replays it.
CREATE FUNCTION fuzz.run_batch(seed bigint, batch integer, per_fn integer, trace boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $run$
#variable_conflict use_column
DECLARE
    t0 timestamptz := clock_timestamp();
    fns jsonb := fuzz.routines();
    order_ int[];
    -- small pools
    tv text[]; te text[]; tmap jsonb;
    jv jsonb[]; je text[]; jp text[]; jmap jsonb;
    av text[]; ae text[];
    wrong jsonb[];
    sids text[];
    iids text[];
    bigs jsonb;
    gone oid;
    -- feedback: real outputs fed to the render functions
    ring_state jsonb[] := '{}';
    ring_hist jsonb[] := '{}';
    ring_clar jsonb[] := '{}';
    ring_ctx jsonb[] := '{}';
    -- one call
    m jsonb;
    fname text;
    kinds jsonb;
    nargs int;
    nreq int;
    n int;
    valid boolean;
    hostile double precision;
    ten text;
    tenexpr text;
    ts text[];
    js jsonb[];
    is_ int[];
    us uuid[];
    bs boolean[];
    arr text[];
    rec_i int;
    rv regrole;
    argx text[];
    kind text;
    slot int;
    p int;
    r double precision;
    idx int;
    sid text;
    sval text;
    sexpr text;
    uval uuid;
    jval jsonb;
    jexpr text;
    role text;
    cnt int;
    res text;
    st text;
    msg text;
    det text;
    ctxt text;
    tc timestamptz;
    ms numeric;
    repro text;
    tally jsonb := '{}';
    timing jsonb := '{}';
    tg timestamptz;
    key text;
    calls int := 0;
    errors int := 0;
    unexpected int := 0;
    attempt int;
    generated boolean;
    fi int;
BEGIN
    PERFORM setseed(fuzz.seedval(seed, batch));

    SELECT array_agg(t ORDER BY id), array_agg(expr ORDER BY id) INTO tv, te
      FROM fuzz.val WHERE kind = 'text' AND NOT big;
    SELECT jsonb_object_agg(role, ids) INTO tmap FROM (
        SELECT role, jsonb_agg(rn ORDER BY rn) AS ids FROM (
            SELECT role, row_number() OVER (ORDER BY id) AS rn
              FROM fuzz.val WHERE kind = 'text' AND NOT big) x GROUP BY role) y;
    SELECT array_agg(j ORDER BY id), array_agg(expr ORDER BY id),
           array_agg(array_to_string(paths, chr(30)) ORDER BY id) INTO jv, je, jp
      FROM fuzz.val WHERE kind = 'jsonb' AND NOT big;
    SELECT jsonb_object_agg(role, ids) INTO jmap FROM (
        SELECT role, jsonb_agg(rn ORDER BY rn) AS ids FROM (
            SELECT role, row_number() OVER (ORDER BY id) AS rn
              FROM fuzz.val WHERE kind = 'jsonb' AND NOT big) x GROUP BY role) y;
    SELECT array_agg(a::text ORDER BY id), array_agg(expr ORDER BY id) INTO av, ae
      FROM fuzz.val WHERE kind = 'textarr' AND NOT big;
    SELECT array_agg(j ORDER BY id) INTO wrong FROM fuzz.val WHERE role = 'wrong';
    SELECT array_agg(t ORDER BY id) INTO sids FROM fuzz.val WHERE kind = 'text' AND role = 'sid';
    SELECT array_agg(t ORDER BY id) INTO iids FROM fuzz.val WHERE kind = 'text' AND role = 'iid';
    SELECT v::oid INTO gone FROM fuzz.param WHERE k = 'gone_role_oid';
    SELECT jsonb_object_agg(k, ids) INTO bigs FROM (
        SELECT kind || ':' || role AS k, jsonb_agg(id ORDER BY id) AS ids
          FROM fuzz.val WHERE big GROUP BY 1) b;

    IF random() < 0.5 THEN
        PERFORM fuzz.time_travel(sids);
        PERFORM fuzz.time_travel(sids);
    END IF;

    -- the calls of this batch: each routine per_fn times, shuffled
    SELECT array_agg(i ORDER BY random()) INTO order_
      FROM generate_series(0, jsonb_array_length(fns) - 1) i, generate_series(1, per_fn) g;

    FOREACH fi IN ARRAY order_ LOOP
        m := fns -> fi;
        fname := m ->> 'name';
        kinds := m -> 'kinds';
        n := (m ->> 'n')::int;
        nreq := (m ->> 'nreq')::int;
        generated := false;
        tg := clock_timestamp();

        FOR attempt IN 1..5 LOOP
          BEGIN
            nargs := CASE WHEN random() < 0.7 THEN n ELSE nreq + floor(random() * (n - nreq + 1))::int END;
            valid := random() < 0.3;              -- a call meant to succeed
            hostile := CASE WHEN valid THEN 0 ELSE 0.2 + random() * 0.6 END;

            -- the tenant the call acts for
            r := random();
            idx := fuzz.pick(tmap, CASE WHEN r < 0.97 THEN 'settenant' ELSE 'oddtenant' END);
            ten := tv[idx];
            tenexpr := te[idx];
            PERFORM set_config('convctx.tenant', ten, true);

            ts := array_fill(NULL::text, ARRAY[10]);
            js := array_fill(NULL::jsonb, ARRAY[4]);
            is_ := array_fill(NULL::int, ARRAY[3]);
            us := array_fill(NULL::uuid, ARRAY[2]);
            bs := array_fill(NULL::boolean, ARRAY[2]);
            arr := NULL;
            rv := NULL;
            argx := array_fill(NULL::text, ARRAY[nargs]);
            sid := NULL;

            -- session ids first: turn ids and identities follow them
            FOR p IN 1..nargs LOOP
                CONTINUE WHEN kinds ->> (p - 1) <> 'sid';
                slot := (m -> 'slots' ->> (p - 1))::int;
                r := random();
                IF valid OR r >= hostile THEN
                    IF fname = 'link_session' AND random() < 0.95 THEN
                        idx := fuzz.pick(tmap, 'sid');
                        sval := tv[idx]; sexpr := te[idx];
                        IF sval LIKE 'anon-%' THEN
                            sval := 's0'; sexpr := quote_literal(sval);
                        END IF;
                    ELSIF fname IN ('redact_session', 'redact_turn') AND random() < 0.7 THEN
                        -- keep most of the store alive for the other writers
                        sval := 'nobody-' || floor(random() * 5)::int;
                        sexpr := quote_literal(sval);
                    ELSIF random() < 0.06 THEN
                        sval := 'fresh-' || batch || '-' || floor(random() * 20)::int;
                        sexpr := quote_literal(sval);
                    ELSE
                        idx := fuzz.pick(tmap, 'sid');
                        sval := tv[idx]; sexpr := te[idx];
                    END IF;
                ELSIF r < hostile * 0.15 THEN
                    sval := NULL; sexpr := 'NULL';
                ELSIF r < hostile * 0.2 THEN
                    idx := (bigs -> 'text:hostile' ->> floor(random() * jsonb_array_length(bigs -> 'text:hostile'))::int)::int;
                    SELECT t, expr INTO sval, sexpr FROM fuzz.val WHERE id = idx;
                ELSE
                    idx := fuzz.pick(tmap, 'hostile');
                    sval := tv[idx]; sexpr := te[idx];
                END IF;
                ts[slot] := sval;
                argx[p] := sexpr;
                sid := coalesce(sid, sval);
            END LOOP;

            FOR p IN 1..nargs LOOP
                kind := kinds ->> (p - 1);
                CONTINUE WHEN kind = 'sid';
                slot := (m -> 'slots' ->> (p - 1))::int;
                r := random();
                IF kind = 'iid' AND fname = 'start_turn' AND sid LIKE 'anon-%' THEN
                    argx[p] := 'NULL';           -- keep anon-* anonymous
                    CONTINUE;
                END IF;

                IF kind = 'time' THEN
                    IF valid OR r >= hostile THEN
                        sval := (ARRAY['2000-01-01', '2026-11-24 10:00:00+00', now()::text,
                                       (now() - interval '1 day')::text, NULL])[1 + floor(random() * 5)::int];
                    ELSE
                        sval := (ARRAY[NULL, '', 'infinity', '-infinity', 'not a time', '4714-11-24 BC',
                                       '294277-01-01', 'epoch', '2026-02-30'])[1 + floor(random() * 9)::int];
                    END IF;
                    ts[slot] := sval;
                    argx[p] := coalesce(quote_literal(sval) || '::timestamptz', 'NULL');

                ELSIF kind IN ('rid', 'iid', 'content', 'query', 'schedule', 'tenant', 'rolename') THEN
                    IF valid OR r >= hostile THEN
                        IF kind = 'rid' AND random() < 0.5 THEN
                            sval := 'f' || batch || '-' || floor(random() * 1000)::int;
                            sexpr := quote_literal(sval);
                        ELSIF kind = 'iid' AND sid IS NOT NULL AND random() < 0.85 THEN
                            -- the session's own identity, so that most links agree
                            sval := iids[1 + abs(hashtext(sid)) % 3];
                            sexpr := quote_literal(sval);
                        ELSIF kind = 'iid' AND fname = 'erase_identity' AND random() < 0.9 THEN
                            sval := 'nobody-' || floor(random() * 5)::int;
                            sexpr := quote_literal(sval);
                        ELSE
                            idx := fuzz.pick(tmap, CASE WHEN kind = 'tenant' THEN 'tenant' ELSE kind END);
                            sval := tv[idx]; sexpr := te[idx];
                        END IF;
                    ELSIF r < hostile * 0.15 THEN
                        sval := NULL; sexpr := 'NULL';
                    ELSIF r < hostile * 0.19 THEN
                        idx := (bigs -> 'text:hostile' ->> floor(random() * jsonb_array_length(bigs -> 'text:hostile'))::int)::int;
                        SELECT t, expr INTO sval, sexpr FROM fuzz.val WHERE id = idx;
                    ELSE
                        idx := fuzz.pick(tmap, 'hostile');
                        sval := tv[idx]; sexpr := te[idx];
                    END IF;
                    ts[slot] := sval;
                    argx[p] := sexpr;

                ELSIF kind = 'turn' THEN
                    SELECT t.u, t.e INTO uval, sexpr
                      FROM fuzz.pick_turn(ten, sid, sids, valid OR r >= hostile, fname) t;
                    us[slot - 17] := uval;
                    argx[p] := sexpr;

                ELSIF kind IN ('limit', 'batch') THEN
                    IF valid OR r >= hostile THEN
                        is_[slot - 14] := 1 + floor(random() * CASE WHEN kind = 'limit' THEN 20 ELSE 200 END)::int;
                    ELSE
                        is_[slot - 14] := (ARRAY[NULL, -2147483648, -2147483647, -1, 0, 1, 2, 10, 2147483647])
                                          [1 + floor(random() * 9)::int];
                    END IF;
                    argx[p] := coalesce(is_[slot - 14]::text, 'NULL');

                ELSIF kind = 'records' THEN
                    -- a session (of an identity, or anonymous and active now) and its
                    -- turns, with hostile texts; hostile: one line damaged
                    sval := 'imp-' || coalesce(left(sid, 40), 'x') || '-' || floor(random() * 20)::int;
                    arr := ARRAY[jsonb_build_object('type', 'session', 'session_id', sval,
                        'identity_id', CASE WHEN random() < 0.7 THEN iids[1 + floor(random() * 3)::int] END,
                        'created_at', now(), 'last_activity_at', now())::text];
                    IF random() < 0.7 THEN
                        arr[1] := (arr[1]::jsonb || jsonb_build_object('linked_at',
                            CASE WHEN arr[1]::jsonb ->> 'identity_id' IS NOT NULL THEN now() END))::text;
                    END IF;
                    FOR rec_i IN 1..floor(random() * 4)::int LOOP
                        arr := arr || jsonb_build_object('type', 'turn', 'session_id', sval,
                            'turn_id', gen_random_uuid(), 'turn_no', rec_i, 'request_id', 'r' || rec_i,
                            'created_at', now(), 'question_neutral', tv[fuzz.pick(tmap, 'hostile')],
                            'finalized_at', CASE WHEN random() < 0.5 THEN now() END,
                            'answer_neutral', tv[fuzz.pick(tmap, 'hostile')])::text;
                    END LOOP;
                    IF NOT (valid OR r >= hostile) THEN
                        idx := 1 + floor(random() * cardinality(arr))::int;
                        arr[idx] := CASE floor(random() * 7)::int
                            WHEN 0 THEN left(arr[idx], floor(random() * length(arr[idx]))::int)
                            WHEN 1 THEN (arr[idx]::jsonb || jsonb_build_object('turn_no', tv[fuzz.pick(tmap, 'hostile')]))::text
                            WHEN 2 THEN tv[fuzz.pick(tmap, 'hostile')]
                            WHEN 3 THEN (arr[idx]::jsonb || '{"extra": 1}')::text
                            WHEN 4 THEN (arr[idx]::jsonb - 'created_at')::text
                            WHEN 5 THEN (arr[idx]::jsonb || jsonb_build_object('created_at', tv[fuzz.pick(tmap, 'hostile')],
                                                                               'type', tv[fuzz.pick(tmap, 'hostile')]))::text
                            ELSE replace(arr[idx], '"q', '"\u0000') END;
                        IF random() < 0.1 THEN
                            arr := CASE WHEN random() < 0.5 THEN NULL ELSE arr || ARRAY[NULL::text] END;
                        END IF;
                    END IF;
                    argx[p] := coalesce(quote_literal(arr::text) || '::text[]', 'NULL');

                ELSIF kind = 'bool' THEN
                    IF valid OR r >= hostile THEN
                        bs[slot - 19] := random() < 0.5;
                    ELSE
                        bs[slot - 19] := (ARRAY[NULL, true, false])[1 + floor(random() * 3)::int];
                    END IF;
                    argx[p] := coalesce(bs[slot - 19]::text, 'NULL');

                ELSIF kind = 'nodes' THEN
                    IF valid OR r >= hostile THEN
                        SELECT array_agg(tv[fuzz.pick(tmap, 'node')]) INTO arr
                          FROM generate_series(1, floor(random() * 6)::int);
                        arr := coalesce(arr, '{}');
                        argx[p] := quote_literal(arr::text) || '::text[]';
                    ELSIF r < hostile * 0.15 THEN
                        arr := NULL; argx[p] := 'NULL';
                    ELSIF r < hostile * 0.2 THEN
                        idx := (bigs -> 'textarr:hostile' ->> floor(random() * jsonb_array_length(bigs -> 'textarr:hostile'))::int)::int;
                        SELECT a, expr INTO arr, sexpr FROM fuzz.val WHERE id = idx;
                        argx[p] := sexpr;
                    ELSE
                        idx := 1 + floor(random() * cardinality(av))::int;
                        arr := av[idx]::text[]; argx[p] := ae[idx];
                    END IF;

                ELSIF kind = 'role' THEN
                    IF valid OR r >= hostile THEN
                        rv := coalesce(to_regrole((ARRAY['fuzz_app', 'fuzz_other', 'convctx_app', 'fuzz_app'])
                                                  [1 + floor(random() * 4)::int]), 'fuzz_app'::regrole);
                        argx[p] := quote_literal(rv::text) || '::regrole';
                    ELSE
                        r := random();
                        IF r < 0.25 THEN
                            rv := NULL; argx[p] := 'NULL';
                        ELSIF r < 0.35 AND gone IS NOT NULL THEN
                            -- a role that was bound, then dropped: its binding is stale
                            rv := gone::regrole; argx[p] := gone || '::oid::regrole /* dropped, was bound */';
                        ELSIF r < 0.45 AND to_regrole('fuzz_renamed_now') IS NOT NULL THEN
                            -- a role that was bound, then renamed
                            rv := 'fuzz_renamed_now'::regrole; argx[p] := '''fuzz_renamed_now''::regrole';
                        ELSIF r < 0.55 THEN
                            rv := 0::oid::regrole; argx[p] := '0::oid::regrole';
                        ELSIF r < 0.7 THEN
                            rv := 4294967295::oid::regrole; argx[p] := '4294967295::oid::regrole';
                        ELSIF r < 0.85 THEN
                            rv := 'pg_monitor'::regrole; argx[p] := '''pg_monitor''::regrole';
                        ELSE
                            rv := to_regrole(quote_ident('fuzz "odd" role'));
                            argx[p] := quote_literal(rv::text) || '::regrole';
                        END IF;
                    END IF;

                ELSIF kind LIKE 'j:%' THEN
                    role := substr(kind, 3);
                    IF valid OR r >= hostile THEN
                        -- well shaped: a template, or a real output of the matching reader
                        jval := NULL;
                        IF random() < 0.5 THEN
                            IF role = 'state' AND cardinality(ring_state) > 0 THEN
                                jval := ring_state[1 + floor(random() * cardinality(ring_state))::int];
                            ELSIF role = 'history' AND cardinality(ring_hist) > 0 THEN
                                jval := ring_hist[1 + floor(random() * cardinality(ring_hist))::int];
                            ELSIF role = 'clar' AND cardinality(ring_clar) > 0 THEN
                                jval := ring_clar[1 + floor(random() * cardinality(ring_clar))::int];
                            ELSIF role = 'ctx' AND cardinality(ring_ctx) > 0 THEN
                                jval := ring_ctx[1 + floor(random() * cardinality(ring_ctx))::int];
                            END IF;
                        END IF;
                        IF jval IS NOT NULL THEN
                            jexpr := NULL;
                        ELSIF random() < 0.01 AND bigs ? ('jsonb:' || role) THEN
                            idx := (bigs -> ('jsonb:' || role) ->> floor(random() * jsonb_array_length(bigs -> ('jsonb:' || role)))::int)::int;
                            SELECT j, expr INTO jval, jexpr FROM fuzz.val WHERE id = idx;
                        ELSE
                            idx := fuzz.pick(jmap, role);
                            jval := jv[idx]; jexpr := je[idx];
                        END IF;
                    ELSIF r < hostile * 0.12 THEN
                        jval := NULL; jexpr := 'NULL';
                    ELSIF r < hostile * 0.17 THEN
                        IF random() < 0.5 AND bigs ? ('jsonb:' || role) THEN
                            idx := (bigs -> ('jsonb:' || role) ->> floor(random() * jsonb_array_length(bigs -> ('jsonb:' || role)))::int)::int;
                        ELSE
                            idx := (bigs -> 'jsonb:hostile' ->> floor(random() * jsonb_array_length(bigs -> 'jsonb:hostile'))::int)::int;
                        END IF;
                        SELECT j, expr INTO jval, jexpr FROM fuzz.val WHERE id = idx;
                    ELSIF r < hostile * 0.45 THEN
                        idx := fuzz.pick(jmap, 'hostile');
                        jval := jv[idx]; jexpr := je[idx];
                    ELSE
                        -- well shaped but for one place: a wrong JSON type at a key
                        idx := fuzz.pick(jmap, role);
                        jval := fuzz.mutate(jv[idx], string_to_array(jp[idx], chr(30)), wrong);
                        jexpr := NULL;
                    END IF;
                    js[slot - 10] := jval;
                    argx[p] := coalesce(jexpr, CASE WHEN jval IS NULL THEN 'NULL'
                                                    ELSE fuzz.lit(jval::text) || '::jsonb' END);
                ELSE
                    RAISE EXCEPTION 'fuzz: no generator for kind % of %', kind, fname;
                END IF;
            END LOOP;
            generated := true;
          EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            INSERT INTO fuzz.gen_error VALUES (batch, fname, st, msg);
          END;
          EXIT WHEN generated;
        END LOOP;
        CONTINUE WHEN NOT generated;

        -- the call, in its own subtransaction
        calls := calls + 1;
        repro := CASE WHEN ten <> '' THEN 'SELECT set_config(''convctx.tenant'', ' || tenexpr || ', false); ' ELSE '' END
              || CASE WHEN (m ->> 'proc')::boolean THEN 'CALL' ELSE 'SELECT' END
              || ' convctx.' || fname || '(' || array_to_string(argx, ', ', 'NULL') || ');';
        IF trace THEN
            RAISE LOG 'fuzz batch % call %: %', batch, calls, left(repro, 20000);
        END IF;
        st := '00000';
        tc := clock_timestamp();
        BEGIN
            res := NULL;
            IF (m ->> 'proc')::boolean THEN
                EXECUTE m -> 'sql' ->> (nargs - nreq)
                  USING ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8], ts[9], ts[10],
                        js[1], js[2], js[3], js[4], is_[1], is_[2], is_[3], us[1], us[2], bs[1], bs[2],
                        arr, rv;
            ELSE
                EXECUTE m -> 'sql' ->> (nargs - nreq) INTO cnt, res
                  USING ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8], ts[9], ts[10],
                        js[1], js[2], js[3], js[4], is_[1], is_[2], is_[3], us[1], us[2], bs[1], bs[2],
                        arr, rv;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                    det = PG_EXCEPTION_DETAIL, ctxt = PG_EXCEPTION_CONTEXT;
        END;
        ms := extract(epoch FROM clock_timestamp() - tc) * 1000;

        IF st <> '00000' THEN
            errors := errors + 1;
        END IF;
        IF (st <> '00000' AND NOT (m -> 'allowed') ? st) OR ms > 2000 THEN
            IF st <> '00000' AND NOT (m -> 'allowed') ? st THEN
                unexpected := unexpected + 1;
                INSERT INTO fuzz.failure (batch, call_no, fname, sqlstate, message, detail, context, repro)
                VALUES (batch, calls, fname, st, left(msg, 500), left(det, 500), left(ctxt, 500), left(repro, 40000));
            END IF;
            IF ms > 2000 THEN
                INSERT INTO fuzz.slow VALUES (batch, calls, fname, round(ms), st, left(repro, 4000));
            END IF;
        END IF;

        timing := jsonb_set(timing, ARRAY[fname],
            jsonb_build_array(coalesce((timing -> fname ->> 0)::int, 0) + 1,
                              coalesce((timing -> fname ->> 1)::numeric, 0) + ms,
                              coalesce((timing -> fname ->> 2)::numeric, 0)
                                + extract(epoch FROM tc - tg) * 1000));
        key := fname || ' ' || st;
        tally := jsonb_set(tally, ARRAY[key], to_jsonb(coalesce((tally ->> key)::int, 0) + 1));

        -- real outputs feed the readers' renderers
        IF st = '00000' AND res IS NOT NULL AND octet_length(res) < 20000 THEN
            IF fname = 'conversation_state' THEN
                ring_state := ring_state[greatest(cardinality(ring_state) - 14, 1):] || res::jsonb;
            ELSIF fname = 'context_history' THEN
                ring_hist := ring_hist[greatest(cardinality(ring_hist) - 14, 1):] || res::jsonb;
            ELSIF fname = 'clarification_context' THEN
                ring_clar := ring_clar[greatest(cardinality(ring_clar) - 14, 1):] || res::jsonb;
            ELSIF fname IN ('context_add', 'context_merge', 'context_load') THEN
                ring_ctx := ring_ctx[greatest(cardinality(ring_ctx) - 14, 1):] || res::jsonb;
            END IF;
        END IF;
    END LOOP;

    INSERT INTO fuzz.tally
    SELECT split_part(k, ' ', 1), split_part(k, ' ', 2), v::bigint FROM jsonb_each_text(tally) AS e(k, v)
    ON CONFLICT (fname, sqlstate) DO UPDATE SET n = fuzz.tally.n + EXCLUDED.n;
    INSERT INTO fuzz.timing
    SELECT k, (v ->> 0)::bigint, (v ->> 1)::numeric, (v ->> 2)::numeric FROM jsonb_each(timing) AS e(k, v)
    ON CONFLICT (fname) DO UPDATE SET calls = fuzz.timing.calls + EXCLUDED.calls,
        call_ms = fuzz.timing.call_ms + EXCLUDED.call_ms, gen_ms = fuzz.timing.gen_ms + EXCLUDED.gen_ms;
    INSERT INTO fuzz.batch_log VALUES (batch, calls, errors, unexpected,
                                       round(extract(epoch FROM clock_timestamp() - t0) * 1000));
    RETURN format('batch %s: %s calls, %s errors, %s unexpected, %s ms',
                  batch, calls, errors, unexpected,
                  round(extract(epoch FROM clock_timestamp() - t0) * 1000));
END
$run$;
