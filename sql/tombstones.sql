-- Reads that do not grow with tombstones: recent_turns(_json), conversation_state,
-- context_history and is_followup return exactly what plain SQL over the turns says,
-- whatever tombstones the session holds, and read the same index entries with 30
-- tombstones below the live turns as with 10^4.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;

------------------------------------------------------------------------------
-- helpers: build sessions, and the reference reads in plain SQL
------------------------------------------------------------------------------
-- n finalized turns (every seventh left open) of a session linked to an identity
-- (not capped); each turn records one chunk, c<request>, cited by itself
CREATE FUNCTION pg_temp.turns(s text, prefix text, n int, open_every int DEFAULT 7) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    id uuid;
BEGIN
    FOR i IN 1..n LOOP
        id := convctx.start_turn(s, prefix || i, 'question ' || prefix || i, identity_id => 'id-' || s);
        PERFORM convctx.record_retrieval(s, id,
            jsonb_build_array(jsonb_build_object('id', 'c' || prefix || i, 'text', 'chunk ' || prefix || i)),
            jsonb_build_array(jsonb_build_object('id', 'c' || prefix || i)));
        IF i % open_every <> 0 THEN
            PERFORM convctx.finalize_turn(s, id, 'answer ' || prefix || i);
        END IF;
    END LOOP;
END $$;
-- a long history that becomes tombstones: its first turn through start_turn (which
-- creates and links the session), the others finalized and inserted in bulk with the
-- session row's counts as start_turn and finalize_turn would leave them
CREATE FUNCTION pg_temp.history(s text, n int) RETURNS void LANGUAGE sql AS $$
    SELECT convctx.start_turn(s, 'h1', 'question h1', identity_id => 'id-' || s);
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                              question_neutral, answer_neutral, finalized_at)
    SELECT convctx.current_tenant(), s, gen_random_uuid(), i, 'h' || i, 'id-' || s,
           'question h' || i, 'answer h' || i, statement_timestamp()
      FROM generate_series(2, n) i;
    UPDATE convctx.session SET last_turn_no = n, live_turns = n, live_answers = n - 1
     WHERE session_id = s;
$$;
CREATE FUNCTION pg_temp.turn_id(s text, r text) RETURNS uuid LANGUAGE sql AS $$
    SELECT turn_id FROM convctx.turn
     WHERE session_id = s AND request_id = r AND replaced_by_turn_id IS NULL;
$$;
CREATE VIEW pg_temp.live AS
    SELECT * FROM convctx.turn WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL;

CREATE FUNCTION pg_temp.ref_recent(s text, n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(turn_id, request_id, created_at, finalized_at,
                                                question_neutral, answer_neutral, question_translated,
                                                answer_translated, metadata) ORDER BY turn_no), '[]')
      FROM (SELECT * FROM pg_temp.live WHERE session_id = s AND finalized_at IS NOT NULL
             ORDER BY turn_no DESC LIMIT n) t;
$$;
CREATE FUNCTION pg_temp.got_recent(s text, n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(turn_id, request_id, created_at, finalized_at,
                                                question_neutral, answer_neutral, question_translated,
                                                answer_translated, metadata) ORDER BY o), '[]')
      FROM convctx.recent_turns(s, n) WITH ORDINALITY r(turn_id, request_id, created_at, finalized_at,
           question_neutral, answer_neutral, question_translated, answer_translated, metadata, o);
$$;
CREATE FUNCTION pg_temp.ref_recent_json(s text, n int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('question_neutral', question_neutral,
                                                 'answer_neutral', answer_neutral) ORDER BY turn_no), '[]')
      FROM (SELECT * FROM pg_temp.live WHERE session_id = s AND finalized_at IS NOT NULL
             ORDER BY turn_no DESC LIMIT n) t;
