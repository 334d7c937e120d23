# A hostile owner of a schema: a role that may create schemas in a database
# prepares schema convctx before the DBA installs the extension, or plants
# objects in it, so that a SECURITY DEFINER function of convctx would run
# its code as the extension's owner (route C of the security review). And
# the fast paths that find objects by name: a schema renamed and replaced,
# an index that is not valid.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('schema');
$node->init;
$node->start;

# mallory may create schemas in database app, nothing more.
$node->safe_psql('postgres', q{
    CREATE DATABASE app;
    CREATE ROLE mallory LOGIN;
    GRANT CREATE ON DATABASE app TO mallory;
});

sub is_superuser
{
    return $node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'});
}

# The trap: an aggregate of exactly the type convctx's statements count
# (count(DISTINCT turn_no), count(d.finalized_at)), whose final function
# makes mallory a superuser when a superuser runs it.
my $trap = q{
    CREATE FUNCTION convctx.escalate(bigint) RETURNS bigint LANGUAGE plpgsql AS
      $$ BEGIN ALTER ROLE mallory SUPERUSER; RETURN $1; END $$;
    CREATE FUNCTION convctx.escalate(timestamptz) RETURNS bigint LANGUAGE plpgsql AS
      $$ BEGIN ALTER ROLE mallory SUPERUSER; RETURN 1; END $$;
    CREATE AGGREGATE convctx.count(bigint) (SFUNC = int8larger, STYPE = bigint, FINALFUNC = convctx.escalate);
    CREATE FUNCTION convctx.tsfirst(timestamptz, timestamptz) RETURNS timestamptz LANGUAGE sql AS 'SELECT $2';
    CREATE AGGREGATE convctx.count(timestamptz) (SFUNC = convctx.tsfirst, STYPE = timestamptz, FINALFUNC = convctx.escalate);
};

# 0. Roles of the extension's names that exist already are reused only as
#    plain group roles: one that can log in is refused, members are named.
$node->safe_psql('postgres', 'CREATE ROLE convctx_app LOGIN');
my ($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx');
isnt($rc, 0, 'CREATE EXTENSION refuses a pre-existing convctx_app that can log in');
like($err, qr/role convctx_app exists already and has attributes LOGIN/, 'and says why');
$node->safe_psql('postgres', 'ALTER ROLE convctx_app NOLOGIN; GRANT convctx_app TO mallory');
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx; DROP EXTENSION convctx; DROP SCHEMA IF EXISTS convctx');
is($rc, 0, 'a plain group role is reused');
like($err, qr/WARNING:  role convctx_app exists already and has members: mallory/,
     'with a warning that names its members');
$node->safe_psql('postgres', 'REVOKE convctx_app FROM mallory');
$node->safe_psql('postgres', 'DROP ROLE convctx_admin; CREATE ROLE convctx_admin IN ROLE pg_read_all_data');
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx');
isnt($rc, 0, 'CREATE EXTENSION refuses a pre-existing convctx_admin that is a member of pg_read_all_data');
like($err, qr/role convctx_admin is a member of pg_read_all_data/, 'and says why');
$node->safe_psql('postgres', 'DROP ROLE convctx_admin');

# 1. The schema exists before CREATE EXTENSION and belongs to mallory.
$node->safe_psql('app', "SET ROLE mallory; CREATE SCHEMA convctx; $trap");
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx');
isnt($rc, 0, 'CREATE EXTENSION refuses a schema convctx owned by another role');
like($err, qr/schema convctx is owned by role mallory, not by the owner of extension convctx/,
     'and says whose it is');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_extension WHERE extname = 'convctx'}), '0',
   'nothing was installed');
is(is_superuser(), 'f', 'mallory is not a superuser');

# 2. The schema is the DBA's, but mallory may create in it.
$node->safe_psql('app', q{
    DROP SCHEMA convctx CASCADE;
    CREATE SCHEMA convctx;
    GRANT CREATE, USAGE ON SCHEMA convctx TO mallory;
});
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx');
isnt($rc, 0, 'CREATE EXTENSION refuses a schema convctx others may create in');
like($err, qr/roles other than its owner may create objects in schema convctx: mallory/,
     'and names them');

