-- The floor of the turn and storage benchmarks: floor.turn, a bare table
-- with the same columns, defaults, checks and every index of convctx.turn
-- (primary key, partial unique request index, chronology index, ...);
-- turn_no and turn_id come from defaults. Fill factor 100, a bare table's.
-- Included (\ir) by test/bench/turns/setup.sql and test/bench/storage/setup.sql.
CREATE SCHEMA floor;
CREATE TABLE floor.turn (LIKE convctx.turn INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
CREATE SEQUENCE floor.turn_no_seq OWNED BY floor.turn.turn_no;
ALTER TABLE floor.turn
    ALTER turn_no SET DEFAULT nextval('floor.turn_no_seq'),
    ALTER turn_id SET DEFAULT gen_random_uuid();
