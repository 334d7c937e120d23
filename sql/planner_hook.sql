-- convctx plans its own keyed statements with enable_seqscan off (a
-- planner hook, src/core/planner.c), and nothing else: a statement planned
-- while one of them runs (a trigger's, a foreign-key check's) is planned
-- with the session's settings.

-- A function the planner folds while planning, reporting the setting in
-- force at that moment (it lies about being immutable for that purpose).
CREATE FUNCTION seqscan_at_planning() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT current_setting('enable_seqscan') $$;
CREATE TABLE planned_in_trigger (setting text);
CREATE FUNCTION log_planning() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.planned_in_trigger SELECT public.seqscan_at_planning();
    RETURN NULL;
END $$;
CREATE TRIGGER log_planning AFTER INSERT ON convctx.turn
    FOR EACH ROW EXECUTE FUNCTION log_planning();

SHOW enable_seqscan;
SELECT convctx.start_turn('hook', 'r1', 'q1') IS NOT NULL AS started;
SELECT setting AS enable_seqscan_when_the_trigger_was_planned FROM planned_in_trigger;

-- and the setting of the session is never changed
SHOW enable_seqscan;

DROP TRIGGER log_planning ON convctx.turn;
DROP FUNCTION log_planning(), seqscan_at_planning();
DROP TABLE planned_in_trigger;
