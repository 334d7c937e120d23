-- The erase_identity benchmark's database: convctx, one identity per size
-- measured, 50 000 sessions of other identities
-- around them, and the function that times one erasure. Run by run.sh.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS convctx;
CREATE SCHEMA bench;

-- n sessions of identity ident, through the API as an app would leave
-- them: a turn answered and a context saved with the identity in each.
CREATE PROCEDURE bench.sessions(ident text, n int) LANGUAGE sql AS $$
    SELECT pg_catalog.count(convctx.finalize_turn(s, convctx.start_turn(s, 'r1', 'a question', ident), 'an answer'))
      FROM (SELECT ident || '-' || i AS s FROM generate_series(1, n) i) x;
    SELECT pg_catalog.count(convctx.context_save(ident || '-' || i, '{"activeNodeIds": ["n1"]}', ident))
      FROM generate_series(1, n) i;
$$;

-- The identities measured: for each size, one identity with that many
-- sessions and, for a tenth of them, a refused link naming it in the
-- audit log (as link_refused writes it).
CREATE PROCEDURE bench.load(sizes int[]) LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    FOREACH n IN ARRAY sizes LOOP
        CALL bench.sessions('user' || n, n);
        COMMIT;
        INSERT INTO convctx.audit_log (tenant_id, action, session_id, identity_id, details)
        SELECT '', 'link_refused', 'user' || n || '-' || i, 'someone-else',
               jsonb_build_object('linked_identity_id', 'user' || n, 'requested_identity_id', 'someone-else')
          FROM generate_series(1, n / 10) i;
        COMMIT;
    END LOOP;
END $$;

-- The others: 10 000 identities of 5 sessions each.
CREATE PROCEDURE bench.background() LANGUAGE plpgsql AS $$
BEGIN
    FOR b IN 0..9 LOOP
        PERFORM pg_catalog.count(convctx.finalize_turn(s, convctx.start_turn(s, 'r1', 'a question', ident), 'an answer'))
           FROM (SELECT 'other' || i AS ident, 'other' || i || '-' || j AS s
                   FROM generate_series(b * 1000 + 1, (b + 1) * 1000) i, generate_series(1, 5) j) x;
        COMMIT;
    END LOOP;
END $$;

-- One erasure, timed inside the caller's transaction (rolled back by
-- run.sh, so that every round erases the same rows): milliseconds and the
-- tombstones it made.
CREATE FUNCTION bench.erase(ident text, OUT ms float8, OUT turns bigint) LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    turns := convctx.erase_identity(ident);
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;
