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



------------------------------------------------------------------------------
-- Prompt rendering
------------------------------------------------------------------------------

-- (prompt)

-- Stored text is shown so that it cannot pose as prompt structure: line
-- breaks of one-line fields collapse to a space, continuation lines of
-- blocks are indented, other control characters become a space.
COMMENT ON FUNCTION convctx.context_aspect(jsonb, jsonb) IS
    'system-prompt paragraph listing the active concepts of a context, described by node objects {id, prefLabel, name, jurisdiction, shortDescription}, one line each (line breaks in ids and fields collapse to a space); NULL when none are active';
COMMENT ON FUNCTION convctx.render_conversation_state(jsonb) IS
    'planner context text of a conversation state: summary, the last 5 messages (roles user and assistant only) cut at 200 characters, first message note, up to 10 entities; line breaks in stored text collapse to a space';
COMMENT ON FUNCTION convctx.render_context_history(jsonb, jsonb) IS
    'text form of context_history: section headers (overridable through labels {"immediate", "history", "current"}) and [k] source - title, Title:, Text: per chunk; line breaks in labels, sources, titles and ids collapse to a space, continuation lines of a text are indented by two spaces';
COMMENT ON FUNCTION convctx.render_clarification(jsonb, text) IS
    'full-context prompt of a clarification turn: original issue (indented by two spaces), questions asked, the user''s clarifications, previous analysis, then the instruction; line breaks in questions, answers and the analysis collapse to a space';



------------------------------------------------------------------------------
-- search_path of the SECURITY DEFINER functions
------------------------------------------------------------------------------

-- (search path)
