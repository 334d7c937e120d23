# The turn lifecycle under read committed, repeatable read and serializable
# (set per database and per role), with concurrent writers on overlapping
# sessions and repeated request ids. pgbench retries every transaction that
# fails with 40001 or 40P01, with the same request id. Afterwards:
#   - every ERROR in the server log carries a documented retryable SQLSTATE
#     (40001, 40P01; 55P03 in the lock_timeout variant), never 23505, XX000
#     or anything else;
#   - exactly one turn per (session, request id), numbered without gaps,
#     and the counts in convctx.session match the turns;
#   - purge_all called outside a transaction block runs its passes at read
#     committed whatever the default, and inside one at the caller's level
#     without failing; pg_cron runs the retention job in a repeatable read
#     database and for a serializable role.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $seconds = $ENV{CONVCTX_LEVEL_SECONDS} // 8;
BAIL_OUT("CONVCTX_LEVEL_SECONDS must be a positive integer, not '$seconds'")
  unless $seconds =~ /^[1-9][0-9]*$/;
my $clients = 6;

my $pg_cron = `$ENV{PG_CONFIG} --pkglibdir 2>/dev/null`;
chomp $pg_cron;
BAIL_OUT('pg_cron is not installed: apt-get install postgresql-15-cron')
  unless -e "$pg_cron/pg_cron.so" || -e '/usr/lib/postgresql/15/lib/pg_cron.so';

