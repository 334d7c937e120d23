-- The conversation browser (0.5.0): list_conversations, set_session_title,
-- conversation_turns, replay_conversation; tenant-scoped, app role.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS browser_app, browser_admin;
RESET client_min_messages;
CREATE ROLE browser_app IN ROLE convctx_app;
CREATE ROLE browser_admin IN ROLE convctx_admin;
SELECT convctx.bind_role_tenant('browser_app', 'acme'), convctx.bind_role_tenant('browser_admin', 'acme');
SET TimeZone = 'UTC';

-- acme: u1 has s1 (three turns, the second corrected, the third with a
-- citation), s2 (anonymous first, linked later), s3 (its first question
-- redacted); globex has sessions and an identity of the same names.
SET ROLE browser_app;
SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', E'  How is VAT\n computed   on used cars?  ', identity_id => 'u1'), 'On the margin.') IS NOT NULL AS t;
SELECT convctx.start_turn('s1', 'r2', 'And vans?', identity_id => 'u1') AS t2 \gset
SELECT convctx.finalize_turn('s1', :'t2', 'Vans too.');
SELECT convctx.replace_turn('s1', :'t2', 'Vans too, corrected.') IS NOT NULL AS corrected;
SELECT convctx.start_turn('s1', 'r3', 'Which rate?', identity_id => 'u1') AS t3 \gset
SELECT convctx.finalize_turn('s1', :'t3', 'The standard rate [1].');
SELECT convctx.record_retrieval('s1', :'t3', '[{"id": "c1", "text": "Standard rate 23%"}]', '[{"id": "c1"}]');
SELECT convctx.start_turn('s2', 'r1', 'anonymous first') IS NOT NULL AS t;
SELECT convctx.link_session('u1', 's2');
SELECT convctx.start_turn('s3', 'r1', 'my secret first question', identity_id => 'u1') AS t4 \gset
SELECT convctx.finalize_turn('s3', :'t4', 'an answer');
SELECT convctx.start_turn('s3', 'r2', 'second question', identity_id => 'u1') IS NOT NULL AS t;
RESET ROLE;
SET convctx.tenant = 'globex';
SELECT convctx.start_turn('s1', 'r1', 'globex s1', identity_id => 'u1') IS NOT NULL AS t;
SELECT convctx.start_turn('g9', 'r1', 'globex only', identity_id => 'u1') IS NOT NULL AS t;
RESET convctx.tenant;
-- distinct activity times, s1 newest
UPDATE convctx.session SET last_activity_at = '2026-01-01 10:00:00+00'::timestamptz
    + CASE session_id WHEN 's1' THEN interval '3 hours' WHEN 's2' THEN interval '2 hours' ELSE interval '1 hour' END
 WHERE tenant_id = 'acme';

SET ROLE browser_app;
-- the sidebar: newest activity first, titles from the first live question
SELECT session_id, title, title_is_default, last_activity_at, live_turns, linked_later
FROM convctx.list_conversations('u1');
-- the default title is the same in the list and in a replay: white space
-- folded, 80 characters at most, no space at either end
SELECT convctx.start_turn('long', 'r1', E'\t' || repeat('word ', 15) || E'\n\n  ' || repeat('x', 20) || ' tail', identity_id => 'u5') IS NOT NULL AS t;
SELECT l.session_id, l.title, length(l.title) AS chars,
       l.title = convctx.replay_conversation(l.session_id) ->> 'title' AS same_in_replay
FROM convctx.list_conversations('u1') l
UNION ALL
SELECT l.session_id, l.title, length(l.title), l.title = convctx.replay_conversation(l.session_id) ->> 'title'
FROM convctx.list_conversations('u5') l;
-- an app title replaces the default; NULL gives it back
SELECT convctx.set_session_title('s2', 'Used cars');
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u1') WHERE session_id = 's2';
SELECT convctx.set_session_title('s2', NULL);
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u1') WHERE session_id = 's2';
SELECT convctx.set_session_title('s2', 'Used cars');
-- keyset pages: one at a time, by the cursor of the last row
SELECT session_id FROM convctx.list_conversations('u1', page_size => 1);
SELECT session_id FROM convctx.list_conversations('u1',
    (SELECT cursor FROM convctx.list_conversations('u1', page_size => 1)), 1);
