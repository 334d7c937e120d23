# start_turn idempotency under real concurrency: pgbench clients hammer a
# small, constantly colliding set of (session, request) keys. Afterwards
# every key has exactly one turn, every client was handed that turn's id,
# nothing failed, and each session's numbering is exact.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ConvctxChecks;

my $seconds = $ENV{CONVCTX_LOAD_SECONDS} // 30;
BAIL_OUT("CONVCTX_LOAD_SECONDS must be a positive integer, not '$seconds'")
  unless $seconds =~ /^[1-9][0-9]*$/;

my $clients = 16;
# Few keys per generation, and a fresh generation every second: once a
# key exists a repeat is an easy lookup, so only new keys make clients
# race each other's uncommitted first start. With 20 sessions x 50
# requests for the whole run a check-then-insert start_turn went unnoticed.
my $sessions = 10;
my $requests = 10;

my $node = PostgreSQL::Test::Cluster->new('load');
$node->init;
# Room for every client; statement logging would flood the log.
$node->append_conf('postgresql.conf', qq{
max_connections = 40
log_statement = none
});
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION convctx');
$node->safe_psql('postgres', q{
    -- every id handed to a client, to compare with what was stored
    CREATE TABLE seen_turn (session_id text NOT NULL, request_id text NOT NULL,
                            turn_id uuid NOT NULL);
    CREATE FUNCTION load_check(ok boolean, what text) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        IF ok IS NOT TRUE THEN
            RAISE EXCEPTION 'load check failed: %', what;
        END IF;
    END $$;
});

# A session gets at most $requests turns, far below the anonymous cap
# (convctx.max_session_turns = 500), so no turn is ever capped away.
# Half of the transactions hold the session lock across several round
# trips (explicit BEGIN), which widens the window for a racing duplicate.
# One start in ten links the session to its one fixed identity, racing
# the anonymous starts and the other linkers of that session.
my $script = PostgreSQL::Test::Utils::tempdir() . '/turn_load.sql';
PostgreSQL::Test::Utils::append_to_file($script, qq{
\\set s random(1, $sessions)
\\set r random(1, $requests)
\\set link random(1, 10)
\\set tx random(0, 1)
\\if :tx
BEGIN;
\\endif
WITH k AS MATERIALIZED (
    SELECT 'g' || extract(epoch FROM clock_timestamp())::bigint || '-s' || :s AS sid)
SELECT sid AS session_id,
       convctx.start_turn(sid, :r::text, 'question ' || :r,
                          CASE WHEN :link = 1 THEN 'user-' || sid END) AS turn_id
  FROM k
\\gset
INSERT INTO seen_turn VALUES (':session_id', :r::text, ':turn_id');
SELECT convctx.finalize_turn(':session_id', ':turn_id'::uuid,
                             'answer for ' || ':session_id' || '/' || :r);
SELECT load_check(count(*) <= 10 AND coalesce(bool_and(
                      answer_neutral = 'answer for ' || ':session_id' || '/' || request_id), true),
                  'recent_turns of ' || ':session_id')
  FROM convctx.recent_turns(':session_id', 10);
\\if :tx
COMMIT;
\\endif
});

my $pgbench = $node->config_data('--bindir') . '/pgbench';
my ($out, $err) = ('', '');
my $ok = IPC::Run::run(
    [
        $pgbench, '-n', '-c', $clients, '-j', 2, '-T', $seconds,
        '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
    ],
    '>', \$out, '2>', \$err,
    IPC::Run::timeout($seconds + $PostgreSQL::Test::Utils::timeout_default));
note "pgbench stdout:\n$out";
note "pgbench stderr:\n$err" if $err ne '';