my $node = PostgreSQL::Test::Cluster->new('levels');
$node->init;
# %e puts the SQLSTATE of every message in the log; statements are not logged.
$node->append_conf('postgresql.conf', q{
max_connections = 40
log_statement = none
log_line_prefix = '%m [%p] %e '
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 20
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron');

# One database per variant; the level comes from the database or the role.
my @variants = (
    { name => 'read committed', db => 'lv_rc', role => 'regress_lv_rc',
      allowed => [qw(40001 40P01)], level => 'read committed' },
    { name => 'repeatable read (database default)', db => 'lv_rr', role => 'regress_lv_rr',
      allowed => [qw(40001 40P01)], level => 'repeatable read',
      db_set => q{SET default_transaction_isolation = 'repeatable read'} },
    { name => 'serializable (role default)', db => 'lv_ser', role => 'regress_lv_ser',
      allowed => [qw(40001 40P01)], level => 'serializable',
      role_set => q{SET default_transaction_isolation = 'serializable'} },
    { name => 'repeatable read with lock_timeout (role)', db => 'lv_lt', role => 'regress_lv_lt',
      allowed => [qw(40001 40P01 55P03)], level => 'repeatable read', lock_timeout => 1,
      role_set => q{SET default_transaction_isolation = 'repeatable read'},
      role_set2 => q{SET lock_timeout = '2ms'} },
);

# Records the isolation level of each statement of purge that deletes
# sessions (a statement trigger on convctx.session, test only).
my $setup = q{
    CREATE EXTENSION convctx;
    CREATE TABLE public.purge_level (level text NOT NULL, at timestamptz DEFAULT clock_timestamp());
    CREATE FUNCTION public.note_purge_level() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO public.purge_level (level) VALUES (current_setting('transaction_isolation'));
        RETURN NULL;
    END $$;
    CREATE TRIGGER note_purge_level AFTER DELETE ON convctx.session
        FOR EACH STATEMENT EXECUTE FUNCTION public.note_purge_level();
};
# Expired anonymous sessions for the retention runs.
my $add_expired_sessions = sub {
    my ($db, $prefix) = @_;
    $node->safe_psql($db, qq{
        SELECT count(convctx.start_turn('$prefix' || s, 'r' || i, 'q'))
          FROM generate_series(1, 3) s, generate_series(1, 3) i;
        UPDATE convctx.session SET last_activity_at = now() - interval '2 days'
         WHERE session_id LIKE '$prefix%';
    });
};

for my $v (@variants)
{
    $node->safe_psql('postgres', "CREATE ROLE $v->{role} SUPERUSER LOGIN");
    $node->safe_psql('postgres', "CREATE DATABASE $v->{db} OWNER $v->{role}");
    $node->safe_psql('postgres', "ALTER DATABASE $v->{db} $v->{db_set}") if $v->{db_set};
    $node->safe_psql('postgres', "ALTER ROLE $v->{role} IN DATABASE $v->{db} $v->{role_set}")
      if $v->{role_set};
    $node->safe_psql('postgres', "ALTER ROLE $v->{role} IN DATABASE $v->{db} $v->{role_set2}")
      if $v->{role_set2};
    $node->safe_psql($v->{db}, $setup);
    is($node->safe_psql($v->{db}, 'SHOW transaction_isolation', extra_params => ['-U', $v->{role}]),
       $v->{level}, "$v->{name}: the role's transactions run at $v->{level}");
}

# purge_all by CALL outside a transaction block: every pass at read
# committed, whatever the default; inside a block: at the caller's level.
for my $v (@variants)
{
    my $db = $v->{db};
    $node->safe_psql($db, 'TRUNCATE public.purge_level');
    $add_expired_sessions->($db, 'call-');
    $node->safe_psql($db, 'CALL convctx.purge_all(2)', extra_params => ['-U', $v->{role}]);
    # several passes (how many follows the batch and the sessions' turns)
    is($node->safe_psql($db, q{SELECT string_agg(DISTINCT level, ',') || ' ' || (count(*) >= 3)
                                 FROM public.purge_level}),
       'read committed true', "$v->{name}: CALL purge_all ran its passes at read committed");
    $add_expired_sessions->($db, 'block-');
    $node->safe_psql($db, 'TRUNCATE public.purge_level');
    $node->safe_psql($db, 'BEGIN; CALL convctx.purge_all(2); COMMIT;',
                     extra_params => ['-U', $v->{role}]);
    is($node->safe_psql($db, q{SELECT string_agg(DISTINCT level, ',') FROM public.purge_level}),
       $v->{level}, "$v->{name}: purge_all in a transaction block runs at $v->{level}");
    is($node->safe_psql($db, q{SELECT count(*) FROM convctx.session
                                WHERE session_id LIKE 'call-%' OR session_id LIKE 'block-%'}),
       '0', "$v->{name}: both purge_all runs purged the expired sessions");
}

# pg_cron: the retention job of a repeatable read database (scheduled by a
# superuser, so the database default applies) and of a serializable role.
# It runs at the next minute, while the load below goes on.
for my $db ('lv_rr', 'lv_ser')
{
    $add_expired_sessions->($db, 'cron-');
    $node->safe_psql($db, 'TRUNCATE public.purge_level');
}
like($node->safe_psql('lv_rr', q{SELECT convctx.schedule_retention('* * * * *')}),
     qr/^\d+$/, 'retention scheduled in the repeatable read database');
like($node->safe_psql('lv_ser', q{SELECT convctx.schedule_retention('* * * * *')},
                      extra_params => ['-U', 'regress_lv_ser']),
     qr/^\d+$/, 'retention scheduled by the serializable role');

# One request = one transaction on one session (its x twin for redaction,
# or a session of its own whose identity is erased), in the lock order of
# the README: start_turn first. A retry runs again with
# the same random values, so with the same request id. A request that
# corrects its answer (op 2) has a request id of its own: a later request
# repeating it would get the original turn, replaced, and 55000, which is
# that API's answer to a repeat, not a retryable error.
my $script = PostgreSQL::Test::Utils::tempdir() . '/levels.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set s random(1, 6)
\set r random(1, 30)
\set op random(1, 12)
\if :op = 2
\set r random(31, 1000000000)
\endif
BEGIN;
SELECT convctx.start_turn('s:s', 'r:r', 'question :r',
                          CASE WHEN :op = 1 THEN 'user-:s' END) AS turn_id
\gset
\if :op = 5
SELECT convctx.record_retrieval('s:s', ':turn_id'::uuid, '[{"id": "c:r", "text": "chunk :r"}]',
                                '[{"id": "c:r"}]');
\endif
SELECT convctx.context_add('s:s', ARRAY['n:r']) IS NOT NULL AS ctx;
\if :op = 8
SELECT convctx.context_save('s:s', convctx.context_load('s:s'));
\endif
SELECT convctx.finalize_turn('s:s', ':turn_id'::uuid, 'answer :r');
\if :op = 6
SELECT convctx.set_summary('s:s', 'summary through :r', ':turn_id'::uuid, 0);
\endif
\if :op = 2
SELECT convctx.replace_turn('s:s', ':turn_id'::uuid, 'answer :r') IS NOT NULL AS replaced;
\endif
\if :op = 3
SELECT convctx.link_session('user-:s', 's:s');
\endif
\if :op = 4
SELECT convctx.start_turn('x:s', 'r:r', 'question :r') IS NOT NULL AS started;
SELECT convctx.redact_session('x:s');
\endif
\if :op = 7
SELECT convctx.start_turn('x:s', 'r:r', 'question :r') AS xturn
\gset
SELECT convctx.redact_turn('x:s', ':xturn'::uuid);
\endif
\if :op = 9
SELECT convctx.start_turn('e:s-:r', 'r:r', 'question :r', 'eu-:s') IS NOT NULL AS started;
SELECT convctx.erase_identity('eu-:s');
\endif
SELECT count(*) AS recent FROM convctx.recent_turns('s:s', 10);
SELECT convctx.conversation_state('s:s') IS NOT NULL AS state;
COMMIT;
});

