\set convctx_echo :ECHO \set ECHO none
-- What the regression tests share, included with `\i test/helpers.sql`: psql
-- reads the path from the directory pg_regress runs in, the top of the tree.
-- The first line turns psql's echo off (pg_regress runs psql with -a), so
-- that an expected output shows only that line and the \i; errors still show.

-- pg_temp.try(stmt): run a statement that should fail and return its
-- SQLSTATE, message, detail and hint, or 'ok'; turn ids are masked, and so
-- is the shard number that Citus adds to a table's name (inside the value,
-- so that psql's column widths are those of a single server).
CREATE FUNCTION pg_temp.try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN regexp_replace(regexp_replace(SQLSTATE || ': ' || SQLERRM
                          || coalesce(E'\n  DETAIL: ' || nullif(detail, ''), '')
                          || coalesce(E'\n  HINT: ' || nullif(hint, ''), ''),
                          '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<turn>', 'g'),
                          '(table "[a-z_]+)_[0-9]{6,}"', '\1"', 'g');
END $$;

-- miscounted_sessions: the session rows whose live_turns or live_answers
-- differ from their turns (none, after any sequence of calls).
CREATE TEMP VIEW miscounted_sessions AS
SELECT s.tenant_id, s.session_id, s.live_turns, s.live_answers, t.live, t.answers
FROM convctx.session s
LEFT JOIN (SELECT tenant_id, session_id,
                  count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS live,
                  count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL
                                     AND finalized_at IS NOT NULL) AS answers
           FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
WHERE s.live_turns <> coalesce(t.live, 0) OR s.live_answers <> coalesce(t.answers, 0);

-- echo back as it was, on the line that is not echoed
\set ECHO :convctx_echo \unset convctx_echo
