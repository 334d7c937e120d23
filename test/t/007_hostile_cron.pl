# Scheduling across databases and the audit trail against hostile roles
# (issue 14, sections 1 and 4), on a real server with pg_cron preloaded:
#  - route A: a schema cron planted in the cron database before pg_cron is
#    installed there is never called into, by an admin or a superuser;
#  - route B: the cron database's owner sets its search_path to a schema
#    with an aggregate bool_or that would make them superuser; neither a
#    superuser's nor the owner's unschedule_retention runs it;
#  - a role pg_cron refuses gets pg_cron's 42501 and no job;
#  - a refused link's audit row survives statement_timeout and
#    pg_terminate_backend of the caller, and names session user and role;
#  - a refusal storm never runs more than two convctx workers in the
#    database, loses no audit row, and another database's pg_cron
#    retention job still runs;
#  - on a hot standby scheduling fails at once with 25006 and leaves no
#    worker registered.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $pg_cron = `$ENV{PG_CONFIG} --pkglibdir 2>/dev/null`;
chomp $pg_cron;
BAIL_OUT('pg_cron is not installed: apt-get install postgresql-15-cron')
  unless -e "$pg_cron/pg_cron.so" || -e '/usr/lib/postgresql/15/lib/pg_cron.so';

my $node = PostgreSQL::Test::Cluster->new('hostile_cron');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'crondb'
cron.use_background_workers = on
max_worker_processes = 10
log_line_prefix = '%m [%p] '
});
$node->start;

