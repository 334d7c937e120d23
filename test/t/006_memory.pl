# Flat memory footprint: one backend makes CONVCTX_MEMORY_CALLS calls of
# each hot function and its memory does not grow.
#
# One psql session, so one backend (its pid is checked at every probe),
# runs memtest.drive (test/memory/driver.sql), a PL/pgSQL procedure that
# makes the calls inside that backend and commits every 1000 calls
# as an app's transactions would. Nothing runs elsewhere on its behalf: no
# parallel workers (max_parallel_workers_per_gather = 0) and no refused
# link, whose audit row a background worker would write.
#
# Per function: the first 10% of the calls warm the backend up (plans,
# catalog caches, the cap and replace paths, malloc's heap); then the
# backend's memory is probed at the start of the measured 90% and after
# each ninth of it, ten probes in all. A probe reads RssAnon from
# /proc/<pid>/status (private anonymous memory; VmRSS would also count the
# shared buffers the backend touched) and sums total_bytes of
# pg_backend_memory_contexts. The report gives both at the start and the
# end. Asserted, against a limit of 8 bytes per measured call:
#   - memory contexts: growth from start to end (exact, no noise seen);
#   - RssAnon, steady growth: the smaller of the start-to-end growth and
#     9 x the median growth of the nine steps. A steady per-call leak
#     raises both. malloc's heap also moves by itself, with the contexts
#     unchanged: in one-off steps (up to ~200 kB seen in one step of
#     nine), which raise the start-to-end growth only, and at 10^6 calls
#     in swings of up to +-400 kB from step to step, which move the median
#     but not the end. The start-to-end growth must also stay within the
#     limit plus 512 kB.
# Two controls run the same way: "noop", the driver loop alone, must stay
# flat, and "leak", which leaks about 14 bytes per call (a prepared
# statement per 300 calls), must exceed the limit in both measures, or the
# probes prove nothing.
#
#   CONVCTX_MEMORY_CALLS=20000    default, the CI setting (about 1.5 minutes)
#   CONVCTX_MEMORY_CALLS=1000000  the full setting: 10^6 calls per function
use strict;
use warnings;
use File::Basename qw(dirname);
use Time::HiRes qw(time);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $calls = $ENV{CONVCTX_MEMORY_CALLS} // 20000;
# Below 20000 calls the limit (8 bytes per measured call) comes within
# reach of malloc's noise in RssAnon.
BAIL_OUT("CONVCTX_MEMORY_CALLS must be an integer >= 20000, not '$calls'")
  unless $calls =~ /^[1-9][0-9]*$/ && $calls >= 20000;

my $warmup       = int($calls / 10);
my $measured     = $calls - $warmup;
my $steps        = 9;
my $commit_every = 1000;
# Turns replace_turn corrects and record_retrieval records for: 20 calls
# of each per turn, 20 turns per session.
my $pool = int($calls / 20);

# The limit is half of what a 16-byte-per-call leak adds over the measured
# calls: 8 bytes per call, at the CI setting 18000 calls x 8 B = 140.6 kB
# against the 281 kB of a 16-byte leak (31 kB in every step). A leak of
# 8 bytes per call on average fails it, for instance the smallest palloc
# chunk (24 bytes with its header) lost every third call. The counts are
# exact: no limit depends on time.
my $limit_per_call    = 8;
my $limit             = $limit_per_call * $measured;
my $step_allowance_kb = 512;

my @functions = qw(
  start_turn finalize_turn recent_turns recent_turns_json link_session
  replace_turn context_merge context_add context_load context_save
  conversation_state context_history record_retrieval is_followup);

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
# Small caps so anonymous sessions hit theirs within the warm-up and
# contexts stay at tens of ids.
$node->append_conf('postgresql.conf', q{
log_statement = none
jit = off
max_parallel_workers_per_gather = 0
convctx.max_session_turns = 20
convctx.max_active_nodes = 48
});
$node->start;

my $driver = slurp_file(dirname(__FILE__) . '/../memory/driver.sql');
$node->safe_psql('postgres', 'CREATE EXTENSION convctx');
$node->safe_psql('postgres', $driver);
my $t0 = time;
$node->safe_psql('postgres', "CALL memtest.fixture($pool)");
note sprintf('fixture: 200 read sessions, 500 contexts, %d pool turns in %.1f s', $pool, time - $t0);

# A generous per-query timeout: 10 ms per call on top of the default. The
# assertions do not depend on it.
my $psql = $node->background_psql('postgres',
    timeout => $PostgreSQL::Test::Utils::timeout_default + $calls / 100);
$psql->set_query_timer_restart();
$psql->query_safe('SET client_min_messages = warning');

my $probe = sub {
    my @v = split /\|/, $psql->query_safe('SELECT * FROM memtest.probe()');
    return { pid => $v[0], rss_kb => $v[1], ctx => $v[2], used => $v[3], contexts => $v[4] };
};

