-- The tenant "bench": :turns finalized turns in sessions of 100, each linked
-- to an identity, with 200-byte questions and 1,000-byte answers, written
-- as convctx stores them (as the owner, in bulk) and vacuumed. One
-- transaction, one time: a session's last activity is never before its
-- turns (import refuses such a session).
CREATE EXTENSION convctx;
BEGIN;
INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers,
                             created_at, last_activity_at)
SELECT 'bench', 's' || s, 'u' || s, 100, 100, 100, now(), now()
  FROM generate_series(1, (:turns + 99) / 100) s;
INSERT INTO convctx.session_link (tenant_id, session_id, identity_id)
SELECT 'bench', 's' || s, 'u' || s FROM generate_series(1, (:turns + 99) / 100) s;
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
                          created_at, finalized_at, question_neutral, answer_neutral, metadata)
SELECT 'bench', 's' || ((i - 1) / 100 + 1), gen_random_uuid(), (i - 1) % 100 + 1, 'r' || i,
       'u' || ((i - 1) / 100 + 1), now(), now(), rpad('question ' || i || ' ', 200, 'q'),
       rpad('answer ' || i || ' ', 1000, 'a'), '{"channel": "web"}'
  FROM generate_series(1, :turns) i;
COMMIT;
VACUUM ANALYZE convctx.turn;
VACUUM ANALYZE convctx.session;
CHECKPOINT;