# 3. The schema is the DBA's and closed, but holds what mallory planted
#    while it was open.
$node->safe_psql('app', "SET ROLE mallory; $trap");
$node->safe_psql('app', 'REVOKE CREATE ON SCHEMA convctx FROM mallory');
($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION convctx');
isnt($rc, 0, 'CREATE EXTENSION refuses a schema convctx holding foreign objects');
like($err, qr/schema convctx holds objects that do not belong to extension convctx/, 'with that message');
like($err, qr/function convctx\.escalate\(bigint\)/, 'naming the objects');
is(is_superuser(), 'f', 'mallory is not a superuser');

# 4. An empty schema of the installing role is fine.
$node->safe_psql('app', 'DROP SCHEMA convctx CASCADE; CREATE SCHEMA convctx; CREATE EXTENSION convctx');
is($node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'convctx'}),
   $node->safe_psql('app', q{SELECT default_version FROM pg_available_extensions WHERE name = 'convctx'}),
   'an empty schema of the installing role is used');

# 5. The update refuses foreign objects too: install the previous version,
#    let mallory plant the trap through a CREATE grant, update.
$node->safe_psql('postgres', 'CREATE DATABASE app2; GRANT CREATE ON DATABASE app2 TO mallory');
$node->safe_psql('app2', q{CREATE EXTENSION convctx VERSION '0.2.0'; GRANT CREATE, USAGE ON SCHEMA convctx TO mallory});
$node->safe_psql('app2', "SET ROLE mallory; $trap");
($rc, $out, $err) = $node->psql('app2', 'ALTER EXTENSION convctx UPDATE');
isnt($rc, 0, 'ALTER EXTENSION UPDATE refuses a schema others may create in');
$node->safe_psql('app2', 'REVOKE CREATE ON SCHEMA convctx FROM mallory');
($rc, $out, $err) = $node->psql('app2', 'ALTER EXTENSION convctx UPDATE');
isnt($rc, 0, 'ALTER EXTENSION UPDATE refuses a schema holding foreign objects');
like($err, qr/holds objects that do not belong to extension convctx.*aggregate|function convctx\.count/s,
     'and names them');
is($node->safe_psql('app2', q{SELECT extversion FROM pg_extension WHERE extname = 'convctx'}), '0.2.0',
   'the update did not happen');

# 6. Even objects a superuser created in the schema are never picked up:
#    every function, aggregate and operator the library runs is qualified,
#    and the pinned search_path is pg_catalog, pg_temp.
$node->safe_psql('app', $trap);
$node->safe_psql('app', q{
    CREATE ROLE admin_a LOGIN IN ROLE convctx_admin;
    SELECT convctx.bind_role_tenant('admin_a', 'a');
});
$node->safe_psql('app', q{
    SET ROLE admin_a;
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'q1'), 'a1');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', 'q2'), 'a2');
});
is($node->safe_psql('app', q{SET ROLE admin_a; SELECT convctx.redact_session('s1')}), '2',
   'redact_session counts with pg_catalog.count, not the planted convctx.count(bigint)');
$node->safe_psql('app', q{SET ROLE admin_a;
    SELECT convctx.start_turn('s2', 'r1', 'q'); SELECT convctx.erase_identity('nobody');
    SELECT convctx.purge()});
is(is_superuser(), 'f', 'no call of redaction, erasure or purge ran the planted aggregates');
is($node->safe_psql('app', q{
    SELECT count(*) FROM pg_proc WHERE pronamespace = 'convctx'::regnamespace AND prosecdef
       AND proconfig IS DISTINCT FROM '{"search_path=pg_catalog, pg_temp"}'}), '0',
   'every SECURITY DEFINER function pins search_path to pg_catalog, pg_temp');

# 7. A schema renamed and replaced by another named convctx: the library
#    finds objects by name and refuses to use the impostor.
$node->safe_psql('app', q{DROP FUNCTION convctx.escalate(bigint), convctx.escalate(timestamptz) CASCADE});
$node->safe_psql('app', 'ALTER SCHEMA convctx RENAME TO convctx_real; CREATE SCHEMA convctx');
($rc, $out, $err) = $node->psql('app', q{SELECT convctx_real.start_turn('s3', 'r1', 'q')});
isnt($rc, 0, 'a call fails while another schema is named convctx');
like($err, qr/schema "convctx" is not the schema of extension "convctx"/, 'and says why');
$node->safe_psql('app', 'DROP SCHEMA convctx; ALTER SCHEMA convctx_real RENAME TO convctx');
is($node->safe_psql('app', q{SELECT convctx.start_turn('s3', 'r1', 'q') IS NOT NULL}), 't',
   'calls work again once the schemas are renamed back');