SELECT session_id FROM convctx.list_conversations('u1',
    (SELECT cursor FROM convctx.list_conversations('u1', page_size => 2) OFFSET 1), 5);
SELECT count(*) AS after_last FROM convctx.list_conversations('u1',
    (SELECT cursor FROM convctx.list_conversations('u1') OFFSET 2));
-- another identity, an unknown one: nothing
SELECT count(*) FROM convctx.list_conversations('u2');

-- scrolling through a conversation: the newest page, back, forward
SELECT turn_no, request_id, record_version, is_current, question, answer, redacted
FROM convctx.conversation_turns('s1', page_size => 2);
SELECT turn_no, question FROM convctx.conversation_turns('s1', before_turn_no => 2, page_size => 2);
SELECT turn_no, question FROM convctx.conversation_turns('s1', after_turn_no => 1);
SELECT turn_no, record_version, is_current, answer FROM convctx.conversation_turns('s1', include_versions => true);
SELECT count(*) AS past_the_end FROM convctx.conversation_turns('s1', after_turn_no => 3);
SELECT count(*) AS no_such_session FROM convctx.conversation_turns('nope');

-- the whole conversation as the app renders it
SELECT jsonb_pretty(convctx.replay_conversation('s1') - 'created_at' - 'last_activity_at'
    #- '{turns,0,created_at}' #- '{turns,0,finalized_at}' #- '{turns,1,created_at}' #- '{turns,1,finalized_at}'
    #- '{turns,1,corrections,0,finalized_at}' #- '{turns,2,created_at}' #- '{turns,2,finalized_at}');
SELECT convctx.replay_conversation('nope') IS NULL AS none;
\set VERBOSITY default
SELECT convctx.replay_conversation('s1', 100);
\set VERBOSITY terse
RESET ROLE;

-- redaction: the redacted question is no longer a title, its turn a tombstone
SET ROLE browser_admin;
SELECT convctx.redact_turn('s3', :'t4');
RESET ROLE;
SET ROLE browser_app;
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u1') WHERE session_id = 's3';
SELECT turn_no, question, answer, redacted FROM convctx.conversation_turns('s3');
SELECT (convctx.replay_conversation('s3') -> 'turns' -> 0) - 'created_at' - 'finalized_at' - 'redacted_at' AS tombstone;
RESET ROLE;
-- redact_session and erase_identity take an app's title too
SET ROLE browser_admin;
SELECT convctx.redact_session('s2');
RESET ROLE;
SET convctx.tenant = 'acme';
SELECT title FROM convctx.session WHERE tenant_id = 'acme' AND session_id = 's2';
SELECT convctx.set_session_title('s1', 'Cars and vans');
RESET convctx.tenant;
SET ROLE browser_admin;
SELECT convctx.erase_identity('u1') > 0 AS erased;
RESET ROLE;
SELECT count(*) AS titles_left FROM convctx.session WHERE tenant_id = 'acme' AND title IS NOT NULL;

-- an erased session takes no title; erasure's stand-in is nobody's list
SET ROLE browser_app;
SELECT convctx.set_session_title('s1', 'a late title');
SELECT * FROM convctx.list_conversations('erased');
SELECT * FROM convctx.list_conversations('erased:0123abcd');
RESET ROLE;
-- redact_turn removes an app's title too: it may quote the turn (this one does), and nothing
-- tells; the list and the replay show the default, the first live question, and the audit
-- row says that a title was cleared
SET ROLE browser_app;
SELECT convctx.start_turn('t1', 'r1', 'to be redacted', identity_id => 'u6') AS t6 \gset
SELECT convctx.start_turn('t1', 'r2', 'a kept question', identity_id => 'u6') AS t7 \gset
SELECT convctx.set_session_title('t1', 'About: to be redacted');
RESET ROLE;
SET ROLE browser_admin;
SELECT convctx.redact_turn('t1', :'t6');
RESET ROLE;
SET ROLE browser_app;
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u6');
SELECT convctx.replay_conversation('t1') ->> 'title' AS replay_title;
SELECT strpos(convctx.replay_conversation('t1')::text, 'to be redacted') = 0 AS no_redacted_text;
RESET ROLE;
-- a turn redacted already still takes the title (an app may have quoted it since)
SET ROLE browser_app;
SELECT convctx.set_session_title('t1', 'still about: to be redacted');
RESET ROLE;
SET ROLE browser_admin;
SELECT convctx.redact_turn('t1', :'t6');
SELECT convctx.redact_turn('t1', :'t7');
RESET ROLE;
-- redact_session removes an app's title also when no turn was left to redact
SET ROLE browser_app;
SELECT convctx.set_session_title('t1', 'a title of it');
RESET ROLE;
SET ROLE browser_admin;
SELECT convctx.redact_session('t1') AS redacted_turns;
RESET ROLE;
SELECT action, details - 'turn_id' AS details FROM convctx.audit_log
WHERE tenant_id = 'acme' AND session_id = 't1' ORDER BY logged_at;
SET ROLE browser_app;
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u6');
-- a question that starts with much white space still gives a title
SELECT convctx.start_turn('t2', 'r1', repeat(' ', 400) || 'late words', identity_id => 'u7') IS NOT NULL AS t;
SELECT session_id, title, title_is_default FROM convctx.list_conversations('u7');
RESET ROLE;

-- the other tenant, with the same session and identity ids, saw none of it
SET convctx.tenant = 'globex';
SELECT session_id, title FROM convctx.list_conversations('u1');
SELECT turn_no, question FROM convctx.conversation_turns('s1');
RESET convctx.tenant;

-- bad arguments
SET ROLE browser_app;
SELECT * FROM convctx.list_conversations(NULL);
SELECT * FROM convctx.list_conversations('');
SELECT * FROM convctx.list_conversations('u1', 'not a cursor');
SELECT * FROM convctx.list_conversations('u1', '99999999999999999999:s1');
SELECT * FROM convctx.list_conversations('u1', '12:');
SELECT * FROM convctx.list_conversations('u1', page_size => 0);
SELECT * FROM convctx.list_conversations('u1', page_size => 1001);
SELECT * FROM convctx.conversation_turns('s1', after_turn_no => 1, before_turn_no => 3);
SELECT * FROM convctx.conversation_turns('s1', page_size => NULL);
SELECT convctx.set_session_title('nope', 'x');
SELECT convctx.set_session_title('s1', '');
SELECT convctx.set_session_title('s1', E' \t ');
SELECT * FROM convctx.list_conversations('u1', '+123:s1');
SELECT * FROM convctx.list_conversations('u1', ' 123:s1');
SELECT convctx.set_session_title('s1', repeat('x', 1025));
SELECT convctx.replay_conversation('s1', 0);
RESET ROLE;
BEGIN READ ONLY;
SET LOCAL convctx.tenant = 'acme';
SELECT convctx.set_session_title('s1', 'x');
ROLLBACK;

SELECT convctx.unbind_role_tenant('browser_app'), convctx.unbind_role_tenant('browser_admin');
DROP ROLE browser_app, browser_admin;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
RESET TimeZone;

-- a replay's statement does not depend on standard_conforming_strings when
-- it is first prepared on a connection
\c
SET convctx.tenant = 'acme';
SELECT convctx.start_turn('scs', 'r1', 'Is this a serious question', identity_id => 'u8') IS NOT NULL AS t;
SET standard_conforming_strings = off;
SELECT convctx.replay_conversation('scs') ->> 'title' AS title;
RESET standard_conforming_strings;
SELECT title FROM convctx.list_conversations('u8');

-- paging through 300 conversations 7 at a time: 200 of them active in
-- the same ten minutes (one bin of the index, read further than a page
-- needs), some at the same microsecond; every conversation once, in the
-- exact order
SELECT count(convctx.start_turn('b' || i, 'r1', 'q' || i, identity_id => 'bulk')) AS started
FROM generate_series(1, 300) i;
UPDATE convctx.session
   SET last_activity_at = CASE WHEN substr(session_id, 2)::int <= 200
                               THEN '2026-02-01 10:00:00+00'::timestamptz + (substr(session_id, 2)::int % 150) * interval '2 seconds'
                               ELSE '2026-02-01 08:00:00+00'::timestamptz - substr(session_id, 2)::int * interval '1 minute' END
 WHERE tenant_id = 'acme' AND identity_id = 'bulk';
CREATE TEMP TABLE walked (pos serial, session_id text);
DO $$
DECLARE
    c text;
    r record;
    n int;
BEGIN
    LOOP
        n := 0;
        FOR r IN SELECT * FROM convctx.list_conversations('bulk', c, 7) LOOP
            INSERT INTO walked (session_id) VALUES (r.session_id);
            c := r.cursor;
            n := n + 1;
        END LOOP;
        EXIT WHEN n < 7;
    END LOOP;
END $$;
SELECT count(*) AS walked, count(DISTINCT session_id) AS distinct_sessions FROM walked;
SELECT count(*) AS out_of_place
FROM walked w
JOIN (SELECT session_id, row_number() OVER (ORDER BY last_activity_at DESC, session_id) AS pos
        FROM convctx.session WHERE tenant_id = 'acme' AND identity_id = 'bulk') e USING (session_id)
WHERE w.pos <> e.pos;
-- a session active at infinity (written by hand: the API stamps real
-- times) still pages: its cursor reads back
UPDATE convctx.session SET last_activity_at = 'infinity' WHERE tenant_id = 'acme' AND session_id = 'b7';
SELECT session_id, last_activity_at FROM convctx.list_conversations('bulk', page_size => 1);
SELECT session_id FROM convctx.list_conversations('bulk',
    (SELECT cursor FROM convctx.list_conversations('bulk', page_size => 1)), 1);

-- a page of current versions comes from the index directly: the same rows
-- as the SQL query on the table, for every bound and page size in both
-- directions, in a session with corrected answers (twice), tombstones,
-- open turns and a newest turn still open
SELECT count(convctx.finalize_turn('eq', convctx.start_turn('eq', 'r' || i, 'q' || i), 'a' || i)) AS turns
FROM generate_series(1, 30) i;
SELECT count(convctx.replace_turn('eq', t.turn_id, 'corrected ' || t.turn_no)) AS corrected
FROM convctx.turn t WHERE t.tenant_id = 'acme' AND t.session_id = 'eq' AND t.turn_no % 7 = 3;
SELECT count(convctx.replace_turn('eq', t.turn_id, 'again ' || t.turn_no)) AS corrected_again
FROM convctx.turn t WHERE t.tenant_id = 'acme' AND t.session_id = 'eq' AND t.turn_no = 10
  AND t.replaced_by_turn_id IS NULL;
SELECT count(convctx.redact_turn('eq', t.turn_id)) AS redacted
FROM convctx.turn t WHERE t.tenant_id = 'acme' AND t.session_id = 'eq' AND t.turn_no IN (1, 2, 17, 24)
  AND t.replaced_by_turn_id IS NULL;
SELECT count(convctx.start_turn('eq', 'open' || i, 'open ' || i)) AS open FROM generate_series(1, 3) i;
WITH cases AS (
    SELECT b, p, fwd FROM generate_series(-2, 35) b, unnest(ARRAY[1, 2, 3, 7, 40]) p, unnest(ARRAY[true, false]) fwd
    UNION ALL SELECT NULL, p, false FROM unnest(ARRAY[1, 2, 3, 7, 40]) p),
got AS (
    SELECT c.b, c.p, c.fwd,
           (SELECT array_agg(row(f.turn_no, f.turn_id, f.request_id, f.record_version, f.is_current, f.question,
                                 f.answer, f.created_at, f.finalized_at, f.redacted, f.redacted_at)::text)
              FROM convctx.conversation_turns('eq', CASE WHEN c.fwd THEN c.b END,
                                              CASE WHEN NOT c.fwd THEN c.b END, c.p) f) AS rows
      FROM cases c),
expected AS (
    SELECT c.b, c.p, c.fwd,
           (SELECT array_agg(row(t.turn_no, t.turn_id, t.request_id, t.record_version, true, t.question_neutral,
                                 t.answer_neutral, t.created_at, t.finalized_at, t.deleted_at IS NOT NULL,
                                 t.deleted_at)::text ORDER BY t.turn_no)
              FROM (SELECT * FROM convctx.turn t
                     WHERE t.tenant_id = 'acme' AND t.session_id = 'eq' AND t.replaced_by_turn_id IS NULL
                       AND CASE WHEN c.fwd THEN t.turn_no > c.b ELSE t.turn_no < coalesce(c.b, 9223372036854775807) END
                     ORDER BY CASE WHEN c.fwd THEN t.turn_no ELSE -t.turn_no END LIMIT c.p) t) AS rows
      FROM cases c)
SELECT count(*) AS cases, count(*) FILTER (WHERE g.rows IS DISTINCT FROM e.rows) AS different,
       count(*) FILTER (WHERE g.rows IS NOT NULL) AS with_rows
FROM got g JOIN expected e ON g.b IS NOT DISTINCT FROM e.b AND g.p = e.p AND g.fwd = e.fwd;
-- the session row only sizes the read: with a last_turn_no that lags
-- behind, the page is still the SQL query's
UPDATE convctx.session SET last_turn_no = 2 WHERE tenant_id = 'acme' AND session_id = 'eq';
SELECT array_agg(turn_no ORDER BY turn_no) AS after_5 FROM convctx.conversation_turns('eq', 5, NULL, 4);
SELECT array_agg(turn_no ORDER BY turn_no) AS newest FROM convctx.conversation_turns('eq', page_size => 3);
UPDATE convctx.session SET last_turn_no = 33 WHERE tenant_id = 'acme' AND session_id = 'eq';
-- far bounds, and a session that does not exist
SELECT count(*) AS rows FROM convctx.conversation_turns('eq', -9223372036854775808, NULL, 5);
SELECT count(*) AS rows FROM convctx.conversation_turns('eq', 9223372036854775807, NULL, 5);
SELECT count(*) AS rows FROM convctx.conversation_turns('eq', NULL, 9223372036854775807, 5);
SELECT count(*) AS rows FROM convctx.conversation_turns('eq', NULL, -9223372036854775808, 5);
SELECT count(*) AS rows FROM convctx.conversation_turns('no such session', 0);

-- The default title is stored in the session row (the start of the first
-- live question, first_question), and so is linked_later, so that a page
-- of the list reads no other table. Every writer that redacts or deletes a
-- turn sets it again: stale_titles counts the sessions whose row says
-- otherwise than their turns and link.
CREATE TEMP VIEW stale_titles AS
SELECT count(*) AS stale FROM convctx.session s
WHERE s.first_question IS DISTINCT FROM
        (SELECT left(ltrim(q.question_neutral, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)), 320)
           FROM convctx.turn q
          WHERE q.tenant_id = s.tenant_id AND q.session_id = s.session_id
            AND q.deleted_at IS NULL AND q.replaced_by_turn_id IS NULL
          ORDER BY q.turn_no LIMIT 1)
   OR s.linked_later IS DISTINCT FROM
        coalesce((SELECT l.linked_at > s.created_at FROM convctx.session_link l
                   WHERE l.tenant_id = s.tenant_id AND l.session_id = s.session_id), false);