my $fresh = $probe->();
my $pid   = $fresh->{pid};
note sprintf('backend %d at connect: RssAnon %d kB, contexts %d B in %d contexts',
    $pid, $fresh->{rss_kb}, $fresh->{ctx}, $fresh->{contexts});
note sprintf('%d calls per function: %d warm-up, %d measured, commit every %d; limit %d B (%d B/call)',
    $calls, $warmup, $measured, $commit_every, $limit, $limit_per_call);

my ($max_rss, $max_ctx);
my $started = time;
for my $fn ('noop', @functions, 'leak')
{
    my $t = time;
    $psql->query_safe("CALL memtest.drive('$fn', 1, $warmup, $commit_every)");
    my @p = ($probe->());
    my $done = $warmup;
    for my $s (1 .. $steps)
    {
        my $to = $warmup + int($measured * $s / $steps);
        $psql->query_safe("CALL memtest.drive('$fn', $done + 1, $to, $commit_every)");
        push @p, $probe->();
        $done = $to;
    }
    my $secs = time - $t;
    my ($first, $last) = ($p[0], $p[-1]);

    my $rss = ($last->{rss_kb} - $first->{rss_kb}) * 1024;
    my $ctx = $last->{ctx} - $first->{ctx};
    my @rss_steps = map { $p[$_]->{rss_kb} - $p[ $_ - 1 ]->{rss_kb} } 1 .. $steps;
    my $median = $steps * (sort { $a <=> $b } @rss_steps)[ int($steps / 2) ] * 1024;
    my $steady = $rss < $median ? $rss : $median;
    note sprintf('%-18s RssAnon %6d -> %6d kB (%+5d kB, steady %+4d kB)  '
          . 'contexts %9d -> %9d B (%+8d B, %d -> %d contexts)  %.0f s',
        $fn, $first->{rss_kb}, $last->{rss_kb}, $rss / 1024, $steady / 1024,
        $first->{ctx}, $last->{ctx}, $ctx, $first->{contexts}, $last->{contexts}, $secs);
    note sprintf('%-18s RssAnon steps kB: %s (9 x median %+d kB)', '', join(' ', @rss_steps), $median / 1024);
    is(join(' ', map { $_->{pid} } @p), join(' ', ($pid) x @p), "$fn: every call ran in backend $pid");

    if ($fn eq 'leak')
    {
        cmp_ok($ctx, '>', $limit, 'positive control: a ~14 B/call leak exceeds the limit in memory contexts');
        cmp_ok($steady, '>', $limit, 'positive control: a ~14 B/call leak exceeds the limit in steady RssAnon growth');
        note sprintf('leak control: %.1f B/call in contexts, %.1f B/call in RssAnon',
            $ctx / $measured, $rss / $measured);
        next;
    }
    cmp_ok($ctx, '<', $limit, "$fn: memory contexts grow less than $limit B over $measured calls");
    cmp_ok($steady, '<', $limit, "$fn: steady RssAnon growth less than $limit B over $measured calls");
    cmp_ok($rss, '<', $limit + $step_allowance_kb * 1024,
        "$fn: RssAnon grows less than $limit B + $step_allowance_kb kB over $measured calls");
    next if $fn eq 'noop';
    $max_rss = $rss if !defined $max_rss || $rss > $max_rss;
    $max_ctx = $ctx if !defined $max_ctx || $ctx > $max_ctx;
}
my $end = $probe->();
note sprintf('backend %d at the end: RssAnon %d kB, contexts %d B in %d contexts; %.0f s of calls',
    $end->{pid}, $end->{rss_kb}, $end->{ctx}, $end->{contexts}, time - $started);
diag(sprintf('memory: %d functions x %d calls, max RssAnon growth %d kB, max context growth %d kB',
        scalar @functions, $calls, $max_rss / 1024, $max_ctx / 1024));
$psql->quit;

# The calls did their work (a guard against a vacuous pass).
my $q = sub { $node->safe_psql('postgres', shift) };
is($q->(q{SELECT count(*) FROM convctx.turn WHERE session_id LIKE 'st-ln-%'}),
    int(($calls + 3) / 10), 'start_turn: one turn per linked-session call (its retries made none)');
is($q->(q{SELECT max(n) FROM (SELECT count(*) AS n FROM convctx.turn
                               WHERE session_id LIKE 'st-an-%' GROUP BY session_id) s}),
    '20', 'start_turn: anonymous sessions were capped at 20 turns');
is($q->(q{SELECT sum(t.record_version - 1) FROM memtest.pool p JOIN convctx.turn t USING (turn_id)}),
    $calls, 'replace_turn: every call made a new version');
is($q->(q{SELECT count(*) FROM convctx.turn_retrieval WHERE session_id LIKE 'rp-%'}),
    $pool, 'record_retrieval: every pool turn has its record');
is($q->('SELECT count(*) FROM convctx.audit_log'), '0', 'no link was refused');

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no backend terminated by a signal');
unlike($log, qr/out of memory/i, 'no out of memory in the server log');
unlike($log, qr/\bERROR:/, 'no ERROR in the server log');

done_testing();