# Run sql; returns (sqlstate or '', stdout, stderr).
sub try_sql
{
    my ($db, $sql, %opts) = @_;
    my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql", %opts);
    my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
    return ($state // '', $out, $err);
}

sub rolsuper
{
    return $node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = '$_[0]'");
}

$node->safe_psql('postgres', q{
    CREATE DATABASE crondb;
    CREATE DATABASE app;
    CREATE DATABASE other;
    CREATE ROLE mallory LOGIN;
    CREATE ROLE nocron LOGIN;
    CREATE ROLE app_a LOGIN;
    CREATE ROLE alice LOGIN;
    CREATE ROLE admin_a;
    CREATE ROLE bob LOGIN;
    GRANT CREATE ON DATABASE crondb TO mallory;
});
for my $db ('app', 'other')
{
    $node->safe_psql($db, 'CREATE EXTENSION convctx');
}
$node->safe_psql('postgres', q{
    GRANT convctx_admin TO mallory, nocron;
    GRANT convctx_app TO app_a;
    GRANT app_a TO alice;
    GRANT convctx_admin TO admin_a;
    GRANT admin_a TO bob;
});
$node->safe_psql('app', q{
    SELECT convctx.bind_role_tenant('mallory', 'A');
    SELECT convctx.bind_role_tenant('nocron', 'A');
    SELECT convctx.bind_role_tenant('app_a', 'A');
    SELECT convctx.bind_role_tenant('admin_a', 'A');
});

is($node->safe_psql('postgres', q{SELECT rolcanlogin || ' ' || rolsuper || ' ' || rolbypassrls || ' ' ||
    (SELECT count(*) FROM pg_auth_members WHERE roleid = r.oid) FROM pg_roles r WHERE rolname = 'convctx_audit'}),
   'false false true 0', 'convctx_audit: no login, no superuser, bypasses RLS, no members');

# A convctx_audit made by someone else is taken only if it is such a role.
$node->safe_psql('postgres', 'CREATE DATABASE pre');
for my $case (['ALTER ROLE convctx_audit LOGIN', 'ALTER ROLE convctx_audit NOLOGIN', qr/has privileges convctx does not expect/],
              ['GRANT convctx_audit TO alice', 'REVOKE convctx_audit FROM alice', qr/has members/])
{
    $node->safe_psql('postgres', $case->[0]);
    my ($st, $o, $e) = try_sql('pre', 'CREATE EXTENSION convctx');
    is($st, '42501', "CREATE EXTENSION refuses convctx_audit after $case->[0]");
    like($e, $case->[2], 'with a message that says why');
    $node->safe_psql('postgres', $case->[1]);
}
$node->safe_psql('pre', 'CREATE EXTENSION convctx');
pass('and takes it once it is NOLOGIN with no members');

###########################################################################
# Route A: pg_cron preloaded but not created in crondb; mallory plants a
# schema cron there with functions that would make her superuser.
###########################################################################

$node->safe_psql('crondb', q{
    SET ROLE mallory;
    CREATE SCHEMA cron;
    CREATE SEQUENCE cron.hits;
    GRANT USAGE ON SCHEMA cron TO PUBLIC;
    GRANT USAGE, UPDATE ON SEQUENCE cron.hits TO PUBLIC;
    CREATE TABLE cron.job (jobid bigint, jobname text, username text, database text);
    GRANT SELECT ON cron.job TO PUBLIC;
    CREATE FUNCTION cron.schedule_in_database(text, text, text, text, text, boolean) RETURNS bigint
        LANGUAGE sql AS $$ SELECT pg_catalog.nextval('cron.hits'); ALTER ROLE mallory SUPERUSER; SELECT 42::bigint $$;
    CREATE FUNCTION cron.schedule_in_database(text, text, text, text, text) RETURNS bigint
        LANGUAGE sql AS $$ SELECT pg_catalog.nextval('cron.hits'); ALTER ROLE mallory SUPERUSER; SELECT 42::bigint $$;
    CREATE FUNCTION cron.unschedule(bigint) RETURNS boolean
        LANGUAGE sql AS $$ SELECT pg_catalog.nextval('cron.hits'); ALTER ROLE mallory SUPERUSER; SELECT true $$;
});

for my $who ('mallory', 'postgres')
{
    my $set = $who eq 'postgres' ? '' : "SET ROLE $who;";
    my ($state, $out, $err) = try_sql('app', "$set SELECT convctx.schedule_retention('* * * * *')");
    is($state, '55000', "route A, schedule by $who: refused with 55000");
    like($err, qr/extension pg_cron is not installed in database "crondb"/, "route A, schedule by $who: the error says why");
    ($state, $out, $err) = try_sql('app', "$set SELECT convctx.unschedule_retention()");
    is($state, '55000', "route A, unschedule by $who: refused with 55000");
}
is(rolsuper('mallory'), 'f', 'route A: mallory is not superuser');
is($node->safe_psql('crondb', 'SELECT is_called FROM cron.hits'), 'f', 'route A: no planted function ever ran');

###########################################################################
# Route B: pg_cron installed in crondb, which mallory owns; she sets its
# search_path to her schema and plants an aggregate bool_or.
###########################################################################

$node->safe_psql('crondb', 'DROP SCHEMA cron CASCADE; CREATE EXTENSION pg_cron; CREATE EXTENSION convctx');
$node->safe_psql('postgres', 'ALTER DATABASE crondb OWNER TO mallory');
$node->safe_psql('crondb', q{
    SET ROLE mallory;
    CREATE SCHEMA evil;
    GRANT USAGE ON SCHEMA evil TO PUBLIC;
    CREATE SEQUENCE evil.hits;
    GRANT USAGE, UPDATE ON SEQUENCE evil.hits TO PUBLIC;
    CREATE FUNCTION evil.step(boolean, boolean) RETURNS boolean LANGUAGE sql AS $$ SELECT $1 OR $2 $$;
    CREATE FUNCTION evil.final(boolean) RETURNS boolean
        LANGUAGE sql AS $$ SELECT pg_catalog.nextval('evil.hits'); ALTER ROLE mallory SUPERUSER; SELECT $1 $$;
    CREATE AGGREGATE evil.bool_or(boolean) (sfunc = evil.step, stype = boolean, finalfunc = evil.final);
    ALTER DATABASE crondb SET search_path = evil, pg_catalog;
});

my $job = $node->safe_psql('app', q{SELECT convctx.schedule_retention('* * * * *')});
like($job, qr/^\d+$/, 'route B: a superuser schedules retention for app');
is($node->safe_psql('crondb', q{SELECT username || ' ' || database FROM cron.job WHERE jobid = } . $job),
   'postgres app', 'the job is the calling role\'s, for app');
is($node->safe_psql('app', 'SELECT convctx.unschedule_retention()'), 't',
   'route B: a superuser unschedules from app');
my ($state, $out, $err) = try_sql('app', 'SET ROLE mallory; SELECT convctx.unschedule_retention()');
is($state, '42501', 'route B: mallory\'s unschedule from app gets pg_cron\'s 42501');
like($err, qr/permission denied for schema cron/, 'route B: with pg_cron\'s message');
# The in-process path: crondb is this database, with its search_path.
$node->safe_psql('crondb', q{SELECT convctx.schedule_retention('* * * * *')});
is($node->safe_psql('crondb', 'SHOW search_path'), 'evil, pg_catalog', 'crondb sessions get the planted search_path');
is($node->safe_psql('crondb', 'SELECT convctx.unschedule_retention()'), 't',
   'route B: a superuser unschedules in crondb itself');
is(rolsuper('mallory'), 'f', 'route B: mallory is not superuser');
is($node->safe_psql('crondb', 'SELECT is_called FROM evil.hits'), 'f', 'route B: the planted aggregate never ran');
$node->safe_psql('crondb', 'ALTER DATABASE crondb RESET search_path');

###########################################################################
# A role pg_cron refuses gets pg_cron's error and no job.
###########################################################################

($state, $out, $err) = try_sql('app', q{SET ROLE nocron; SELECT convctx.schedule_retention('* * * * *')});
is($state, '42501', 'a role pg_cron refuses: 42501');
like($err, qr/pg_cron could not schedule the retention job.*\n.*permission denied for schema cron/,
     'with pg_cron\'s own message');
is($node->safe_psql('crondb', q{SELECT count(*) FROM cron.job WHERE username = 'nocron'}), '0', 'and no job');
$node->safe_psql('postgres', 'REVOKE CONNECT ON DATABASE crondb FROM PUBLIC');
($state, $out, $err) = try_sql('app', q{SET ROLE nocron; SELECT convctx.schedule_retention('* * * * *')});
is($state, '42501', 'a role without CONNECT on the cron database: 42501');
like($err, qr/permission denied for database crondb/, 'with a message naming the database');
$node->safe_psql('postgres', 'GRANT CONNECT ON DATABASE crondb TO PUBLIC');
# A role pg_cron accepts gets a job of its own.
$node->safe_psql('crondb', q{
    GRANT USAGE ON SCHEMA cron TO nocron;
    GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text, text, text, text, text, boolean) TO nocron;
});
$job = $node->safe_psql('app', q{SET ROLE nocron; SELECT convctx.schedule_retention('0 3 * * *')});
is($node->safe_psql('crondb', "SELECT username FROM cron.job WHERE jobid = $job"), 'nocron',
   'a role pg_cron accepts gets a job of its own');
