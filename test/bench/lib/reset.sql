-- The way back to the state a benchmark's setup made, for each round:
-- bench.reset() drops the turns a measurement added (past bench.initial's
-- count in each session, in tenant :tenant; the floor's past the mark) and
-- puts the session rows back as they are now. Included (\ir) by
-- test/bench/request/setup.sql and test/bench/turns/setup.sql once they
-- filled bench.initial, convctx.turn and floor.turn.
SET bench.tenant = :'tenant';
CREATE TABLE bench.floor_mark AS SELECT max(turn_no) AS last_turn_no FROM floor.turn;
-- Session rows as they are now, counters included, to go back to (their
-- stored columns: the generated ones are computed again), and the way
-- back to the initial state: drop what a measurement added.
DO $do$
DECLARE
    cols text;
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
      FROM pg_attribute
     WHERE attrelid = 'convctx.session'::regclass AND attnum > 0 AND NOT attisdropped
       AND attgenerated = '';
    EXECUTE format('CREATE TABLE bench.session_snapshot AS SELECT %s FROM convctx.session', cols);
    EXECUTE format($proc$
        CREATE PROCEDURE bench.reset() LANGUAGE sql AS $body$
            DELETE FROM convctx.turn t USING bench.initial i
             WHERE t.tenant_id = %2$L AND t.session_id = i.session_id AND t.turn_no > i.turns;
            DELETE FROM convctx.session;
            INSERT INTO convctx.session (%1$s) SELECT %1$s FROM bench.session_snapshot;
            DELETE FROM floor.turn WHERE turn_no > (SELECT last_turn_no FROM bench.floor_mark);
        $body$$proc$, cols, current_setting('bench.tenant'));
END
$do$;
