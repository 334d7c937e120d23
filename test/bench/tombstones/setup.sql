-- Prompt reads with tombstones: the sessions, the measuring procedure and
-- the report. Run by run.sh.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
CREATE SCHEMA bench;

-- The sessions measured, signed in and anonymous alike: a fresh one (the
-- baseline of its kind), and one per tombstone count (0 is a second fresh
-- session: its ratio shows the noise). Signed-in sessions are linked to an
-- identity; anonymous ones (anon-...) are not, and run.sh lifts the cap on
-- anonymous sessions (convctx.max_session_turns) so that they keep as many
-- tombstones as the signed-in ones.
CREATE TABLE bench.shape (session_id text PRIMARY KEY, tombstones int NOT NULL, signed boolean NOT NULL);
INSERT INTO bench.shape
SELECT prefix || name, tombstones, signed
  FROM (VALUES ('fresh', 0), ('t-0', 0), ('t-1000', 1000), ('t-10000', 10000), ('t-100000', 100000)) AS t(name, tombstones),
       (VALUES ('', true), ('anon-', false)) AS k(prefix, signed);

-- The baseline of a session's kind.
CREATE FUNCTION bench.fresh_of(s text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN signed THEN 'fresh' ELSE 'anon-fresh' END FROM bench.shape WHERE session_id = s;
$$;

CREATE TABLE bench.sample (round int, session_id text, read text, us numeric);

CREATE FUNCTION bench.reads() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['recent_turns(s, 10)', 'conversation_state(s, 10)', 'context_history(s, 5)',
                 'is_followup(q, s)'];
$$;

-- A signed-in session is linked to an identity (its turns started with
-- start_turn's identity_id argument), an anonymous one is not. Its history
-- (turn 1 through start_turn, which creates the session and links a
-- signed-in one; the others inserted in bulk with the session row's counts
-- as start_turn and finalize_turn would leave them) becomes tombstones
-- through redact_session; then it goes on with `live` turns through the
-- API, each with 5 retrieved chunks and 2 citations.
CREATE PROCEDURE bench.build(live int) LANGUAGE plpgsql AS $$
DECLARE
    sh record;
    t uuid;
    identity text;
BEGIN
    FOR sh IN SELECT * FROM bench.shape ORDER BY tombstones, session_id LOOP
        identity := CASE WHEN sh.signed THEN 'id-' || sh.session_id END;
        IF sh.tombstones > 0 THEN
            PERFORM convctx.start_turn(sh.session_id, 'h1', 'old question 1', identity_id => identity);
            INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                                      question_neutral, answer_neutral, finalized_at)
            SELECT convctx.current_tenant(), sh.session_id, gen_random_uuid(), i, 'h' || i,
                   identity, 'old question ' || i, 'old answer ' || i, statement_timestamp()
              FROM generate_series(2, sh.tombstones) i;
            UPDATE convctx.session SET last_turn_no = sh.tombstones, live_turns = sh.tombstones,
                   live_answers = sh.tombstones - 1
             WHERE session_id = sh.session_id;
            PERFORM convctx.redact_session(sh.session_id);
        END IF;
        FOR i IN 1 .. live LOOP
            t := convctx.start_turn(sh.session_id, 'r' || i,
                                    'Question number ' || i || ' about the regulations that apply here?',
                                    identity_id => identity);
            PERFORM convctx.record_retrieval(sh.session_id, t,
                (SELECT jsonb_agg(jsonb_build_object('id', 'doc-' || i || '-' || c, 'source', 'Code',
                                                     'title', 'Article ' || c,
                                                     'text', repeat('text of the article ', 10)))
                   FROM generate_series(1, 5) c),
                jsonb_build_array(jsonb_build_object('id', 'doc-' || i || '-1'),
                                  jsonb_build_object('id', 'doc-' || i || '-2')));
            PERFORM convctx.finalize_turn(sh.session_id, t, 'Answer number ' || i || ', citing [1] and [2].');
        END LOOP;
        COMMIT;
    END LOOP;
END $$;

-- One read, n times, on session s: microseconds per call.
CREATE FUNCTION bench.time_read(f text, s text, n int) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    FOR i IN 1 .. n LOOP
        CASE f
            WHEN 'recent_turns(s, 10)' THEN PERFORM count(*) FROM convctx.recent_turns(s, 10);
            WHEN 'conversation_state(s, 10)' THEN PERFORM convctx.conversation_state(s, 10);
            WHEN 'context_history(s, 5)' THEN PERFORM convctx.context_history(s, 5);
            WHEN 'is_followup(q, s)' THEN PERFORM convctx.is_followup('and what about that one?', s);
        END CASE;
    END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1000000 / n;
END $$;

-- Rounds of every read on every session, the order of the sessions turned
-- by one each round, so that load drifts hit them all alike; round 0 warms
-- the caches and plans and is not kept.
CREATE PROCEDURE bench.measure(rounds int, calls int) LANGUAGE plpgsql AS $$
DECLARE
    sessions text[] := ARRAY(SELECT session_id FROM bench.shape ORDER BY tombstones, session_id);
    k int := cardinality(ARRAY(SELECT session_id FROM bench.shape));
    s text;
    f text;
    us numeric;
BEGIN
    FOR r IN 0 .. rounds LOOP
        FOR j IN 0 .. k - 1 LOOP
            s := sessions[1 + (j + r) % k];
            FOREACH f IN ARRAY bench.reads() LOOP
                us := bench.time_read(f, s, calls);
                IF r > 0 THEN
                    INSERT INTO bench.sample VALUES (r, s, f, us);
                END IF;
            END LOOP;
        END LOOP;
        COMMIT;
    END LOOP;
END $$;

-- Median microseconds per call, and the median and spread of the ratio to
-- the time of the fresh session of the same kind (signed in or anonymous)
-- in the same round.
CREATE FUNCTION bench.report() RETURNS TABLE (read text, kind text, session text, tombstones int, us_per_call numeric,
                                              ratio_to_fresh numeric, ratio_min_max text)
LANGUAGE sql AS $$
    WITH r AS (SELECT x.read, x.session_id, x.us, x.us / f.us AS ratio
                 FROM bench.sample x JOIN bench.sample f
                   ON f.round = x.round AND f.read = x.read AND f.session_id = bench.fresh_of(x.session_id))
    SELECT r.read, CASE WHEN sh.signed THEN 'signed in' ELSE 'anonymous' END, r.session_id, sh.tombstones,
           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY r.us)::numeric, 0),
           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ratio)::numeric, 2),
           round(min(r.ratio), 2) || ' - ' || round(max(r.ratio), 2)
      FROM r JOIN bench.shape sh USING (session_id)
     GROUP BY r.read, sh.signed, r.session_id, sh.tombstones
     ORDER BY array_position(bench.reads(), r.read), sh.signed DESC,
              r.session_id = bench.fresh_of(r.session_id) DESC, sh.tombstones;
