-- export_records writes turn lines itself (not through jsonb): each must be
-- byte for byte what jsonb_build_object(...)::text gives for the row, for
-- every kind of value: nulls, tombstones, escapes, scalar and nested jsonb,
-- large numbers, infinite and fractional times in a time zone with an offset.
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
SET client_min_messages = warning;
DROP ROLE IF EXISTS export_format_admin;
RESET client_min_messages;
CREATE ROLE export_format_admin IN ROLE convctx_admin;
SELECT convctx.bind_role_tenant('export_format_admin', 'acme');
INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers)
VALUES ('acme', 'f1', 'u1', 3, 1, 1), ('acme', 'f2', NULL, 9, 0, 0);
INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id, created_at,
                          finalized_at, pipeline_name, consultant, repository, translate_chat,
                          question_neutral, answer_neutral, question_translated, answer_translated,
                          answer_translated_is_fallback, metadata, record_version, replaced_by_turn_id,
                          deleted_at, redaction)
VALUES
 ('acme', 'f1', '00000000-0000-0000-0000-000000000001', 1, 'r1', 'u1', '2026-01-02 03:04:05.678901+00',
  '2026-01-02 03:04:06+00', 'p', 'c', 'repo', true,
  E'tab\there\nnewline \\ back "quote" \u0001 ctl é 😀 𠀀 שלום', E'/slash\r\f\b',
  'q tr', 'a tr', false,
  '{"n": 1.000000000000000005, "big": 12345678901234567890, "e": 1E6, "z": -0, "a": [1, "x", null, true, {}], "": ""}',
  1, '00000000-0000-0000-0000-000000000002', NULL, NULL),
 ('acme', 'f1', '00000000-0000-0000-0000-000000000002', 1, 'r1', 'u1', 'infinity', NULL, NULL, NULL, NULL,
  false, 'q', NULL, NULL, NULL, NULL, '"scalar"', 2, NULL, NULL, 9223372036854775807),
 ('acme', 'f1', '00000000-0000-0000-0000-000000000003', 2, 'r2', NULL, '-infinity', NULL, NULL, NULL, NULL,
  false, NULL, NULL, NULL, NULL, true, '5', 1, NULL, '1999-12-31 23:59:59.5+00', -1),
 ('acme', 'f1', '00000000-0000-0000-0000-000000000004', 3, 'r3', NULL, '2026-06-01 12:00:00+00', NULL,
  NULL, NULL, NULL, false, 'q', NULL, NULL, NULL, NULL, 'null', 1, NULL, NULL, NULL),
 ('acme', 'f2', '00000000-0000-0000-0000-000000000005', 9, 'r9', NULL, '2026-06-01 12:00:00+00', NULL,
  NULL, NULL, NULL, false, 'q', NULL, NULL, NULL, NULL, '[]', 1, NULL, NULL, NULL);

SET TimeZone = 'Asia/Kolkata';
SET ROLE export_format_admin;
CREATE TEMP TABLE exported AS SELECT record_type, line FROM convctx.export_records();
RESET ROLE;
SELECT e.line::jsonb ->> 'turn_id' AS turn_id,
       e.line = pg_catalog.jsonb_build_object('type', 'turn', 'session_id', t.session_id,
           'turn_id', t.turn_id, 'turn_no', t.turn_no, 'request_id', t.request_id,
           'record_version', t.record_version, 'replaced_by_turn_id', t.replaced_by_turn_id,
           'identity_id', t.identity_id, 'created_at', t.created_at, 'finalized_at', t.finalized_at,
           'deleted_at', t.deleted_at, 'redaction', t.redaction, 'translate_chat', t.translate_chat,
           'question_neutral', t.question_neutral, 'answer_neutral', t.answer_neutral,
           'question_translated', t.question_translated, 'answer_translated', t.answer_translated,
           'answer_translated_is_fallback', t.answer_translated_is_fallback,
           'metadata', t.metadata, 'pipeline_name', t.pipeline_name, 'consultant', t.consultant,
           'repository', t.repository)::text AS same_as_jsonb,
       e.line = e.line::jsonb::text AS canonical
  FROM exported e JOIN convctx.turn t ON t.turn_id = (e.line::jsonb ->> 'turn_id')::uuid
 WHERE e.record_type = 'turn'
 ORDER BY 1;
-- the order: sessions by id, turns by (turn_no, record_version)
SELECT record_type, line::jsonb ->> 'session_id' AS session_id, line::jsonb ->> 'turn_no' AS turn_no,
       line::jsonb ->> 'record_version' AS record_version
  FROM exported;
-- a line as written
SELECT line FROM exported WHERE line::jsonb ->> 'turn_id' = '00000000-0000-0000-0000-000000000001';
RESET TimeZone;
DROP TABLE exported;
TRUNCATE convctx.turn, convctx.session, convctx.session_link, convctx.conversation_context,
         convctx.audit_log, convctx.session_summary, convctx.turn_retrieval, convctx.clarification,
         convctx.role_tenant;
DROP ROLE export_format_admin;
