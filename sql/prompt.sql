-- Prompt assembly: conversation state and summaries, unified citation context,
-- follow-up detection, clarification reconstruction.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context, convctx.audit_log,
         convctx.session_summary, convctx.turn_retrieval, convctx.clarification;
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
\i test/helpers.sql
-- conversation_state without its clock values
CREATE FUNCTION pg_temp.state(s text, w integer DEFAULT 10) RETURNS jsonb LANGUAGE sql AS $$
    SELECT st || jsonb_build_object('recent_messages',
        (SELECT coalesce(jsonb_agg(m - 'timestamp' || jsonb_build_object('has_timestamp', m ? 'timestamp')), '[]')
         FROM jsonb_array_elements(st -> 'recent_messages') m))
    FROM convctx.conversation_state(s, w) st
$$;
-- A turn's id and a session's redaction generation, for the calls that take them. In
-- functions of their own, so that the statement of a call reads no table of convctx: on
-- Citus, a call inside a query of those tables runs on the node of their shard.
CREATE FUNCTION pg_temp.turn_of(s text, r text) RETURNS uuid LANGUAGE plpgsql AS $$
BEGIN RETURN (SELECT turn_id FROM convctx.turn WHERE session_id = s AND request_id = r); END $$;
CREATE FUNCTION pg_temp.redactions_of(s text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN RETURN (SELECT redactions FROM convctx.session WHERE session_id = s); END $$;

------------------------------------------------------------------------------
-- conversation_state (a case from the apps it replaces: first message, summary over threshold)
------------------------------------------------------------------------------
-- an unknown session is the empty state, not an error
SELECT jsonb_pretty(convctx.conversation_state('conv-1'));
-- a started, unfinished first turn: still the first message
INSERT INTO ids SELECT 't1', convctx.start_turn('conv-1', 'r1', 'I am looking for vegan restaurants');
SELECT jsonb_pretty(pg_temp.state('conv-1'));
SELECT convctx.finalize_turn('conv-1', (SELECT id FROM ids WHERE name = 't1'), 'Try Green Table on Main Street.');
SELECT convctx.context_add('conv-1', ARRAY['venue:green-table', 'cuisine:vegan']) IS NOT NULL;
SELECT convctx.context_add('conv-1', ARRAY['venue:green-table']) IS NOT NULL;
SELECT jsonb_pretty(pg_temp.state('conv-1'));
-- timestamps are ISO 8601
SELECT m ->> 'timestamp' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d' AS iso
FROM jsonb_array_elements(convctx.conversation_state('conv-1') -> 'recent_messages') m;
-- 10 more turns: 22 messages, the last 10 in the window, 12 older ones
SELECT count(convctx.finalize_turn('conv-1', convctx.start_turn('conv-1', 'q' || i, 'question ' || i), 'answer ' || i))
FROM generate_series(2, 11) i;
SELECT s -> 'message_count' AS messages, s -> 'is_first_message' AS first, s -> 'needs_summary' AS needs_summary,
       jsonb_array_length(s -> 'recent_messages') AS window,
       s -> 'recent_messages' -> 0 ->> 'text' AS oldest_shown, s -> 'recent_messages' -> 9 ->> 'text' AS newest_shown
FROM convctx.conversation_state('conv-1') s;
-- the window can split a turn: its answer shown, its question not
SELECT jsonb_path_query_array(pg_temp.state('conv-1', 3), '$.recent_messages[*].role') AS roles;
-- more than convctx.summary_threshold (15) unsummarized messages older than the window
SELECT count(convctx.finalize_turn('conv-1', convctx.start_turn('conv-1', 'q' || i, 'question ' || i), 'answer ' || i))
FROM generate_series(12, 14) i;
SELECT (s -> 'message_count')::int - 10 AS older, s -> 'needs_summary' AS needs_summary
FROM convctx.conversation_state('conv-1') s;
SET convctx.summary_threshold = 20;
SELECT convctx.conversation_state('conv-1') -> 'needs_summary' AS needs_summary;
RESET convctx.summary_threshold;
-- what to summarize: the turns wholly older than the window, oldest first
SELECT question_neutral, answer_neutral FROM convctx.turns_to_summarize('conv-1');
SELECT convctx.set_summary('conv-1', 'The user wants vegan food; Green Table was suggested.',
                           (SELECT turn_id FROM convctx.turns_to_summarize('conv-1') ORDER BY created_at DESC, question_neutral DESC LIMIT 1),
                           (SELECT redactions FROM convctx.turns_to_summarize('conv-1') LIMIT 1));
SELECT s -> 'summary' AS summary, s -> 'needs_summary' AS needs_summary FROM convctx.conversation_state('conv-1') s;
SELECT count(*) AS left_to_summarize FROM convctx.turns_to_summarize('conv-1');
SELECT count(*) AS with_window_2 FROM convctx.turns_to_summarize('conv-1', 2);
-- a newer summary replaces the older one
SELECT convctx.set_summary('conv-1', 'Shorter summary.', pg_temp.turn_of('conv-1', 'q3'), pg_temp.redactions_of('conv-1'));
SELECT summary, through_turn_no FROM convctx.session_summary;
-- errors
SELECT convctx.conversation_state(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.conversation_state('conv-1', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.set_summary('conv-1', NULL, (SELECT id FROM ids WHERE name = 't1'), pg_temp.redactions_of('conv-1'));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.set_summary('conv-1', 'x', NULL, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.set_summary('conv-1', 'x', '00000000-0000-4000-8000-000000000000', pg_temp.redactions_of('conv-1'));
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.turns_to_summarize('conv-1', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT summary, through_turn_no FROM convctx.session_summary;

------------------------------------------------------------------------------
-- render_conversation_state (the planner context of that case)
------------------------------------------------------------------------------
SELECT convctx.render_conversation_state(convctx.conversation_state('conv-1'));
SELECT convctx.render_conversation_state(convctx.conversation_state('no-such-conversation'));
SELECT convctx.render_conversation_state(jsonb_build_object(
    'recent_messages', jsonb_build_array(jsonb_build_object('role', 'user', 'text', repeat('é', 250))),
    'referenced_entities', (SELECT jsonb_agg('e' || i) FROM generate_series(1, 12) i)));
SELECT convctx.render_conversation_state('{}') = '' AS empty;
SELECT convctx.render_conversation_state(NULL) IS NULL AS null_in_null_out;
SELECT convctx.render_conversation_state('[]');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"recent_messages": {}}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"recent_messages": [{"role": "user", "text": 5}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"recent_messages": ["hi"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"is_first_message": "yes"}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"referenced_entities": [1]}');
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.render_conversation_state('{"summary": ["x"]}');
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- unified citation context (a case from the apps it replaces: citation re-indexing across three turns)
------------------------------------------------------------------------------
INSERT INTO ids SELECT 'l1', convctx.start_turn('law', 'r1', '¿Qué dice la Constitución sobre la vida?');
SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l1'),
    '[{"id": "ce-15", "source": "Constitución Española", "title": "Artículo 15", "text": "Todos tienen derecho a la vida..."},
      {"id": "cp-138", "source": "Código Penal", "title": "Artículo 138", "text": "El que matare a otro..."}]',
    '[{"id": "cp-138"}]');
SELECT convctx.finalize_turn('law', (SELECT id FROM ids WHERE name = 'l1'), 'Art. 15 CE y art. 138 CP.');
INSERT INTO ids SELECT 'l2', convctx.start_turn('law', 'r2', '¿Y la libertad ideológica?');
SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l2'),
    '[{"id": "ce-16", "source": "Constitución Española", "title": "Artículo 16", "text": "Se garantiza la libertad ideológica..."},
      {"id": "ce-20", "source": "Constitución Española", "title": "Artículo 20", "text": "Se reconocen y protegen los derechos..."}]',
    '[{"id": "ce-16"}, {"id": "ce-15"}]');
