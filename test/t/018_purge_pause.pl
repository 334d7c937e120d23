# The throttle of purge_all, convctx.purge_pause: called outside a
# transaction block, purge_all pauses after each pass that deleted
# something, once that pass has committed, so the rows it deleted are gone
# for everyone while it waits and it holds no lock; the pause shows in
# pg_stat_activity as wait event Extension; pg_cancel_backend ends it at
# once; only a superuser sets it. No timing is asserted: the pause is
# long (10 s) so that the test can look at it, and it is cancelled.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('pause');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION convctx;
    CREATE ROLE pause_admin LOGIN IN ROLE convctx_admin;
    SELECT convctx.bind_role_tenant('pause_admin', '');
    -- 30 expired anonymous sessions of one turn: three passes of 10
    SELECT count(convctx.start_turn('old-' || i, 'r1', 'q')) FROM generate_series(1, 30) i;
    UPDATE convctx.session SET last_activity_at = now() - interval '2 days';
    ALTER DATABASE postgres SET convctx.purge_pause = '10s';
});

is($node->safe_psql('postgres', q{LOAD 'convctx';
                                   SELECT setting || unit, boot_val, context FROM pg_settings
                                   WHERE name = 'convctx.purge_pause'}),
   '10000ms|500|superuser', 'convctx.purge_pause: milliseconds, 500 by default, superuser only');
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT convctx.current_tenant(); SET convctx.purge_pause = 0},
    extra_params => ['-U', 'pause_admin']);
like($err, qr/permission denied to set parameter "convctx.purge_pause"/,
    'an administrator of a tenant cannot set it');

my $purge = $node->background_psql('postgres', on_error_stop => 0, extra_params => ['-U', 'pause_admin']);
$purge->query_until(qr/started/, q{
\echo started
CALL convctx.purge_all(10);
});
ok($node->poll_query_until('postgres', q{
    SELECT count(*) = 1 FROM pg_stat_activity
     WHERE query LIKE 'CALL convctx.purge_all(10)%' AND state = 'active'
       AND wait_event_type = 'Extension'}),
   'purge_all waits between passes, as wait event Extension');
is($node->safe_psql('postgres', q{SELECT count(*) FROM convctx.session WHERE session_id LIKE 'old-%'}),
   '20', 'the first pass committed before the pause: 10 sessions gone for everyone');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
     WHERE a.query LIKE 'CALL convctx.purge_all(10)%' AND l.locktype IN ('relation', 'tuple', 'transactionid')}),
   '0', 'and it holds no lock while it waits');
is($node->safe_psql('postgres', q{
    SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CALL convctx.purge_all(10)%'}),
   't', 'the pause can be cancelled');
$purge->quit;
like($node->safe_psql('postgres', q{SELECT count(*) FROM convctx.session WHERE session_id LIKE 'old-%'}),
     qr/^(10|20)$/, 'the cancelled call kept what its committed passes deleted');

# Inside a transaction block purge_all does not pause (its passes are one
# transaction); with the pause at 0 nothing pauses either.
$node->safe_psql('postgres', q{BEGIN; CALL convctx.purge_all(10); COMMIT;},
    extra_params => ['-U', 'pause_admin'], timeout => 9);
is($node->safe_psql('postgres', q{SELECT count(*) FROM convctx.session WHERE session_id LIKE 'old-%'}),
   '0', 'a purge_all in a transaction block finished within the length of one pause');
$node->stop;
done_testing();