# 8. recent_turns reads its indexes directly only when they are valid and
#    ready: an index left behind by a failed CREATE INDEX CONCURRENTLY
#    misses the rows written since, and the direct read would return an
#    incomplete history. Simulated by marking turn_chronology not ready
#    (rows inserted meanwhile do not go into it) and not valid.
$node->safe_psql('app', q{
    SELECT convctx.finalize_turn('h', convctx.start_turn('h', 'r' || i, 'q' || i), 'a' || i)
      FROM generate_series(1, 3) i;
    UPDATE pg_index SET indisvalid = false, indisready = false
     WHERE indexrelid = 'convctx.turn_chronology'::regclass;
});
$node->safe_psql('app', q{
    SELECT convctx.finalize_turn('h', convctx.start_turn('h', 'r' || i, 'q' || i), 'a' || i)
      FROM generate_series(4, 6) i;
});
is($node->safe_psql('app', q{SELECT string_agg(question_neutral, ',') FROM convctx.recent_turns('h', 10)}),
   'q1,q2,q3,q4,q5,q6', 'recent_turns returns the whole history past an index that is not valid');
is($node->safe_psql('app', q{SELECT jsonb_array_length(convctx.recent_turns_json('h', 10))}), '6',
   'and so does recent_turns_json');
is($node->safe_psql('app', q{SELECT string_agg(question, ',') FROM convctx.conversation_turns('h', 0, NULL, 10)}),
   'q1,q2,q3,q4,q5,q6', 'and a page of conversation_turns');
$node->safe_psql('app', q{REINDEX INDEX convctx.turn_chronology});
is($node->safe_psql('app', q{SELECT string_agg(question_neutral, ',') FROM convctx.recent_turns('h', 10)}),
   'q1,q2,q3,q4,q5,q6', 'and the same once the index is rebuilt');

# 9. Code of a tenant's administrator that a superuser's session runs: a
#    SECURITY DEFINER function it owns, and an index expression on its
#    table, which ANALYZE and REINDEX evaluate as the table's owner. The
#    session is the superuser's, but convctx decides the tenant from the
#    role that called it: the administrator stays in its tenant.
$node->safe_psql('app', q{
    SET convctx.tenant = 'b';
    SELECT convctx.finalize_turn('secret-b', convctx.start_turn('secret-b', 'r1', 'secret of b'), 'b');
    RESET convctx.tenant;
    CREATE SCHEMA loot AUTHORIZATION admin_a;
});
$node->safe_psql('app', q{
    SET ROLE admin_a;
    CREATE TABLE loot.found (what text);
    CREATE FUNCTION loot.grab_v(x integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
    BEGIN
        BEGIN
            PERFORM convctx.bind_role_all_tenants('admin_a');
            INSERT INTO loot.found VALUES ('bound to every tenant');
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO loot.found VALUES ('bind refused: ' || SQLSTATE);
        END;
        BEGIN
            PERFORM set_config('convctx.tenant', 'b', true);
            INSERT INTO loot.found SELECT 'read ' || session_id FROM convctx.admin_sessions();
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO loot.found VALUES ('read refused: ' || SQLSTATE);
        END;
        RETURN x;
    END $$;
    -- an index expression must be immutable: it says so, and calls the real work
    CREATE FUNCTION loot.grab(x integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN RETURN loot.grab_v(x); END $$;
    CREATE FUNCTION loot.trojan() RETURNS integer LANGUAGE sql SECURITY DEFINER
        AS 'SELECT loot.grab(1)';
    CREATE TABLE loot.t (x integer);
    INSERT INTO loot.t SELECT generate_series(1, 10);
    CREATE INDEX ON loot.t (loot.grab(x));
    TRUNCATE loot.found;
});
$node->safe_psql('app', 'SELECT loot.trojan()');
is($node->safe_psql('app', q{SELECT string_agg(DISTINCT what, ', ' ORDER BY what) FROM loot.found}),
   'bind refused: 42501, read refused: 42501',
   "a superuser calling the administrator's SECURITY DEFINER function gives it nothing: no binding, no other tenant");
$node->safe_psql('app', 'TRUNCATE loot.found; ANALYZE loot.t; REINDEX TABLE loot.t');
is($node->safe_psql('app', q{SELECT string_agg(DISTINCT what, ', ' ORDER BY what) FROM loot.found}),
   'bind refused: 42501, read refused: 42501',
   "nor does a superuser's ANALYZE or REINDEX evaluating its index expression");
is($node->safe_psql('app', q{
    SELECT string_agg(role_name || ':' || coalesce(tenant_id, '*'), ',') FROM convctx.bindings()}),
   'admin_a:a', 'the administrator is still bound to its tenant only');
is($node->safe_psql('app', q{SELECT count(*) FROM convctx.audit WHERE action = 'bind_role_all_tenants'}),
   '0', 'and no binding was audited');

$node->stop;
done_testing();
