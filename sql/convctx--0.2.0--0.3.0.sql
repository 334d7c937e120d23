/* convctx--0.2.0--0.3.0.sql: security hardening */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx UPDATE TO '0.3.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Schema guard
------------------------------------------------------------------------------

-- (schema guard: owner, foreign objects, CREATE grants)



------------------------------------------------------------------------------
-- Audit trail: who acted, scheduling and refusals without a superuser
------------------------------------------------------------------------------

-- The session user stays in role_name; the role it acted as (SET ROLE),
-- when that is another one, in acting_role.
ALTER TABLE convctx.audit_log ADD COLUMN acting_role text;
COMMENT ON COLUMN convctx.audit_log.role_name IS
    'the session user (login role) that caused the event';
COMMENT ON COLUMN convctx.audit_log.acting_role IS
    'the role the session acted as (SET ROLE) when it was not the session user; NULL otherwise';

-- (cron and audit)



------------------------------------------------------------------------------
-- Tenant binding that fails closed; administrators read through functions
------------------------------------------------------------------------------

-- (tenancy)



------------------------------------------------------------------------------
-- Redacted and personal data stay gone
------------------------------------------------------------------------------

-- (data)

-- A summary made before a redaction of a turn it covers is refused: every
-- redaction and erasure bumps the session's generation under its row lock
-- and stamps its tombstones with it; turns_to_summarize hands the
-- generation out, set_summary takes it back.
ALTER TABLE convctx.session ADD COLUMN redactions bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN convctx.session.redactions IS
    'redaction generation: bumped by every redaction or erasure of the session, under this row''s lock; set_summary refuses a summary of turns read before a redaction of one it covers';
ALTER TABLE convctx.turn ADD COLUMN redaction bigint;
COMMENT ON COLUMN convctx.turn.redaction IS
    'for a tombstone, the redaction generation of its session that made it (NULL for tombstones made before 0.3.0 and for live turns)';

DROP FUNCTION convctx.set_summary(text, text, uuid);
CREATE FUNCTION convctx.set_summary(session_id text, summary text, through_turn uuid, redactions bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'convctx_set_summary_0_3'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION convctx.set_summary(text, text, uuid, bigint) IS
    'store the app''s summary of every turn of a session up to and including through_turn, replacing an older one; redactions is the value turns_to_summarize returned with the turns summarized: a summary whose input predates a redaction of a turn it covers, or through a redacted turn, is refused (55000)';
REVOKE ALL ON FUNCTION convctx.set_summary(text, text, uuid, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.set_summary(text, text, uuid, bigint) TO convctx_app;

DROP FUNCTION convctx.turns_to_summarize(text, integer);
CREATE FUNCTION convctx.turns_to_summarize(session_id text, message_window integer DEFAULT 10,
                                           max_turns integer DEFAULT 100)
RETURNS TABLE (turn_id uuid, created_at timestamptz, question_neutral text, answer_neutral text,
               redactions bigint, previous_summary text)
AS 'MODULE_PATHNAME', 'convctx_turns_to_summarize_0_3'
LANGUAGE C STABLE PARALLEL RESTRICTED
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION convctx.turns_to_summarize(text, integer, integer) IS
    'the first max_turns live turns older than the message window and not covered by the stored summary, oldest first: what to feed the summarizer, with the summary they continue (previous_summary) and the redaction generation to pass to set_summary';
REVOKE ALL ON FUNCTION convctx.turns_to_summarize(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION convctx.turns_to_summarize(text, integer, integer) TO convctx_app;

COMMENT ON FUNCTION convctx.erase_identity(text) IS
    'right to erasure: redact every turn of every session linked to the identity, delete their prompt data and contexts (and contexts saved with it as user_id), and replace the identity wherever it is stored (sessions, links, tombstones, audit log) by ''erased:'' and its HMAC-SHA256 under convctx.identity_hash_key (no key: ''erased''); returns how many turns';




------------------------------------------------------------------------------
-- Prompt rendering
------------------------------------------------------------------------------

-- (prompt)



------------------------------------------------------------------------------
-- search_path of the SECURITY DEFINER functions
------------------------------------------------------------------------------

-- (search path)