$$;
-- conversation_state: the last w messages of the last w live turns, and the counts
CREATE FUNCTION pg_temp.ref_state(s text, w int) RETURNS jsonb LANGUAGE sql AS $$
    WITH t AS (SELECT * FROM pg_temp.live WHERE session_id = s ORDER BY turn_no DESC LIMIT w),
    m AS (SELECT turn_no, 1 AS k, 'user' AS role, question_neutral AS text, created_at AS ts FROM t
          UNION ALL
          SELECT turn_no, 2, 'assistant', answer_neutral, finalized_at FROM t WHERE finalized_at IS NOT NULL),
    last AS (SELECT * FROM m ORDER BY turn_no DESC, k DESC LIMIT w)
    SELECT jsonb_build_object(
        'recent_messages', (SELECT coalesce(jsonb_agg(jsonb_build_object('role', role, 'text', text,
                                                       'timestamp', ts) ORDER BY turn_no, k), '[]') FROM last),
        'message_count', (SELECT count(*) + count(finalized_at) FROM pg_temp.live WHERE session_id = s),
        'is_first_message', NOT EXISTS (SELECT 1 FROM pg_temp.live WHERE session_id = s
                                           AND finalized_at IS NOT NULL));
$$;
CREATE FUNCTION pg_temp.got_state(s text, w int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('recent_messages', st -> 'recent_messages', 'message_count', st -> 'message_count',
                              'is_first_message', st -> 'is_first_message')
      FROM convctx.conversation_state(s, w) st;
$$;
-- context_history: the chunks of the newest of the last n finalized live turns and the
-- citations of the others (every chunk id is distinct here, so nothing is merged)
CREATE FUNCTION pg_temp.ref_history(s text, n int) RETURNS text[] LANGUAGE sql AS $$
    WITH t AS (SELECT turn_no, row_number() OVER (ORDER BY turn_no DESC) AS ago
                 FROM (SELECT turn_no FROM pg_temp.live WHERE session_id = s AND finalized_at IS NOT NULL
                        ORDER BY turn_no DESC LIMIT n) x)
    SELECT coalesce(array_agg(CASE WHEN t.ago = 1 THEN 'immediate' ELSE 'history' END || ' ' || t.ago
                              || ' ' || (e ->> 'id') ORDER BY t.ago, o), '{}')
      FROM t JOIN convctx.turn_retrieval r ON r.session_id = s AND r.turn_no = t.turn_no,
           jsonb_array_elements(CASE WHEN t.ago = 1 THEN r.chunks ELSE r.citations END) WITH ORDINALITY c(e, o);
$$;
CREATE FUNCTION pg_temp.got_history(s text, n int) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((e ->> 'section') || ' ' || (e ->> 'turns_ago') || ' ' || (e -> 'chunk' ->> 'id')
                              ORDER BY (e ->> 'index')::int), '{}')
      FROM jsonb_array_elements(convctx.context_history(s, n)) e;
$$;
-- every read against its reference, for the limits given; true when all agree
CREATE FUNCTION pg_temp.check(s text) RETURNS TABLE (read text, agrees boolean, detail text) LANGUAGE sql AS $$
    SELECT 'recent_turns', bool_and(pg_temp.got_recent(s, n) = pg_temp.ref_recent(s, n)),
           string_agg(n || ':' || jsonb_array_length(pg_temp.ref_recent(s, n)), ' ' ORDER BY n)
      FROM unnest(ARRAY[1, 3, 10, 50]) n
    UNION ALL
    SELECT 'recent_turns_json', bool_and(convctx.recent_turns_json(s, n) = pg_temp.ref_recent_json(s, n)), NULL
      FROM unnest(ARRAY[1, 3, 10, 50]) n
    UNION ALL
    SELECT 'conversation_state', bool_and(pg_temp.got_state(s, w) = pg_temp.ref_state(s, w)),
           string_agg(w || ':' || jsonb_array_length(pg_temp.ref_state(s, w) -> 'recent_messages'), ' ' ORDER BY w)
      FROM unnest(ARRAY[1, 4, 10, 50]) w
    UNION ALL
    SELECT 'context_history', bool_and(pg_temp.got_history(s, n) = pg_temp.ref_history(s, n)),
           string_agg(n || ':' || cardinality(pg_temp.ref_history(s, n)), ' ' ORDER BY n)
      FROM unnest(ARRAY[1, 3, 5, 50]) n
    UNION ALL
    SELECT 'is_followup', convctx.is_followup('and that?', s)
                          = EXISTS (SELECT 1 FROM pg_temp.live WHERE session_id = s AND finalized_at IS NOT NULL),
           convctx.is_followup('and that?', s)::text;
