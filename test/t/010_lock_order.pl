# The lock order of docs/locking.md under load: app clients run one
# request per transaction on a few overlapping sessions, calling the
# functions of the request in every order an app may use (context first,
# retrieval first, the README's order, a saved snapshot first), while
# administrators' clients erase identities, redact sessions and purge
# expired ones at the same time. No transaction may deadlock: pgbench
# counts deadlock failures (--failures-detailed) and the server log must
# not report one. The run must also have done work of every kind, so that
# the test can fail.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ConvctxChecks;

my $seconds = $ENV{CONVCTX_LOCK_SECONDS} // 15;
BAIL_OUT("CONVCTX_LOCK_SECONDS must be a positive integer, not '$seconds'")
  unless $seconds =~ /^[1-9][0-9]*$/;

my $node = PostgreSQL::Test::Cluster->new('locks');
$node->init;
# A short deadlock_timeout finds a deadlock quickly, so that a broken
# order shows up as many failures rather than a few slow ones. Sessions
# expire after 2 s idle, so purge has work while the requests run; the
# keyed stand-in lets every erasure find the identity's sessions again.
$node->append_conf('postgresql.conf', qq{
max_connections = 30
log_statement = none
deadlock_timeout = 50ms
convctx.session_ttl = 2
convctx.identity_hash_key = 'lock-order-test-key-0123456789abcdef'
});
$node->start;

$node->safe_psql('postgres', q{
    CREATE EXTENSION convctx;
    CREATE ROLE lock_app LOGIN IN ROLE convctx_app;
    CREATE ROLE lock_admin LOGIN IN ROLE convctx_admin;
    SELECT convctx.bind_role_tenant('lock_app', 'T');
    SELECT convctx.bind_role_tenant('lock_admin', 'T');
    GRANT CREATE ON SCHEMA public TO lock_app;
});

# Helpers of the app, run as the app: calls whose refusal is a possible
# outcome of the race and not a lock problem (a turn redacted or erased
# between the read and the call, a session linked to another identity)
# are caught; a deadlock is not.
$node->safe_psql('postgres', q{
    SET ROLE lock_app;
    -- retrieval for the newest finalized turn of the session, before any other call
    CREATE FUNCTION public.retrieval_first(s text) RETURNS void
    LANGUAGE plpgsql AS $$
    DECLARE
        t uuid;
    BEGIN
        SELECT turn_id INTO t FROM convctx.recent_turns(s, 1);
        IF t IS NOT NULL THEN
            PERFORM convctx.record_retrieval(s, t,
                jsonb_build_array(jsonb_build_object('id', 'c' || s, 'text', 'chunk')));
        END IF;
    EXCEPTION WHEN object_not_in_prerequisite_state OR no_data_found THEN
        NULL;
    END $$;
    CREATE FUNCTION public.try_link(s text, who text) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM convctx.link_session(who, s);
    EXCEPTION WHEN SQLSTATE 'CV001' THEN
        NULL;
    END $$;
});