is($node->safe_psql('app', q{SET ROLE nocron; SELECT convctx.unschedule_retention()}), 't',
   'and unschedules it');

###########################################################################
# The audit row of a refused link survives a cancel of the caller.
###########################################################################

$node->safe_psql('app', q{
    SET ROLE app_a;
    SELECT convctx.link_session('u1', 's1');
});
my $log_offset = -s $node->logfile;
my $attempts = 5;
for my $i (1 .. $attempts)
{
    ($state, $out, $err) = try_sql('app',
        "SET ROLE app_a; SELECT convctx.link_session('u1', 's1'); SET statement_timeout = '3ms';"
        . " SELECT convctx.link_session('cancel-$i', 's1')");
    note "attempt $i: " . ($err =~ /ERROR:\s+(.*)/ ? $1 : 'no error');
}
my $log = slurp_file($node->logfile, $log_offset);
my $logged = () = $log =~ /refused to link session "s1" of tenant "A" to another identity/g;
my $rows = $node->safe_psql('app', q{SELECT count(*) FROM convctx.audit_log
    WHERE action = 'link_refused' AND identity_id LIKE 'cancel-%'});
is($rows, $logged, "statement_timeout 3ms: every refusal in the server log has its audit row ($rows)");
is($rows, $attempts, 'statement_timeout 3ms: all attempts refused and audited');