ok($ok, 'pgbench exits 0');
like($out, qr/^number of failed transactions: 0 \(/m, 'pgbench reports 0 failed transactions');
unlike("$out\n$err", qr/aborted/i, 'no pgbench client aborted');
my ($processed) = $out =~ /^number of transactions actually processed: (\d+)/m;
my ($tps)       = $out =~ /^tps = ([0-9.]+)/m;
ok(defined $processed && $processed > 0, 'pgbench processed transactions');
diag(sprintf('%s transactions in %d s, %s tps, %d clients',
        $processed // '?', $seconds, $tps // '?', $clients));

my $q = sub { $node->safe_psql('postgres', shift) };

is($q->('SELECT count(*) FROM seen_turn'), $processed // -1,
    'every transaction recorded the turn id it was handed');
is($q->(q{
    SELECT count(*) FROM (SELECT tenant_id, session_id, request_id FROM convctx.turn
                           WHERE replaced_by_turn_id IS NULL
                           GROUP BY 1, 2, 3 HAVING count(*) <> 1) d}),
    '0', 'one current turn per (tenant, session, request)');
is($q->('SELECT count(DISTINCT (session_id, request_id)) FROM seen_turn'),
    $q->('SELECT count(*) FROM convctx.turn'),
    'as many turns as distinct keys the clients used');
is($q->(q{
    SELECT count(*) FROM seen_turn s
     WHERE NOT EXISTS (SELECT FROM convctx.turn t
                        WHERE t.tenant_id = '' AND t.session_id = s.session_id
                          AND t.request_id = s.request_id AND t.turn_id = s.turn_id
                          AND t.replaced_by_turn_id IS NULL)}),
    '0', 'every client was handed the stored turn of its key');
is($q->(q{
    SELECT count(*) FROM convctx.turn
     WHERE finalized_at IS NULL OR deleted_at IS NOT NULL
        OR answer_neutral IS DISTINCT FROM 'answer for ' || session_id || '/' || request_id
        OR question_neutral IS DISTINCT FROM 'question ' || request_id}),
    '0', 'every turn finalized with the answer of its key');

# No turn was capped (see above), so each session's turns must be numbered
# exactly 1..last_turn_no: a lost, doubled or leaked number breaks this.
is($q->(q{
    SELECT count(*)
      FROM convctx.session s
      FULL JOIN (SELECT tenant_id, session_id, count(*) AS n, count(DISTINCT turn_no) AS d,
                        min(turn_no) AS lo, max(turn_no) AS hi
                   FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
     WHERE s.last_turn_no IS DISTINCT FROM t.hi
        OR t.lo IS DISTINCT FROM 1 OR t.n IS DISTINCT FROM t.hi OR t.d IS DISTINCT FROM t.n}),
    '0', 'session.last_turn_no = max(turn_no) and turn_no runs 1..last_turn_no without gaps');

# The live turn and answer counts that conversation_state reads must have
# kept up with every racing start and finalize.
check_session_columns($q);

# A session linked at any point must carry its fixed identity on every turn
# (backfill and later starts both run under the session lock).
note $q->('SELECT count(*) FILTER (WHERE identity_id IS NOT NULL) || \' of \' || count(*)'
      . ' FROM convctx.session') . ' sessions linked';
is($q->(q{
    SELECT count(*) FROM convctx.session s
      LEFT JOIN convctx.session_link l USING (tenant_id, session_id)
      JOIN convctx.turn t USING (tenant_id, session_id)
     WHERE t.identity_id IS DISTINCT FROM s.identity_id
        OR l.identity_id IS DISTINCT FROM s.identity_id
        OR s.identity_id <> 'user-' || s.session_id}),
    '0', 'linked sessions carry their one identity on the session, the link and every turn');
is($q->('SELECT count(*) FROM convctx.audit_log'), '0', 'no link was refused');

# Guard against a vacuous pass: start_turn takes a turn number before it
# learns a racing duplicate won, and gives it back, so each such race
# leaves two session-row updates that made no turn. Backends flush their
# table counters when they exit.
$node->poll_query_until('postgres', q{
    SELECT count(*) = 0 FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()})
  or die 'pgbench connections did not go away';
my $races = $q->(q{
    SELECT ((SELECT n_tup_upd FROM pg_stat_user_tables
              WHERE schemaname = 'convctx' AND relname = 'session')
            - ((SELECT count(*) FROM convctx.turn) - (SELECT count(*) FROM convctx.session))
            - (SELECT count(*) FROM convctx.session_link)) / 2});
diag("$races duplicate start_turn calls raced a concurrent first start of their key");
SKIP:
{
    skip 'run too short to be sure of a race', 1 if $seconds < 10;
    cmp_ok($races, '>', 0, 'the racing-duplicate path of start_turn was exercised');
}

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no backend terminated by a signal');
unlike($log, qr/PANIC/, 'no PANIC in the server log');
unlike($log, qr/\bERROR:/, 'no ERROR in the server log');

done_testing();
