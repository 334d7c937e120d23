-- Two tenants, written as convctx stores them (as the owner, in bulk; the
-- session row with what start_turn stores there: the start of its first
-- question, and whether it was linked later):
--   small: 10^3 turns; identity "few" with 20 one-turn sessions (one
--          page), session "short1" of 20 turns (one page), the rest in sessions of 96.
--   big:   :turns turns; identity "many" with 100,000 one-turn sessions (a
--          minute of activity apart), session "long1" of 10,000 turns, the
--          rest in sessions of 100 turns of other identities.
-- Short texts: the pages, not the bytes, are measured. Then the bare
-- tables of the baseline: the same rows as a hand-written app would keep
-- them (the title and whether the session was linked later stored in the
-- row), each with the best index for its keyset query.
CREATE EXTENSION convctx;

CREATE FUNCTION pg_temp.fill(tenant text, prefix text, sessions int, per_session int, identity text,
                             minutes_apart boolean) RETURNS void LANGUAGE sql AS $$
    INSERT INTO convctx.session (tenant_id, session_id, identity_id, created_at, last_activity_at,
                                 last_turn_no, live_turns, live_answers, first_question, linked_later)
    SELECT tenant, prefix || s, coalesce(identity, 'other' || s),
           now() - s * interval '1 minute' - interval '1 day',
           CASE WHEN minutes_apart THEN now() - s * interval '1 minute' ELSE now() - interval '1 day' END,
           per_session, per_session, per_session, 'question 1 of ' || s, false
      FROM generate_series(1, sessions) s;
    INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at)
    SELECT tenant, prefix || s, coalesce(identity, 'other' || s), now() - s * interval '1 minute' - interval '1 day'
      FROM generate_series(1, sessions) s;
    INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                              created_at, finalized_at, question_neutral, answer_neutral)
    SELECT tenant, prefix || s, gen_random_uuid(), n, 'r' || n, coalesce(identity, 'other' || s),
           now() - interval '1 day', now() - interval '1 day', 'question ' || n || ' of ' || s, 'answer ' || n
      FROM generate_series(1, sessions) s, generate_series(1, per_session) n;
$$;

SELECT pg_temp.fill('small', 'few', 20, 1, 'few', true);
SELECT pg_temp.fill('small', 'short', 1, 20, 'few-short', false);
SELECT pg_temp.fill('small', 'fill', 10, 96, NULL, false);
SELECT pg_temp.fill('big', 'many', 100000, 1, 'many', true);
SELECT pg_temp.fill('big', 'long', 1, 10000, 'long', false);
SELECT pg_temp.fill('big', 'fill', greatest((:turns - 110000) / 100, 0), 100, NULL, false);

-- Every session and turn of the large tenant, so that the bare indexes
-- are as deep as convctx's; a turn page returns what conversation_turns
-- tells an app (ids, version, redaction), not only the texts.
CREATE TABLE bare_session AS
    SELECT s.identity_id, s.last_activity_at, s.session_id, s.created_at, s.live_turns,
           s.first_question AS title, s.linked_later
      FROM convctx.session s WHERE tenant_id = 'big';
CREATE INDEX ON bare_session (identity_id, last_activity_at DESC, session_id);
CREATE TABLE bare_turn AS
    SELECT session_id, turn_no, turn_id, request_id, record_version, question_neutral,
           answer_neutral, created_at, finalized_at, deleted_at
      FROM convctx.turn WHERE tenant_id = 'big';
CREATE INDEX ON bare_turn (session_id, turn_no);

VACUUM ANALYZE;
CHECKPOINT;