my $pgbench = $node->config_data('--bindir') . '/pgbench';
for my $v (@variants)
{
    my $db = $v->{db};
    my $from = -s $node->logfile;
    # pgbench retries only 40001 and 40P01: a client whose lock wait timed
    # out stops (an app would retry it itself), so the lock_timeout variant
    # runs pgbench in short rounds that start every client again.
    my $rounds = $v->{lock_timeout} ? 4 : 1;
    my $round_seconds = $v->{lock_timeout} ? int(($seconds + 3) / 4) : $seconds;
    my ($out, $err, $ok, $processed, $retried) = ('', '', 1, 0, 0);
    for my $round (1 .. $rounds)
    {
        my ($o, $e) = ('', '');
        $ok &&= IPC::Run::run(
            [
                $pgbench, '-n', '-c', $clients, '-j', 2, '-T', $round_seconds,
                '--max-tries=1000', '--failures-detailed',
                '-f', $script, '-h', $node->host, '-p', $node->port, '-U', $v->{role}, $db
            ],
            '>', \$o, '2>', \$e,
            IPC::Run::timeout($round_seconds + $PostgreSQL::Test::Utils::timeout_default));
        $processed += $1 if $o =~ /^number of transactions actually processed: (\d+)/m;
        $retried += $1 if $o =~ /^number of transactions retried: (\d+)/m;
        $out .= $o;
        $err .= $e;
    }
    note "$v->{name}: pgbench stdout:\n$out";
    note "$v->{name}: pgbench stderr:\n" . substr($err, 0, 4000) if $err ne '';
    diag(sprintf('%s: %d transactions, %d retried, %d clients, %d s', $v->{name},
                 $processed, $retried, $clients, $rounds * $round_seconds));
    ok($processed > 0, "$v->{name}: pgbench processed transactions");
    if ($v->{lock_timeout})
    {
        unlike($err, qr/ERROR:  (?!canceling statement due to lock timeout|could not serialize|deadlock detected)/,
               "$v->{name}: clients stopped only on a lock timeout");
    }
    else
    {
        ok($ok, "$v->{name}: pgbench exits 0");
        like($out, qr/^number of failed transactions: 0 \(/m,
             "$v->{name}: no transaction failed after its retries");
        unlike("$out\n$err", qr/aborted/i, "$v->{name}: no client aborted");
    }

    # Every ERROR logged while this variant ran, by SQLSTATE.
    my $log = slurp_file($node->logfile, $from);
    my %codes;
    my @other;
    for my $line (split /\n/, $log)
    {
        next unless $line =~ /^\S+ \S+ \S+ \[\d+\] (\w{5}) (ERROR|FATAL|PANIC):  (.*)$/;
        $codes{$1}++;
        push @other, $line unless grep { $_ eq $1 } @{ $v->{allowed} };
    }
    diag("$v->{name}: errors by SQLSTATE: "
         . (join(', ', map { "$_ x$codes{$_}" } sort keys %codes) || 'none'));
    is(join("\n", @other), '', "$v->{name}: only errors with SQLSTATE "
       . join('/', @{ $v->{allowed} }) . ' in the server log');

    my $q = sub { $node->safe_psql($db, shift) };
    is($q->(q{
        SELECT count(*) FROM (SELECT session_id, request_id FROM convctx.turn
                               GROUP BY 1, 2 HAVING count(DISTINCT turn_no) <> 1) d}),
       '0', "$v->{name}: exactly one turn per (session, request id)");
    is($q->(q{
        SELECT count(*) FROM (SELECT session_id, request_id FROM convctx.turn
                               WHERE replaced_by_turn_id IS NULL
                               GROUP BY 1, 2 HAVING count(*) <> 1) d}),
       '0', "$v->{name}: one current version per (session, request id)");
    is($q->(q{
        SELECT count(*)
          FROM convctx.session s
          FULL JOIN (SELECT tenant_id, session_id, count(DISTINCT turn_no) AS d,
                            min(turn_no) AS lo, max(turn_no) AS hi,
                            count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS live,
                            count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL
                                               AND finalized_at IS NOT NULL) AS answers
                       FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
         WHERE s.session_id NOT LIKE 'cron-%'
           AND (s.last_turn_no IS DISTINCT FROM t.hi OR t.lo IS DISTINCT FROM 1
                OR t.d IS DISTINCT FROM t.hi
                OR s.live_turns IS DISTINCT FROM t.live
                OR s.live_answers IS DISTINCT FROM t.answers)}),
       '0', "$v->{name}: session counts match the turns, numbered 1..last_turn_no");
    is($q->(q{
        SELECT count(*) FROM convctx.turn
         WHERE session_id LIKE 's%' AND replaced_by_turn_id IS NULL
           AND (finalized_at IS NULL OR answer_neutral IS DISTINCT FROM 'answer ' || substr(request_id, 2))}),
       '0', "$v->{name}: every current turn carries the answer of its request");
    is($q->(q{SELECT count(*) FROM convctx.turn WHERE session_id LIKE 'x%' AND deleted_at IS NULL}),
       '0', "$v->{name}: every turn of a redacted session is a tombstone");
    is($q->(q{SELECT count(*) FROM convctx.audit_log WHERE action = 'link_refused'}),
       '0', "$v->{name}: no link was refused");
}

# pg_cron ran both jobs successfully, and they purged what had expired.
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT d.jobid) = 2 FROM cron.job_run_details d
      JOIN cron.job j USING (jobid)
     WHERE j.jobname = 'convctx-retention' AND d.status = 'succeeded'}),
   'pg_cron ran the retention job of both databases successfully');
note $node->safe_psql('postgres', q{
    SELECT string_agg(j.database || ' ' || j.username || ' ' || d.status || ' ' || coalesce(d.return_message, ''), E'\n')
      FROM cron.job_run_details d JOIN cron.job j USING (jobid)});
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
     WHERE j.jobname = 'convctx-retention' AND d.status <> 'succeeded' AND d.status <> 'running'}),
   '0', 'no retention job run failed');
for my $db ('lv_rr', 'lv_ser')
{
    is($node->safe_psql($db, q{SELECT count(*) FROM convctx.session WHERE session_id LIKE 'cron-%'}),
       '0', "$db: the pg_cron job purged the expired sessions");
    is($node->safe_psql($db, q{SELECT string_agg(DISTINCT level, ',') FROM public.purge_level}),
       'read committed', "$db: the pg_cron job ran its passes at read committed");
}

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no backend terminated by a signal');
unlike($log, qr/PANIC/, 'no PANIC in the server log');

done_testing();
