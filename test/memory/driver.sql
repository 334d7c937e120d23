-- Helper objects of TAP test 006_memory: a fixture of realistic
-- conversations, a driver procedure that makes many calls of one convctx
-- function in the calling backend, and a probe of that backend's memory.
-- Everything lives in schema memtest. The test loads this file as a
-- superuser (pg_read_file of /proc needs it) into a database with
-- CREATE EXTENSION convctx, with convctx.max_session_turns = 20 and
-- convctx.max_active_nodes = 48.
--
-- Shapes:
--   rd-0 .. rd-199   read sessions of 12 finalized turns each; every turn
--                    retrieved 6 chunks and cites 2 (one of an earlier
--                    turn); odd ones linked to user-(k % 50), even ones
--                    anonymous; a summary on every fourth; a context of
--                    30 node ids under the same id
--   cx-0 .. cx-499   contexts of 40 to 48 node ids
--   memtest.pool     p finalized turns, 20 per linked (so never capped)
--                    session rp-*, the turns replace_turn corrects and
--                    record_retrieval records for
-- Node ids come from a universe of 120, so contexts hold tens of ids, and
-- the ids of neighbouring calls overlap.

CREATE SCHEMA memtest;

-- Turns whose id the app keeps (replace_turn chains its corrections on it).
CREATE TABLE memtest.pool (k integer PRIMARY KEY, session_id text NOT NULL, turn_id uuid NOT NULL);

-- Node ids: memtest.node_ids(u, i, n) is n consecutive ids of u, starting
-- at a place that moves by 7 from one i to the next.
CREATE FUNCTION memtest.universe() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_agg('kg:n' || (g * 13 % 120) ORDER BY g) FROM generate_series(0, 239) g
$$;

CREATE FUNCTION memtest.node_ids(u text[], i bigint, n integer) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT u[1 + (i * 7 % 120)::integer : (i * 7 % 120)::integer + n]
$$;

