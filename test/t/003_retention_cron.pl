# Retention on a real pg_cron schedule: schedule_retention from the pg_cron
# database itself and from another database (through the background
# worker), then wait until pg_cron has run both jobs and the expired rows
# are gone while the fresh ones stay.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pg_cron = `$ENV{PG_CONFIG} --pkglibdir 2>/dev/null`;
chomp $pg_cron;
BAIL_OUT('pg_cron is not installed: apt-get install postgresql-15-cron')
  unless -e "$pg_cron/pg_cron.so" || -e '/usr/lib/postgresql/15/lib/pg_cron.so';

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 20
});
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');
$node->safe_psql('postgres', 'CREATE EXTENSION convctx');
$node->safe_psql('postgres', 'CREATE ROLE regress_cron_other SUPERUSER LOGIN');
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION convctx');

# Three expired anonymous sessions and a fresh one in each database.
my $expired_sessions_sql = q{
    SELECT count(convctx.start_turn(s, 'r' || i, 'q')) FROM
        unnest(ARRAY['old-1', 'old-2', 'old-3', 'fresh']) s, generate_series(1, 4) i;
    UPDATE convctx.session SET last_activity_at = now() - interval '2 days' WHERE session_id LIKE 'old-%';
};
$node->safe_psql($_, $expired_sessions_sql) for ('postgres', 'app');

# From another database: the job runs in app, scheduling again replaces it.
my $job = $node->safe_psql('app', q{SELECT convctx.schedule_retention('*/5 * * * *')});
like($job, qr/^\d+$/, 'schedule_retention from another database returns a job id');
is($node->safe_psql('app', q{SELECT convctx.schedule_retention('* * * * *')}), $job,
   'scheduling again replaces the job');
is($node->safe_psql('postgres', q{
    SELECT count(*) || ' ' || string_agg(schedule || ' ' || command || ' ' || database, ',')
    FROM cron.job WHERE jobname = 'convctx-retention'}),
   '1 * * * * * CALL convctx.purge_all() app', 'one job, with the new schedule, for database app');

# From the pg_cron database itself, as another role.
my $job2 = $node->safe_psql('postgres',
    q{SET ROLE regress_cron_other; SELECT convctx.schedule_retention('* * * * *')});
like($job2, qr/^\d+$/, 'schedule_retention in the pg_cron database returns a job id');
isnt($job2, $job, 'a job of its own');

# Wait for pg_cron to run both jobs (it schedules by the minute).
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT d.jobid) = 2 FROM cron.job_run_details d
    JOIN cron.job j USING (jobid)
    WHERE j.jobname = 'convctx-retention' AND d.status = 'succeeded'}),
   'pg_cron ran both retention jobs successfully');

for my $db ('postgres', 'app')
{
    ok($node->poll_query_until($db, q{SELECT count(*) = 0 FROM convctx.session WHERE session_id LIKE 'old-%'}),
       "$db: expired sessions purged");
    is($node->safe_psql($db, q{SELECT string_agg(DISTINCT session_id, ',') || ' ' || count(*) FROM convctx.turn}),
       'fresh 4', "$db: the fresh session keeps its turns");
    # purge_all runs purge pass by pass; each pass is audited with its counts
    is($node->safe_psql($db, q{SELECT sum((details->>'anonymous_turns')::int) FROM convctx.audit_log WHERE action = 'purge'}),
         '12', "$db: the run is in the audit log with its counts");
}

is($node->safe_psql('app', 'SELECT convctx.unschedule_retention()'), 't', 'unschedule from another database');
is($node->safe_psql('app', 'SELECT convctx.unschedule_retention()'), 'f', 'nothing left to unschedule');
is($node->safe_psql('postgres', q{SELECT count(*) FROM cron.job WHERE database = 'app'}), '0',
   'the job of app is gone');
is($node->safe_psql('postgres', q{SET ROLE regress_cron_other; SELECT convctx.unschedule_retention()}), 't',
   'unschedule in the pg_cron database');

my ($rc, $out, $err) = $node->psql('app', q{SELECT convctx.schedule_retention('not a schedule')});
isnt($rc, 0, 'an invalid schedule is refused');
like($err, qr/pg_cron could not schedule the retention job/, 'with a message that names pg_cron');

$node->stop;
done_testing();