SELECT convctx.finalize_turn('law', (SELECT id FROM ids WHERE name = 'l2'), 'El art. 16 CE.');
-- citations are stored in full, also those named by id from an earlier turn
SELECT turn_no, jsonb_path_query_array(chunks, '$[*].id') AS chunks, citations FROM convctx.turn_retrieval ORDER BY turn_no;
INSERT INTO ids SELECT 'l3', convctx.start_turn('law', 'r3', '¿Estás seguro?');
-- the third turn sees: all chunks of turn 2, the citations of turn 1, then its own chunks
SELECT jsonb_pretty(convctx.context_history('law', 5,
    '[{"id": "ce-16", "source": "Constitución Española", "title": "Artículo 16", "text": "Se garantiza la libertad ideológica..."},
      {"id": "lec-1", "source": "Ley de Enjuiciamiento Civil", "title": "Artículo 1", "text": "En los procesos civiles..."}]'));
-- without current chunks, and looking back one turn only
SELECT e ->> 'index' AS index, e ->> 'section' AS section, e ->> 'turns_ago' AS turns_ago, e -> 'chunk' ->> 'id' AS id
FROM jsonb_array_elements(convctx.context_history('law')) e;
SELECT e ->> 'index' AS index, e ->> 'section' AS section, e -> 'chunk' ->> 'id' AS id
FROM jsonb_array_elements(convctx.context_history('law', 1)) e;
SELECT convctx.context_history('no-such-conversation');
SELECT convctx.context_history('no-such-conversation', 5, '[]');
-- the text form those apps used, in English and with their Spanish headers
SELECT convctx.render_context_history(convctx.context_history('law', 5,
    '[{"id": "lec-1", "source": "Ley de Enjuiciamiento Civil", "title": "Artículo 1", "text": "En los procesos civiles..."}]'));
SELECT convctx.render_context_history(convctx.context_history('law', 5,
    '[{"id": "lec-1", "source": "Ley de Enjuiciamiento Civil", "title": "Artículo 1", "text": "En los procesos civiles..."}]'),
    '{"immediate": "=== CONTEXTO PREVIO INMEDIATO (de la última respuesta) ===",
      "history": "=== CONTEXTO HISTÓRICO (hace {n} turnos, solo citas usadas) ===",
      "current": "=== CONTEXTO ACTUAL (nuevo para esta consulta) ==="}');
SELECT convctx.render_context_history('[{"section": "current", "chunk": {"id": "x", "text": "no title or source"}}]');
SELECT convctx.render_context_history('[]') = '' AS empty;
-- recording again replaces what was stored
SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l2'), '[{"id": "ce-16", "text": "short"}]');
SELECT turn_no, chunks, citations FROM convctx.turn_retrieval WHERE turn_no = 2;
-- bad shapes: 22023, nothing stored
CREATE TEMP TABLE snapshot AS SELECT * FROM convctx.turn_retrieval;
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), NULL)$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '{}')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[1]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[{"text": "no id"}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[{"id": "", "text": "x"}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[{"id": 7, "text": "x"}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[{"id": "a"}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[{"id": "a", "text": ["x"]}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[]', '{"id": "a"}')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[]', '[{"id": "unknown"}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[]', '[{"id": "ce-16", "extra": 1}]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l3'), '[]', '["ce-16"]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', '00000000-0000-4000-8000-000000000000', '[]')$$);
SELECT pg_temp.try($$SELECT convctx.record_retrieval('other', (SELECT id FROM ids WHERE name = 'l3'), '[]')$$);
SELECT pg_temp.try($$SELECT convctx.context_history('law', 0)$$);
SELECT pg_temp.try($$SELECT convctx.context_history('law', 5, '{"id": "x"}')$$);
SELECT pg_temp.try($$SELECT convctx.context_history('law', 5, '[{"id": "x"}]')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('{}')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[{"section": "later", "chunk": {"id": "x", "text": "y"}}]')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[{"section": "current"}]')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[{"section": "current", "index": "1", "chunk": {"id": "x", "text": "y"}}]')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[]', '{"older": "x"}')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[]', '{"current": 1}')$$);
SELECT pg_temp.try($$SELECT convctx.render_context_history('[]', '[]')$$);
SELECT count(*) AS changed FROM ((SELECT * FROM convctx.turn_retrieval EXCEPT SELECT * FROM snapshot)
    UNION ALL (SELECT * FROM snapshot EXCEPT SELECT * FROM convctx.turn_retrieval)) d;

------------------------------------------------------------------------------
-- is_followup (a case from the apps it replaces: context reuse for a short follow-up)
------------------------------------------------------------------------------
SELECT q, convctx.is_followup(q, 'law') AS followup FROM (VALUES
    ('¿Seguro?'),
    ('¿estás seguro?'),
    ('ESTAS SEGURO de eso que me dices sobre la vida y la muerte'),
    ('Explícame más sobre lo que acabas de decir en tu respuesta anterior por favor'),
    ('Are you sure about what you just told me regarding vehicle registration?'),
    ('y eso?'),
    ('¿Qué dice el artículo 16?'),
    ('ley'),
    ('The second Article please'),
    ('Please tell me which restaurants nearby serve food after midnight today'),
    ('  ')) v(q);
-- no finalized turn yet: nothing to follow up on
SELECT convctx.is_followup('¿seguro?', 'conv-new');
-- without a session: only the query decides
SELECT convctx.is_followup('¿seguro?');
-- tenants add their own phrases; keywords win over clarifications
INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('', 'clarification', 'dime más'), ('acme', 'fresh_keyword', 'reglamento');
SELECT convctx.is_followup('Dime más sobre lo que me has contado antes de la comida de hoy', 'law');
SET convctx.tenant = 'acme';
SELECT convctx.is_followup('¿y el reglamento?');
RESET convctx.tenant;
SELECT convctx.is_followup('¿y el reglamento?');
SELECT convctx.is_followup(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT convctx.is_followup('x', '');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('', 'other', 'x');
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------------
-- clarification reconstruction (a case from the apps it replaces: skipped clarification)
------------------------------------------------------------------------------
INSERT INTO ids SELECT 'c1', convctx.start_turn('petition', 'r1', 'rent is out of control in my city');
SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'),
    '[{"id": "location", "question": "Which city do you live in?", "type": "location_picker"},
      {"id": "target", "question": "Who should act?", "type": "text"}]',
    '{"detected_location": null, "detected_scope": "city", "reasoning": "Rent is set locally."}');