-- Text of len bytes, different for every i, with some accents.
CREATE FUNCTION memtest.txt(what text, i bigint, len integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(what || ' ' || i || ': ' ||
                repeat('¿Cómo se calcula el impuesto ' || (i % 97) || ' sobre la vivienda? ', 1 + len / 50),
                len)
$$;

-- 50 variants of the 6 chunks a turn retrieves, as text with '@' where
-- the turn's tag goes: memtest.chunks(templates, tag, i) has chunk ids
-- c-<tag>-1 .. c-<tag>-6 and texts of 200 to 400 bytes.
CREATE FUNCTION memtest.chunk_templates() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_agg(a ORDER BY v)
      FROM (SELECT v, jsonb_agg(jsonb_build_object(
                          'id', 'c-@-' || g,
                          'source', 'Código ' || (v % 7),
                          'title', 'Artículo ' || (v * 6 + g),
                          'path', 'code/' || (v % 7) || '/' || g,
                          'number', g,
                          'text', memtest.txt('chunk', v * 6 + g, 200 + (v * 6 + g) * 37 % 200)) ORDER BY g)::text AS a
              FROM generate_series(0, 49) v, generate_series(1, 6) g
             GROUP BY v) t
$$;

CREATE FUNCTION memtest.chunks(templates text[], tag text, i bigint) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(templates[1 + (i % 50)::integer], '@', tag)::jsonb
$$;

-- The read fixture and a pool of p turns.
CREATE PROCEDURE memtest.fixture(p integer)
LANGUAGE plpgsql AS $$
DECLARE
    u text[] := memtest.universe();
    tpl text[] := memtest.chunk_templates();
    ns integer := greatest(p / 20, 1);
    s text;
    t uuid;
BEGIN
    FOR k IN 0 .. 199 LOOP
        s := 'rd-' || k;
        FOR n IN 1 .. 12 LOOP
            t := convctx.start_turn(s, 'r' || n, memtest.txt('question', k * 100 + n, 120),
                                    CASE WHEN k % 2 = 1 THEN 'user-' || (k % 50) END,
                                    meta => '{"channel": "web", "ip": "198.51.100.7"}');
            PERFORM convctx.record_retrieval(s, t, memtest.chunks(tpl, k || '-' || n, k * 100 + n),
                        jsonb_build_array(jsonb_build_object('id', 'c-' || k || '-' || n || '-1'),
                                          jsonb_build_object('id', 'c-' || k || '-' || greatest(n - 2, 1) || '-3')));
            PERFORM convctx.finalize_turn(s, t, memtest.txt('answer', k * 100 + n, 400));
            IF k % 4 = 0 AND n = 8 THEN
                PERFORM convctx.set_summary(s, memtest.txt('summary', k, 300), t, 0);
            END IF;
        END LOOP;
        PERFORM convctx.context_add(s, memtest.node_ids(u, k, 30));
        COMMIT;
    END LOOP;
    FOR k IN 0 .. 499 LOOP
        PERFORM convctx.context_add('cx-' || k, memtest.node_ids(u, k, 40), 'user-' || (k % 50));
    END LOOP;
    COMMIT;
    FOR k IN 0 .. p - 1 LOOP
        s := 'rp-' || (k % ns);
        t := convctx.start_turn(s, 'p' || k, memtest.txt('question', k, 150), 'user-rp-' || (k % ns));
        PERFORM convctx.finalize_turn(s, t, memtest.txt('answer', k, 500));
        INSERT INTO memtest.pool VALUES (k, s, t);
        IF k % 1000 = 999 THEN
            COMMIT;
        END IF;
    END LOOP;
    COMMIT;
END $$;

-- Make calls first .. last (1-based) of function fn, committing every
-- commit_every calls. Call i always has the same shape, so a run split in
-- two (warm-up, then the rest) makes the same calls as one run. Some
-- phases need a fresh turn or session per call and make it with
-- start_turn, which has a phase of its own; the counts are calls of fn.
CREATE PROCEDURE memtest.drive(fn text, first bigint, last bigint, commit_every integer)
LANGUAGE plpgsql AS $$
DECLARE
    u text[] := memtest.universe();
    tpl text[] := memtest.chunk_templates();
    p integer := (SELECT count(*) FROM memtest.pool);
    ns integer;
    s text;
    t uuid;
    j jsonb;
    b boolean;
    n bigint;
    m bigint;
    x text;
    queries text[] := ARRAY[
        '¿Estás seguro?',
        '¿Qué dice el artículo 15 de la Constitución sobre la vida?',
        'explícame más sobre la deducción por vivienda habitual en el IRPF de este año',
        'and for a second home?',
        'Can you elaborate on the exemption for first-time buyers in the regional tax rules',
        'What does the law say about gifts between parents and children in Catalonia today',
        'tell me more',
        'ok',
        '¿Y si el inmueble está en régimen de gananciales y uno de los cónyuges fallece?',
        'Which code section governs the reduced rate for newly built homes and garages'];
BEGIN
    IF p = 0 AND fn IN ('replace_turn', 'record_retrieval') THEN
        RAISE EXCEPTION 'memtest.pool is empty';
    END IF;
    ns := greatest(p / 20, 1);
    FOR i IN first .. last LOOP
        CASE fn
        WHEN 'noop' THEN
            -- negative control: the loop, its commits and some argument work
            x := memtest.txt('question', i, 200);
        WHEN 'leak' THEN
            -- positive control: one prepared statement, a plan source kept
            -- in CacheMemoryContext until the session ends, per 300 calls
            x := memtest.txt('question', i, 200);
            IF i % 300 = 0 THEN
                EXECUTE format('PREPARE memtest_leak_%s AS SELECT $1::text || %L', i, 'x');
            END IF;
        WHEN 'start_turn' THEN
            CASE i % 10
            WHEN 7 THEN     -- a linked session (never capped), translated chat
                t := convctx.start_turn('st-ln-' || (i % 500), 'r' || i, memtest.txt('question', i, 80 + i % 300),
                                        'user-' || (i % 500), memtest.txt('pregunta', i, 100),
                                        true, '{"channel": "app", "locale": "es", "ip": "192.0.2.1", "x": 1}');
            WHEN 8 THEN     -- a retry of the previous call: the same turn id
                t := convctx.start_turn('st-ln-' || ((i - 1) % 500), 'r' || (i - 1),
                                        memtest.txt('question', i - 1, 80 + (i - 1) % 300),
                                        'user-' || ((i - 1) % 500), memtest.txt('pregunta', i - 1, 100),
                                        true, '{"channel": "app", "locale": "es", "ip": "192.0.2.1", "x": 1}');
            WHEN 9 THEN     -- only a translated question: the fallback
                t := convctx.start_turn('st-an-' || (i % 50), 'r' || i, '', NULL,
                                        memtest.txt('pregunta', i, 120), true);
            ELSE            -- anonymous sessions, capped from the first thousand calls on
                t := convctx.start_turn('st-an-' || (i % 50), 'r' || i, memtest.txt('question', i, 80 + i % 300),
                                        meta => jsonb_build_object('channel', 'web', 'ip', '203.0.113.' || (i % 256),
                                                                   'device_type', 'mobile', 'secret', 'dropped'));
            END CASE;
        WHEN 'finalize_turn' THEN
            IF i % 5 = 0 THEN   -- a retry of the previous call: changes nothing
                s := 'fz-an-' || ((i - 1) % 60);
                t := convctx.start_turn(s, 'r' || (i - 1), 'retry');
                PERFORM convctx.finalize_turn(s, t, memtest.txt('answer', i - 1, 300 + (i - 1) % 500),
                                              NULL, NULL, '{"client_version": "1.2.3", "junk": true}');
            ELSE                -- a new turn of an anonymous (capped) session
                s := 'fz-an-' || (i % 60);
                t := convctx.start_turn(s, 'r' || i, memtest.txt('question', i, 100), NULL, NULL, i % 5 = 1);
                PERFORM convctx.finalize_turn(s, t, memtest.txt('answer', i, 300 + i % 500),
                                              CASE WHEN i % 5 = 2 THEN memtest.txt('respuesta', i, 300) END,
                                              NULL, '{"client_version": "1.2.3", "junk": true}');
            END IF;
        WHEN 'recent_turns' THEN
            s := CASE WHEN i % 50 = 0 THEN 'nosuch-' || i ELSE 'rd-' || (i % 200) END;
            SELECT count(*), sum(length(question_neutral) + length(answer_neutral)) INTO n, m
              FROM convctx.recent_turns(s, 5 + (i % 11)::integer);
        WHEN 'recent_turns_json' THEN
            s := CASE WHEN i % 50 = 0 THEN 'nosuch-' || i ELSE 'rd-' || (i % 200) END;
            j := convctx.recent_turns_json(s, 5 + (i % 11)::integer);
        WHEN 'link_session' THEN
            CASE i % 4
            WHEN 0 THEN     -- a session linked before its first turn
                PERFORM convctx.link_session('user-' || (i % 1000), 'lk-' || i);
            WHEN 1 THEN     -- the same link again: idempotent
                PERFORM convctx.link_session('user-' || ((i - 1) % 1000), 'lk-' || (i - 1));
            WHEN 2 THEN     -- a fixture session with turns, already linked
                PERFORM convctx.link_session('user-' || ((i * 2 + 1) % 200 % 50), 'rd-' || ((i * 2 + 1) % 200), i % 8 = 2);
            ELSE            -- an anonymous session with a turn: backfill
                PERFORM convctx.start_turn('lk-an-' || i, 'r1', 'anonymous so far');
                PERFORM convctx.link_session('user-' || (i % 1000), 'lk-an-' || i);
            END CASE;
        WHEN 'replace_turn' THEN
            UPDATE memtest.pool
               SET turn_id = convctx.replace_turn(session_id, turn_id, memtest.txt('corrected', i, 200 + i % 400),
                                                  CASE WHEN i % 3 = 0 THEN memtest.txt('corregida', i, 200) END,
                                                  CASE WHEN i % 2 = 0 THEN '{"channel": "web", "x": 2}'::jsonb END)
             WHERE k = i % p;
        WHEN 'context_merge' THEN
            j := convctx.context_merge(
                     CASE WHEN i % 50 = 0 THEN NULL
                          ELSE jsonb_build_object('activeNodeIds', to_jsonb(memtest.node_ids(u, i / 3, 20 + (i % 40)::integer)),
                                                  'flags', jsonb_build_object('crossBorder', i % 2 = 0), 'lang', 'es') END,
                     memtest.node_ids(u, i, 4 + (i % 9)::integer),
                     CASE WHEN i % 3 = 0 THEN 32 + (i % 32)::integer END);
        WHEN 'context_add' THEN
            j := convctx.context_add('cx-' || (i % 500), memtest.node_ids(u, i, 2 + (i % 7)::integer),
                                     CASE WHEN i % 4 = 0 THEN 'user-' || (i % 50) END);
        WHEN 'context_load' THEN
            j := convctx.context_load('cx-' || (i % 600));   -- cx-500 .. cx-599 do not exist
        WHEN 'context_save' THEN
            PERFORM convctx.context_save('cs-' || (i % 500),
                        jsonb_build_object('activeNodeIds', to_jsonb(memtest.node_ids(u, i, 20 + (i % 31)::integer)),
                                           'flags', jsonb_build_object('crossBorder', i % 2 = 0, 'turn', i),
                                           'lang', 'es'),
                        CASE WHEN i % 3 = 0 THEN 'user-' || (i % 50) END);
        WHEN 'conversation_state' THEN
            s := CASE WHEN i % 50 = 0 THEN 'nosuch-' || i ELSE 'rd-' || (i % 200) END;
            j := convctx.conversation_state(s, 4 + (i % 13)::integer);
        WHEN 'context_history' THEN
            s := CASE WHEN i % 50 = 0 THEN 'nosuch-' || i ELSE 'rd-' || (i % 200) END;
            j := convctx.context_history(s, 3 + (i % 5)::integer,
                                         CASE WHEN i % 3 = 0 THEN memtest.chunks(tpl, 'cur-' || i, i) END);
        WHEN 'record_retrieval' THEN
            -- Pool turn k; turn k - ns is the previous turn of its session
            -- and was recorded before (calls go through k in order). A
            -- record replaces the earlier one from call p on.
            SELECT session_id, turn_id, k INTO s, t, n FROM memtest.pool WHERE k = i % p;
            PERFORM convctx.record_retrieval(s, t, memtest.chunks(tpl, 'p' || n, i),
                        CASE WHEN n >= ns AND i > ns AND i % 4 <> 0 THEN
                            jsonb_build_array(jsonb_build_object('id', 'c-p' || n || '-2'),
                                              jsonb_build_object('id', 'c-p' || (n - ns) || '-4'),
                                              jsonb_build_object('id', 'ext-' || i, 'text', memtest.txt('cited', i, 150)))
                        END);
        WHEN 'is_followup' THEN
            b := convctx.is_followup(queries[1 + i % 10],
                                     CASE WHEN i % 7 = 0 THEN NULL
                                          WHEN i % 50 = 1 THEN 'nosuch-' || i
                                          ELSE 'rd-' || (i % 200) END);
        ELSE
            RAISE EXCEPTION 'unknown function %', fn;
        END CASE;
        IF i % commit_every = 0 THEN
            COMMIT;
        END IF;
    END LOOP;
    COMMIT;
END $$;

-- Memory of the calling backend: RssAnon of /proc/<pid>/status (private
-- anonymous memory; VmRSS would also count the shared buffers this backend
-- touched) and the memory contexts' total and used bytes.
CREATE FUNCTION memtest.probe(OUT pid integer, OUT rss_anon_kb bigint, OUT ctx_bytes bigint,
                              OUT ctx_used_bytes bigint, OUT contexts bigint)
LANGUAGE sql AS $$
    SELECT pg_backend_pid(),
           (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'),
                         'RssAnon:\s+(\d+) kB'))[1]::bigint,
           sum(total_bytes)::bigint, sum(used_bytes)::bigint, count(*)
      FROM pg_backend_memory_contexts
$$;