CREATE FUNCTION pg_temp.shown(sid text) RETURNS TABLE (title text, in_replay text, stored text)
LANGUAGE sql AS $$
    SELECT (SELECT l.title FROM convctx.session s, convctx.list_conversations(s.identity_id, NULL, 1000) l
             WHERE s.tenant_id = 'acme' AND s.session_id = sid AND l.session_id = sid
               AND s.identity_id NOT LIKE 'erased%'),
           convctx.replay_conversation(sid) ->> 'title',
           (SELECT first_question FROM convctx.session WHERE tenant_id = 'acme' AND session_id = sid)
$$;
SELECT * FROM stale_titles;
SELECT count(convctx.finalize_turn('ti1', convctx.start_turn('ti1', 'r' || i, E'\n first  q' || i, identity_id => 'tu'), 'a' || i))
       AS turns FROM generate_series(1, 3) i;
SELECT * FROM pg_temp.shown('ti1');
-- redact_turn: a later turn leaves the title, the first gives it to the next live one
SELECT convctx.redact_turn('ti1', turn_id) FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'ti1' AND turn_no = 3;
SELECT * FROM pg_temp.shown('ti1');
SELECT convctx.redact_turn('ti1', turn_id) FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'ti1' AND turn_no = 1;
SELECT * FROM pg_temp.shown('ti1');
-- a corrected answer keeps its question
SELECT convctx.replace_turn('ti1', turn_id, 'a2 corrected') IS NOT NULL AS corrected
FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'ti1' AND turn_no = 2;
SELECT * FROM pg_temp.shown('ti1');
SELECT convctx.redact_turn('ti1', turn_id) FROM convctx.turn
WHERE tenant_id = 'acme' AND session_id = 'ti1' AND turn_no = 2 AND replaced_by_turn_id IS NULL;
SELECT * FROM pg_temp.shown('ti1');
-- a new turn in a session without a live turn is its first question again
SELECT convctx.start_turn('ti1', 'r4', 'after every redaction') IS NOT NULL AS t;
SELECT * FROM pg_temp.shown('ti1');
-- a repeated request is no new turn: nothing changes
SELECT convctx.start_turn('ti1', 'r4', 'after every redaction, again') IS NOT NULL AS t;
SELECT * FROM pg_temp.shown('ti1');
-- redact_session: no title left
SELECT count(convctx.start_turn('ti2', 'r' || i, 'session q' || i, identity_id => 'tu')) FROM generate_series(1, 2) i;
SELECT * FROM pg_temp.shown('ti2');
SELECT convctx.redact_session('ti2');
SELECT * FROM pg_temp.shown('ti2');
-- erase_identity: none either
SELECT count(convctx.start_turn('ti3', 'r' || i, 'erased q' || i, identity_id => 'tu-erased')) FROM generate_series(1, 2) i;
SELECT * FROM pg_temp.shown('ti3');
SELECT convctx.erase_identity('tu-erased') > 0 AS erased;
SELECT * FROM pg_temp.shown('ti3');
-- the anonymous cap drops the oldest turns: the oldest one kept is the title
SET convctx.max_session_turns = 3;
SELECT count(convctx.start_turn('ti4', 'r' || i, 'capped q' || i)) FROM generate_series(1, 5) i;
SELECT convctx.link_session('tu', 'ti4');
SELECT * FROM pg_temp.shown('ti4');
SELECT session_id, title, linked_later FROM convctx.list_conversations('tu') WHERE session_id = 'ti4';
RESET convctx.max_session_turns;
-- purge: turn retention deletes the oldest turns of a session
SELECT count(convctx.start_turn('ti5', 'r' || i, 'kept q' || i, identity_id => 'tu')) FROM generate_series(1, 3) i;
UPDATE convctx.turn SET created_at = now() - interval '2 hours'
 WHERE tenant_id = 'acme' AND session_id = 'ti5' AND turn_no < 3;