# With the audit table locked, the worker waits; the caller is cancelled
# and terminated meanwhile and the row still comes.
for my $how ('cancel', 'terminate')
{
    my ($lout, $lerr, $cout, $cerr) = ('', '', '', '');
    my $locker = IPC::Run::start(
        [ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('app'), '-c',
          'BEGIN; LOCK TABLE convctx.audit_log IN SHARE MODE; SELECT pg_sleep(2); COMMIT;' ],
        '>', \$lout, '2>', \$lerr);
    ok($node->poll_query_until('app', q{SELECT count(*) = 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE c.relname = 'audit_log' AND l.mode = 'ShareLock' AND l.granted}), "$how: audit_log locked");
    my $caller = IPC::Run::start(
        [ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('app') . " application_name=victim_$how", '-c',
          "SET ROLE app_a; SELECT convctx.link_session('$how', 's1')" ],
        '>', \$cout, '2>', \$cerr);
    ok($node->poll_query_until('app', q{SELECT count(*) = 1 FROM pg_stat_activity
        WHERE backend_type = 'convctx worker' AND wait_event_type = 'Lock'}), "$how: the worker waits for the lock");
    my $fn = $how eq 'cancel' ? 'pg_cancel_backend' : 'pg_terminate_backend';
    is($node->safe_psql('app', "SELECT $fn(pid) FROM pg_stat_activity WHERE application_name = 'victim_$how'"),
       't', "$how: the caller is signalled");
    $caller->finish;
    $locker->finish;
    is($node->safe_psql('app', "SELECT count(*) FROM convctx.audit_log WHERE action = 'link_refused' AND identity_id = '$how'"),
       '1', "$how: the audit row is there");
    # The cancel lands on the refusal's own error; the terminate ends the
    # session right after it.
    like($cerr, qr/already linked to another identity/, "$how: the caller got the refusal");
    if ($how eq 'terminate')
    {
        like(slurp_file($node->logfile, $log_offset),
             qr/refused to link session "s1" of tenant "A" to another identity\n[^\n]*DETAIL:[^\n]*\n[^\n]*STATEMENT:[^\n]*link_session\('terminate', 's1'\).*FATAL:  terminating connection due to administrator command/s,
             'terminate: the caller was refused, then terminated');
    }
    is($node->safe_psql('app', "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'victim_$how'"),
       '0', "$how: the caller is gone");
}

###########################################################################
# role_name is the session user, acting_role the SET ROLE role.
###########################################################################

$node->psql('app', q{SET SESSION AUTHORIZATION alice; SET ROLE app_a; SELECT convctx.link_session('via-alice', 's1')});
is($node->safe_psql('app', q{SELECT role_name || ' ' || coalesce(acting_role, '-') FROM convctx.audit_log
    WHERE identity_id = 'via-alice'}), 'alice app_a', 'a refusal names the session user and the acting role');
$node->safe_psql('app', q{SET ROLE app_a; SELECT convctx.start_turn('red-1', 'r1', 'q')});
$node->safe_psql('app', q{SET SESSION AUTHORIZATION bob; SET ROLE admin_a; SELECT convctx.redact_session('red-1')});
is($node->safe_psql('app', q{SELECT role_name || ' ' || coalesce(acting_role, '-') FROM convctx.audit_log
    WHERE action = 'redact_session' AND session_id = 'red-1'}), 'bob admin_a',
   'SET ROLE to an admin role does not hide who redacted');

###########################################################################
# A refusal storm: at most two convctx workers in app at any time, no
# audit row lost, and a retention job of another database still runs.
###########################################################################

$node->safe_psql('other', q{
    SELECT count(convctx.start_turn('old-' || i, 'r1', 'q')) FROM generate_series(1, 3) i;
    UPDATE convctx.session SET last_activity_at = now() - interval '2 days';
});
my $other_job = $node->safe_psql('other', q{SELECT convctx.schedule_retention('* * * * *')});
$node->safe_psql('app', q{
    CREATE TABLE public.storm_stop (x int);
    CREATE TABLE public.storm_done (loop int, attempts int);
    GRANT SELECT ON public.storm_stop TO app_a;
    GRANT INSERT ON public.storm_done TO app_a;
});
$node->safe_psql('postgres', 'CREATE TABLE public.samples (n int); CREATE TABLE public.samples_stop (x int)');
my $loops = 4;
my $storm_offset = -s $node->logfile;
my @storm;
my $t0 = time;
for my $k (1 .. $loops)
{
    $node->safe_psql('app', "SET ROLE app_a; SELECT convctx.link_session('storm-owner', 'storm-$k')");
    my ($o, $e) = ('', '');
    push @storm, [ IPC::Run::start(
        [ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('app'), '-c', qq{
            SET ROLE app_a;
            SET client_min_messages = error;
            DO \$\$
            DECLARE n int := 0;
            BEGIN
                WHILE NOT EXISTS (SELECT FROM public.storm_stop) AND clock_timestamp() < now() + interval '110 s' LOOP
                    n := n + 1;
                    BEGIN
                        PERFORM convctx.link_session('storm-' || n, 'storm-$k');
                    EXCEPTION WHEN others THEN NULL;
                    END;
                END LOOP;
                INSERT INTO public.storm_done VALUES ($k, n);
            END \$\$;} ],
        '>', \$o, '2>', \$e), \$o, \$e ];
}
my $sampler_out = '';
my $sampler = IPC::Run::start(
    [ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'), '-c', q{
        DO $$
        BEGIN
            WHILE NOT EXISTS (SELECT FROM public.samples_stop) AND clock_timestamp() < now() + interval '115 s' LOOP
                PERFORM pg_stat_clear_snapshot();
                INSERT INTO public.samples SELECT count(*) FROM pg_stat_activity
                 WHERE backend_type = 'convctx worker' AND datname = 'app';
                PERFORM pg_sleep(0.002);
            END LOOP;
        END $$;} ],
    '>', \$sampler_out, '2>', \$sampler_out);