$$;

-- The index entries of convctx.turn that one call goes through, from the
-- statistics of this transaction: what the timings follow, without noise.
CREATE FUNCTION bench.entries() RETURNS TABLE (kind text, session text, tombstones int, recent_turns bigint,
                                               conversation_state bigint, context_history bigint, is_followup bigint)
LANGUAGE plpgsql AS $$
DECLARE
    sh record;
    counts bigint[];
    before bigint;
    f text;
BEGIN
    -- the plans first, so that no catalog read is counted
    FOREACH f IN ARRAY bench.reads() LOOP
        PERFORM bench.time_read(f, 'fresh', 1);
    END LOOP;
    FOR sh IN SELECT * FROM bench.shape WHERE session_id NOT IN ('fresh', 'anon-fresh')
               ORDER BY signed DESC, tombstones, session_id LOOP
        counts := '{}';
        FOREACH f IN ARRAY bench.reads() LOOP
            SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) INTO before
              FROM pg_index WHERE indrelid = 'convctx.turn'::regclass;
            PERFORM bench.time_read(f, sh.session_id, 1);
            counts := counts || ((SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid))
                                    FROM pg_index WHERE indrelid = 'convctx.turn'::regclass) - before);
        END LOOP;
        kind := CASE WHEN sh.signed THEN 'signed in' ELSE 'anonymous' END;
        session := sh.session_id;
        tombstones := sh.tombstones;
        recent_turns := counts[1];
        conversation_state := counts[2];
        context_history := counts[3];
        is_followup := counts[4];
        RETURN NEXT;
    END LOOP;
END $$;