SELECT jsonb_pretty(convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1'),
    '{"location": "San Francisco, CA", "target": "  "}'));
SELECT convctx.render_clarification(convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1'),
    '{"target": "the city council", "location": "San Francisco, CA", "extra": "more"}'),
    'Now generate the final subject line using this complete context.');
-- the user skipped every question
SELECT convctx.render_clarification(convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1')));
SELECT convctx.render_clarification(convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1'), '{"location": ""}'));
-- the stateless form: a context the client sent
SELECT convctx.render_clarification('{"originalDescription": "6th street is insane",
    "questionsAsked": [{"question": "Which city?"}], "inferredContext": {}, "answers": {}}');
-- errors
SELECT pg_temp.try($$SELECT convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'l1'))$$);
SELECT pg_temp.try($$SELECT convctx.clarification_context('law', (SELECT id FROM ids WHERE name = 'l1'))$$);
SELECT pg_temp.try($$SELECT convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1'), '[]')$$);
SELECT pg_temp.try($$SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'), '{}', '{}')$$);
SELECT pg_temp.try($$SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'), '[{"id": "x"}]', '{}')$$);
SELECT pg_temp.try($$SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'), '[]', '"city"')$$);
SELECT pg_temp.try($$SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'), '[]', NULL)$$);
SELECT pg_temp.try($$SELECT convctx.render_clarification('[]')$$);
SELECT pg_temp.try($$SELECT convctx.render_clarification('{"questionsAsked": {}}')$$);
SELECT pg_temp.try($$SELECT convctx.render_clarification('{"answers": {"a": 1}}')$$);
SELECT pg_temp.try($$SELECT convctx.render_clarification('{"inferredContext": {"reasoning": 2}}')$$);
SELECT pg_temp.try($$SELECT convctx.render_clarification('{"originalDescription": 5}')$$);

------------------------------------------------------------------------------
-- redaction: no text of a redacted turn reaches a prompt through any of these
------------------------------------------------------------------------------
-- chunks and citations of the redacted turn go, and later turns' citations of them stay
SELECT convctx.redact_turn('law', (SELECT id FROM ids WHERE name = 'l1'));
SELECT turn_no, jsonb_path_query_array(chunks, '$[*].id') AS chunks, jsonb_path_query_array(citations, '$[*].id') AS citations
FROM convctx.turn_retrieval WHERE session_id = 'law' ORDER BY turn_no;
SELECT e -> 'chunk' ->> 'id' AS id, e ->> 'section' AS section FROM jsonb_array_elements(convctx.context_history('law')) e;
SELECT pg_temp.try($$SELECT convctx.record_retrieval('law', (SELECT id FROM ids WHERE name = 'l1'), '[]')$$);
-- its clarification goes
SELECT convctx.redact_turn('petition', (SELECT id FROM ids WHERE name = 'c1'));
SELECT count(*) AS clarifications FROM convctx.clarification;
SELECT pg_temp.try($$SELECT convctx.clarification_context('petition', (SELECT id FROM ids WHERE name = 'c1'))$$);
SELECT pg_temp.try($$SELECT convctx.record_clarification('petition', (SELECT id FROM ids WHERE name = 'c1'), '[]', '{}')$$);
-- a summary that covers it goes, and a new one is asked for
SELECT count(convctx.finalize_turn('conv-1', convctx.start_turn('conv-1', 'q' || i, 'question ' || i), 'answer ' || i))
FROM generate_series(15, 16) i;
SELECT convctx.set_summary('conv-1', 'Summary through q8.', pg_temp.turn_of('conv-1', 'q8'), pg_temp.redactions_of('conv-1'));
SELECT convctx.conversation_state('conv-1') -> 'needs_summary' AS needs_summary;
SELECT convctx.redact_turn('conv-1', pg_temp.turn_of('conv-1', 'q11'));
SELECT count(*) AS summaries FROM convctx.session_summary;
SELECT convctx.redact_turn('conv-1', pg_temp.turn_of('conv-1', 'q5'));
SELECT count(*) AS summaries FROM convctx.session_summary;
SELECT s -> 'summary' AS summary, s -> 'needs_summary' AS needs_summary, s -> 'message_count' AS messages
FROM convctx.conversation_state('conv-1') s;
SELECT count(*) AS redacted_text_in_state FROM jsonb_array_elements(convctx.conversation_state('conv-1', 100) -> 'recent_messages') m
WHERE m ->> 'text' IN ('question 5', 'answer 5', 'question 11', 'answer 11');
SELECT count(*) AS redacted_turns_to_summarize FROM convctx.turns_to_summarize('conv-1') WHERE question_neutral IN ('question 5', 'question 11');
-- a whole session
SELECT convctx.redact_session('law');
SELECT count(*) AS retrievals FROM convctx.turn_retrieval WHERE session_id = 'law';
SELECT convctx.context_history('law');
-- erasure
SELECT convctx.link_session('user-1', 'conv-1');
SELECT convctx.set_summary('conv-1', 'again', pg_temp.turn_of('conv-1', 'q3'), pg_temp.redactions_of('conv-1'));
SELECT convctx.erase_identity('user-1') > 0 AS erased;
SELECT count(*) AS summaries FROM convctx.session_summary;
SELECT convctx.render_conversation_state(convctx.conversation_state('conv-1'));

-- the session counts match the turns
SELECT * FROM miscounted_sessions;

-- summaries keep counting right when the anonymous cap drops covered turns
SET convctx.max_session_turns = 4;
SELECT count(convctx.finalize_turn('capped', convctx.start_turn('capped', 'r' || i, 'q' || i), 'a' || i)) FROM generate_series(1, 4) i;
SELECT convctx.set_summary('capped', 'first three', pg_temp.turn_of('capped', 'r3'), pg_temp.redactions_of('capped'));
SELECT count(convctx.start_turn('capped', 'n' || i, 'q')) FROM generate_series(1, 2) i;
SELECT turn_no, request_id FROM convctx.turn WHERE session_id = 'capped' ORDER BY turn_no;
RESET convctx.max_session_turns;
-- a covered turn finalized late counts too
INSERT INTO ids SELECT 'late', convctx.start_turn('late', 'r1', 'q1');
SELECT convctx.finalize_turn('late', convctx.start_turn('late', 'r2', 'q2'), 'a2');
SELECT convctx.set_summary('late', 'both', pg_temp.turn_of('late', 'r2'), pg_temp.redactions_of('late'));
SELECT convctx.finalize_turn('late', (SELECT id FROM ids WHERE name = 'late'), 'a1');
-- the covered counts match the turns
SELECT ss.session_id, ss.covered_messages, c.messages
FROM convctx.session_summary ss,
     LATERAL (SELECT count(*) + count(t.finalized_at) AS messages FROM convctx.turn t
              WHERE t.tenant_id = ss.tenant_id AND t.session_id = ss.session_id
                AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL
                AND t.turn_no <= ss.through_turn_no) c
ORDER BY 1;
-- the session rows' summary marks match the summaries
SELECT count(*) AS marks_off
FROM convctx.session s LEFT JOIN convctx.session_summary ss USING (tenant_id, session_id)
WHERE s.summary_through_turn_no IS DISTINCT FROM ss.through_turn_no;