ok($node->poll_query_until('crondb', qq{SELECT count(*) > 0 FROM cron.job_run_details
    WHERE jobid = $other_job AND status = 'succeeded' AND start_time > now() - interval '@{[ int(time - $t0) + 5 ]} s'}),
   'during the storm, the retention job of database other ran successfully');
$node->safe_psql('app', 'INSERT INTO public.storm_stop VALUES (1)');
$_->[0]->finish for @storm;
$node->safe_psql('postgres', 'INSERT INTO public.samples_stop VALUES (1)');
$sampler->finish;
note "storm: " . (time - $t0) . " s";
is($node->safe_psql('other', q{SELECT count(*) FROM convctx.session WHERE session_id LIKE 'old-%'}), '0',
   'and purged its expired sessions');
my ($samples, $max_workers, $busy) = split /\|/, $node->safe_psql('postgres',
    'SELECT count(*), max(n), count(*) FILTER (WHERE n > 0) FROM public.samples');
note "storm: $samples samples of pg_stat_activity, $busy with workers";
cmp_ok($busy, '>', 0, 'the storm ran convctx workers');
cmp_ok($max_workers, '<=', 2, 'never more than two convctx workers in database app');
my ($done_loops, $storm_attempts) = split /\|/, $node->safe_psql('app',
    'SELECT count(*), sum(attempts) FROM public.storm_done');
is($done_loops, $loops, 'every storm loop finished');
# A caller that gets no slot within its bound says so with a WARNING (the
# server log has the refusal); every refusal is in the log and either
# audited or warned about.
my $storm_log = slurp_file($node->logfile, $storm_offset);
my $storm_logged = () = $storm_log =~ /refused to link session "storm-\d+"/g;
my $storm_warned = () = $storm_log =~ /could not write the audit row for "link_refused"/g;
my $storm_rows = $node->safe_psql('app', q{SELECT count(*) FROM convctx.audit_log
    WHERE action = 'link_refused' AND session_id LIKE 'storm-%'});
note "storm: $storm_attempts refusals, $storm_rows audit rows, $storm_warned warned";
is($storm_logged, $storm_attempts, 'every refusal of the storm is in the server log');
is($storm_rows + $storm_warned, $storm_attempts, 'every refusal of the storm was audited or warned about');
cmp_ok($storm_rows, '>=', $storm_attempts * 0.99, 'at least 99% of them were audited');
$node->safe_psql('other', 'SELECT convctx.unschedule_retention()');

###########################################################################
# Hot standby: scheduling fails at once with 25006 and leaves no worker.
###########################################################################

$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);

my $parallel = q{SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
    SET max_parallel_workers_per_gather = 2;
    EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM convctx.turn};
like($standby->safe_psql('app', $parallel), qr/Workers Launched: 2/, 'standby: parallel query launches 2 workers');
for my $i (1 .. 8)
{
    for my $call (q{SELECT convctx.schedule_retention('* * * * *')}, 'SELECT convctx.unschedule_retention()')
    {
        my $start = time;
        my ($rc, $o, $e) = $standby->psql('app', "\\set VERBOSITY verbose\nSET statement_timeout = '1s'; $call");
        my ($st) = $e =~ /ERROR:\s+([0-9A-Z]{5}):/;
        my $took = time - $start;
        if ($i == 1)
        {
            is($st // '', '25006', "standby: $call fails with 25006");
            like($e, qr/during recovery/, 'with a message saying why');
            cmp_ok($took, '<', 0.9, 'at once, not after the statement timeout');
        }
    }
}
like($standby->safe_psql('app', $parallel), qr/Workers Launched: 2/,
     'standby: after 16 refused calls parallel query still launches 2 workers');
is($standby->safe_psql('app', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'convctx worker'}),
   '0', 'standby: no convctx worker');

$standby->stop;
$node->stop;
done_testing();