$$;

------------------------------------------------------------------------------
-- sessions of every shape
------------------------------------------------------------------------------
-- fresh: 20 turns, no tombstone
SELECT pg_temp.turns('fresh', 'f', 20);
-- prefix: a long history redacted with redact_session, then 20 turns, one of them
-- corrected twice; the newest turn is open
SELECT pg_temp.history('prefix', 10000);
SELECT convctx.redact_session('prefix');
SELECT pg_temp.turns('prefix', 'p', 20);
SELECT convctx.replace_turn('prefix', pg_temp.turn_id('prefix', 'p18'), 'corrected') IS NOT NULL AS replaced;
SELECT convctx.replace_turn('prefix', pg_temp.turn_id('prefix', 'p18'), 'corrected again') IS NOT NULL AS replaced;
SELECT convctx.start_turn('prefix', 'p-open', 'still open') IS NOT NULL AS started;
-- few: fewer live turns than any read asks for, above 10^4 tombstones
SELECT pg_temp.history('few', 10000);
SELECT convctx.redact_session('few');
SELECT pg_temp.turns('few', 'w', 3, 3);
-- only: nothing but tombstones
SELECT pg_temp.history('only', 300);
SELECT convctx.redact_session('only');
-- erased: a linked session erased with erase_identity, then used again
SELECT pg_temp.history('erased', 300);
SELECT convctx.erase_identity('id-erased') > 0 AS erased;
SELECT convctx.start_turn('erased', 'e' || i, 'question e' || i) IS NOT NULL AS started FROM generate_series(1, 4) i;
SELECT count(convctx.finalize_turn('erased', pg_temp.turn_id('erased', 'e' || i), 'answer e' || i))
  FROM generate_series(1, 3) i;
-- interleaved: single redact_turn calls among live turns (every third, and the eight
-- just below the newest), a corrected turn and open turns among them
SELECT pg_temp.turns('interleaved', 'i', 40);
SELECT convctx.replace_turn('interleaved', pg_temp.turn_id('interleaved', 'i5'), 'corrected') IS NOT NULL AS replaced;
SELECT count(*) FILTER (WHERE convctx.redact_turn('interleaved', pg_temp.turn_id('interleaved', 'i' || i)))
  FROM generate_series(1, 40) i WHERE i % 3 = 0 OR i BETWEEN 32 AND 39 OR i = 5;
-- old: live turns below a run of 300 turns redacted one by one (300 generations)
SELECT pg_temp.turns('old', 'o', 5, 100);
SELECT pg_temp.turns('old', 'x', 300, 100);
SELECT count(*) FILTER (WHERE convctx.redact_turn('old', pg_temp.turn_id('old', 'x' || i)))
  FROM generate_series(1, 300) i;
SELECT redactions FROM convctx.session WHERE session_id = 'old';
-- small twins of prefix and few for the cost check: the same live turns above 30 tombstones
SELECT pg_temp.history('prefix-small', 30);
SELECT convctx.redact_session('prefix-small');
SELECT pg_temp.turns('prefix-small', 'p', 20);
SELECT convctx.replace_turn('prefix-small', pg_temp.turn_id('prefix-small', 'p18'), 'corrected') IS NOT NULL AS replaced;
SELECT convctx.replace_turn('prefix-small', pg_temp.turn_id('prefix-small', 'p18'), 'corrected again') IS NOT NULL AS replaced;
SELECT convctx.start_turn('prefix-small', 'p-open', 'still open') IS NOT NULL AS started;
SELECT pg_temp.history('few-small', 30);
SELECT convctx.redact_session('few-small');
SELECT pg_temp.turns('few-small', 'w', 3, 3);