SET convctx.turn_retention = '1h';
SELECT convctx.purge() ->> 'expired_turns' AS expired_turns;
RESET convctx.turn_retention;
SELECT * FROM pg_temp.shown('ti5');
-- and an expired anonymous session goes a batch at a time: what is left of
-- it between two passes has the title of its first live turn left
SELECT count(convctx.start_turn('ti6', 'r' || i, 'expiring q' || i)) FROM generate_series(1, 5) i;
UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE tenant_id = 'acme' AND session_id = 'ti6';
SELECT convctx.purge(2) - 'contexts' AS purged;
SELECT array_agg(turn_no ORDER BY turn_no) AS left, (SELECT stored FROM pg_temp.shown('ti6')) AS stored
FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'ti6';
SELECT * FROM stale_titles;
SELECT convctx.purge(2) - 'contexts' AS purged;
SELECT convctx.purge(2) - 'contexts' AS purged;
SELECT count(*) AS ti6_left FROM convctx.session WHERE tenant_id = 'acme' AND session_id = 'ti6';
-- import writes both from what it stored: a session linked after it was
-- created, its first turn a tombstone
SELECT * FROM convctx.import_records(ARRAY[
  '{"type":"session","session_id":"ti7","identity_id":"tu","created_at":"2026-01-01T00:00:00Z","last_activity_at":"2026-01-02T00:00:00Z","linked_at":"2026-01-01T12:00:00Z"}',
  '{"type":"turn","session_id":"ti7","turn_id":"00000000-0000-4000-8000-0000000000a1","turn_no":1,"request_id":"r1","created_at":"2026-01-01T00:00:00Z","deleted_at":"2026-01-01T01:00:00Z"}',
  '{"type":"turn","session_id":"ti7","turn_id":"00000000-0000-4000-8000-0000000000a2","turn_no":2,"request_id":"r2","created_at":"2026-01-01T02:00:00Z","question_neutral":"imported q2"}'])
WHERE imported > 0;
SELECT session_id, title, linked_later FROM convctx.list_conversations('tu') WHERE session_id = 'ti7';
SELECT * FROM stale_titles;
RESET convctx.tenant;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