# Four linked sessions (two per identity) and anonymous ones of a new
# generation every 2 s (their ids carry it), so that older ones go idle
# and expire while newer ones are busy. Contexts name the identities as
# user_id in anonymous sessions too, so erasures lock those sessions.
$node->safe_psql('postgres', q{
    SET convctx.tenant = 'T';
    SELECT convctx.link_session('u' || (i % 2 + 1), 'L' || i) FROM generate_series(1, 4) i;
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $pick = q{
\set n random(1, 12)
\set who random(1, 2)
\set q random(1, 1000000000)
SELECT CASE WHEN :n <= 4 THEN 'L' || :n
            ELSE 'a' || (extract(epoch FROM clock_timestamp())::bigint / 2) || '-' || :n END AS s
\gset
};
my %app = (
    # the README's order
    readme => q{
BEGIN;
SELECT convctx.start_turn(':s', 'r:q', 'question') AS t \gset
SELECT convctx.record_retrieval(':s', ':t', jsonb_build_array(jsonb_build_object('id', 'c:q', 'text', 'x')));
SELECT convctx.finalize_turn(':s', ':t', 'answer');
SELECT convctx.context_add(':s', ARRAY['n:q'], 'u:who');
COMMIT;
},
    # the context first, then the turn
    context_first => q{
BEGIN;
SELECT convctx.context_add(':s', ARRAY['n:q'], 'u:who');
SELECT convctx.start_turn(':s', 'r:q', 'question') AS t \gset
SELECT convctx.record_retrieval(':s', ':t', jsonb_build_array(jsonb_build_object('id', 'c:q', 'text', 'x')));
SELECT convctx.finalize_turn(':s', ':t', 'answer');
COMMIT;
},
    # load, save the snapshot, then the turn
    save_first => q{
BEGIN;
SELECT convctx.context_load(':s');
SELECT convctx.context_save(':s', jsonb_build_object('activeNodeIds', jsonb_build_array('n:q')), 'u:who');
SELECT convctx.start_turn(':s', 'r:q', 'question') AS t \gset
SELECT convctx.finalize_turn(':s', ':t', 'answer');
COMMIT;
},
    # a retrieval recorded for the previous turn first, then a link, the turn, the context
    retrieval_first => q{
BEGIN;
SELECT public.retrieval_first(':s');
SELECT public.try_link(':s', 'u:who') WHERE :n > 4 AND :q % 10 = 0;
SELECT convctx.start_turn(':s', 'r:q', 'question') AS t \gset
SELECT convctx.finalize_turn(':s', ':t', 'answer');
SELECT convctx.context_add(':s', ARRAY['n:q']);
COMMIT;
},
);
my %admin = (
    erase  => q{SELECT convctx.erase_identity('u:who');},
    redact => q{SELECT convctx.redact_session(':s');},
    purge  => q{SELECT convctx.purge(500);},
);

my (@app_args, @admin_args);
for my $name (sort keys %app)
{
    my $f = "$dir/$name.sql";
    PostgreSQL::Test::Utils::append_to_file($f, $pick . $app{$name});
    push @app_args, '-f', "$f\@1";
}
for my $name (sort keys %admin)
{
    my $f = "$dir/$name.sql";
    # administrators act now and then, not in a tight loop
    PostgreSQL::Test::Utils::append_to_file($f, $pick . $admin{$name} . "\n\\sleep 20 ms\n");
    push @admin_args, '-f', "$f\@1";
}

my $pgbench = $node->config_data('--bindir') . '/pgbench';
my @common = ('-n', '-T', $seconds, '--failures-detailed', '-h', $node->host, '-p', $node->port);
my ($app_out, $app_err, $admin_out, $admin_err) = ('', '', '', '');
my $timeout = IPC::Run::timeout($seconds + $PostgreSQL::Test::Utils::timeout_default);
my $app_run = IPC::Run::start(
    [ $pgbench, @common, '-c', 4, '-j', 1, '-U', 'lock_app', @app_args, 'postgres' ],
    '>', \$app_out, '2>', \$app_err, $timeout);
my $admin_run = IPC::Run::start(
    [ $pgbench, @common, '-c', 3, '-j', 1, '-U', 'lock_admin', @admin_args, 'postgres' ],
    '>', \$admin_out, '2>', \$admin_err, $timeout);
my $app_ok   = $app_run->finish;
my $admin_ok = $admin_run->finish;
note "app pgbench stdout:\n$app_out";
note "app pgbench stderr:\n$app_err" if $app_err ne '';
note "admin pgbench stdout:\n$admin_out";
note "admin pgbench stderr:\n$admin_err" if $admin_err ne '';

for my $run ([ 'app', $app_ok, $app_out, $app_err ], [ 'admin', $admin_ok, $admin_out, $admin_err ])
{
    my ($who, $ok, $out, $err) = @$run;
    my ($deadlocks) = $out =~ /^number of deadlock failures: (\d+)/m;
    my ($failed)    = $out =~ /^number of failed transactions: (\d+)/m;
    my ($done)      = $out =~ /^number of transactions actually processed: (\d+)/m;
    diag(sprintf('%s clients: %s transactions, %s failed, %s deadlocks',
            $who, $done // '?', $failed // '?', $deadlocks // '?'));
    ok($ok, "$who pgbench exits 0");
    unlike("$out\n$err", qr/aborted/i, "no $who client aborted");
    is($deadlocks, '0', "$who pgbench reports 0 deadlock failures");
    is($failed,    '0', "$who pgbench reports 0 failed transactions");
    cmp_ok($done // 0, '>', 0, "$who clients processed transactions");
}

my $q = sub { $node->safe_psql('postgres', shift) };

# work of every kind was done, concurrently with the requests
cmp_ok($q->(q{SELECT count(*) FROM convctx.turn WHERE finalized_at IS NOT NULL}), '>', 0,
    'requests stored answers');
cmp_ok($q->(q{SELECT count(*) FROM convctx.audit_log
               WHERE action = 'erase_identity' AND (details->>'turns')::int > 0}), '>', 0,
    'erasures erased turns');
cmp_ok($q->(q{SELECT count(*) FROM convctx.audit_log
               WHERE action = 'redact_session' AND (details->>'turns')::int > 0}), '>', 0,
    'redactions redacted turns');
cmp_ok($q->(q{SELECT count(*) FROM convctx.audit_log
               WHERE action = 'purge' AND (details->>'anonymous_sessions')::int > 0}), '>', 0,
    'purges deleted expired sessions');

# Backends flush their table counters when they exit.
$node->poll_query_until('postgres', q{
    SELECT count(*) = 0 FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()})
  or die 'pgbench connections did not go away';
cmp_ok($q->(q{SELECT n_tup_ins FROM pg_stat_user_tables
               WHERE schemaname = 'convctx' AND relname = 'turn_retrieval'}), '>', 0,
    'requests recorded retrievals');

# and the data kept its invariants
check_session_columns($q);
is($q->(q{
    SELECT count(*) FROM convctx.conversation_context c
     WHERE NOT EXISTS (SELECT FROM convctx.session s
                        WHERE s.tenant_id = c.tenant_id AND s.session_id = c.conversation_id)}),
    '0', 'every context has its session row');
$node->stop;
my $log = slurp_file($node->logfile);
my $logged = () = $log =~ /deadlock detected/g;
is($logged, 0, 'no deadlock in the server log');
unlike($log, qr/terminated by signal|PANIC/, 'no backend crashed');

done_testing();