-- what each session holds
SELECT session_id, count(*) AS versions, count(*) FILTER (WHERE deleted_at IS NOT NULL) AS tombstones,
       count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS live,
       count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL AND finalized_at IS NOT NULL) AS answered
  FROM convctx.turn GROUP BY session_id ORDER BY session_id;
-- the session rows count them exactly (the reads below rely on it)
SELECT s.session_id, s.live_turns = count(t.*) AS live_turns_exact,
       s.live_answers = count(t.finalized_at) AS live_answers_exact
  FROM convctx.session s LEFT JOIN pg_temp.live t ON t.session_id = s.session_id
 GROUP BY s.session_id, s.live_turns, s.live_answers ORDER BY s.session_id;

------------------------------------------------------------------------------
-- every read returns exactly what plain SQL over the turns returns
------------------------------------------------------------------------------
SELECT s AS session, c.* FROM unnest(ARRAY['fresh', 'prefix', 'few', 'only', 'erased', 'interleaved', 'old',
                                           'prefix-small', 'few-small', 'no-such-session']) s,
       pg_temp.check(s) c ORDER BY s, c.read;
-- the same through recent_turns' SQL query, taken when the chronology index cannot be
-- read directly (here: another collation on a key column)
BEGIN;
DROP INDEX convctx.turn_chronology;
CREATE INDEX turn_chronology ON convctx.turn (tenant_id COLLATE "POSIX", session_id, turn_no);
SELECT s AS session, bool_and(pg_temp.got_recent(s, n) = pg_temp.ref_recent(s, n)) AS agrees
  FROM unnest(ARRAY['fresh', 'prefix', 'few', 'only', 'erased', 'interleaved', 'old']) s,
       unnest(ARRAY[1, 3, 10, 50]) n
 GROUP BY s ORDER BY s;
ROLLBACK;

------------------------------------------------------------------------------
-- cost: the index entries of convctx.turn that one read goes through, counted by the
-- statistics of this transaction (no timing, no flush); 30 tombstones or 10^4 below
-- the live turns read the same, and a session of tombstones only reads none
------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.entries(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint;
BEGIN
    SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) INTO before
      FROM pg_index WHERE indrelid = 'convctx.turn'::regclass;
    EXECUTE q;
    RETURN (SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid))
              FROM pg_index WHERE indrelid = 'convctx.turn'::regclass) - before;
END $$;
CREATE FUNCTION pg_temp.costs(s text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT ARRAY[pg_temp.entries(format('SELECT count(*) FROM convctx.recent_turns(%L, 10)', s)),
                 pg_temp.entries(format('SELECT convctx.recent_turns_json(%L, 3)', s)),
                 pg_temp.entries(format('SELECT convctx.conversation_state(%L, 10)', s)),
                 pg_temp.entries(format('SELECT convctx.context_history(%L, 5)', s)),
                 pg_temp.entries(format('SELECT convctx.is_followup(%L, %L)', 'and that?', s))];
$$;
-- warm the plans first, so that no catalog read is counted
SELECT cardinality(pg_temp.costs('fresh')) AS reads;
SELECT pg_temp.costs('prefix') = pg_temp.costs('prefix-small') AS prefix_same,
       pg_temp.costs('few') = pg_temp.costs('few-small') AS few_same,
       (SELECT max(c) FROM unnest(pg_temp.costs('prefix')) c) <= 40 AS prefix_bounded,
       (SELECT max(c) FROM unnest(pg_temp.costs('few')) c) <= 20 AS few_bounded,
       (SELECT max(c) FROM unnest(pg_temp.costs('only')) c) = 0 AS only_reads_none;
-- single redactions among the live turns are still stepped over: the cost of a read then
-- follows the tombstones newer than the oldest turn it returns (old: its 5 live turns lie
-- below 300 tombstones)
SELECT (pg_temp.costs('old'))[1] >= 300 AS old_steps_over_tombstones;
