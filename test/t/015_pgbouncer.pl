# convctx behind pgbouncer in transaction pooling mode, the set-up of most
# hosted apps: many clients share a few server connections, one
# transaction at a time.
#
# 1. The unsafe way leaks: a plain SET convctx.tenant by one client stays on
#    the server connection and the next client of that connection acts for
#    that tenant (shown with a pool of one connection, so it is certain).
# 2. convctx.tenant_scope = transaction refuses that leftover value (42501);
#    convctx.use_tenant chooses the tenant for one transaction, the tenant
#    argument of begin_turn for one call.
# 3. 16 clients of 8 tenants through a pool of 4 connections, every request
#    the two calls of the README (begin_turn, then finalize_turn, each naming
#    its tenant), with request ids that repeat (retries) on sessions whose
#    ids every tenant uses, checking the history begin_turn returns: no
#    request ever reads or writes another tenant's turn, and every request
#    id has exactly one turn.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use File::Basename qw(dirname);

my $pgbouncer = $ENV{PGBOUNCER} // '/usr/sbin/pgbouncer';
plan skip_all => "pgbouncer not found at $pgbouncer (Debian package pgbouncer)"
  unless -x $pgbouncer;
my $transactions = $ENV{CONVCTX_POOLED_TRANSACTIONS} // 700;    # per client

my $node = PostgreSQL::Test::Cluster->new('pooled');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 40\n");
$node->start;

# svc_session: the service role as most apps set it up (bound to every
# tenant, the default scope); chat_service: the same with the guard on, as the
# README recommends for transaction pooling.
$node->safe_psql('postgres', q{
    CREATE EXTENSION convctx;
    CREATE ROLE svc_session LOGIN IN ROLE convctx_app;
    CREATE ROLE chat_service LOGIN IN ROLE convctx_app;
    SELECT convctx.bind_role_all_tenants('svc_session');
    SELECT convctx.bind_role_all_tenants('chat_service');
    ALTER ROLE chat_service SET convctx.tenant_scope = 'transaction';
    CREATE DATABASE leak;
});
$node->safe_psql('leak', q{
    CREATE EXTENSION convctx;
    SELECT convctx.bind_role_all_tenants('svc_session');
    SELECT convctx.bind_role_all_tenants('chat_service');
});

# pgbouncer on loopback in front of the node's socket, configured by the
# example the README points to (examples/pgbouncer/pgbouncer.ini) with this
# test's host, ports and paths: database "one" (database leak) has a pool
# of one server connection, "app" (postgres) the example's pool of 4, for
# 16 clients.
my $dir = PostgreSQL::Test::Utils::tempdir();
my $port = PostgreSQL::Test::Cluster::get_free_port();
my ($host, $node_port) = ($node->host, $node->port);
my $example = dirname(__FILE__) . '/../../examples/pgbouncer';
my $ini = slurp_file("$example/pgbouncer.ini");
my $pool = qr/^chat = host=\S+ port=\d+ dbname=chat (pool_size=4)$/m;
like($ini, $pool, 'the example pools database chat with 4 connections in transaction mode')
  and like($ini, qr/^pool_mode = transaction$/m, 'in transaction mode');
$ini =~ s/$pool/one = host=$host port=$node_port dbname=leak pool_size=1\napp = host=$host port=$node_port dbname=postgres $1/;
$ini =~ s/^listen_port = \d+$/listen_port = $port/m;
$ini =~ s/^(auth_file|logfile|pidfile) = (\S+)$/$1 = $dir\/$2/mg;
PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", $ini);
PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt",
    slurp_file("$example/userlist.txt") . qq{"svc_session" ""\n});
my ($bouncer_out, $bouncer_err) = ('', '');
my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
    '>', \$bouncer_out, '2>', \$bouncer_err);

my $psql = $node->config_data('--bindir') . '/psql';
# One client: a new connection through pgbouncer that sends sql as one
# query (each statement its own transaction unless sql says BEGIN) and
# leaves. Returns (exit code, stdout, stderr); errors verbose, with SQLSTATE.
sub client
{
    my ($db, $user, $sql) = @_;
    my ($out, $err) = ('', '');
    IPC::Run::run([ $psql, '-X', '-Atq', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
            '-h', '127.0.0.1',
            '-p', $port, '-U', $user, '-d', $db, '-c', $sql ],
        '>', \$out, '2>', \$err);
    chomp $out;
    return ($? >> 8, $out, $err);
}

# wait until pgbouncer accepts connections
my $up = 0;
for (1 .. 100)
{
    my ($rc) = client('one', 'svc_session', 'SELECT 1');
    if ($rc == 0) { $up = 1; last; }
    select(undef, undef, undef, 0.1);
}
ok($up, 'pgbouncer accepts connections') or BAIL_OUT("pgbouncer did not start: $bouncer_err");

# 1. The leak: client A sets the tenant and leaves; client B, on the same
#    server connection, never names a tenant and acts for A's.
my ($rc, $out, $err) = client('one', 'svc_session', q{SET convctx.tenant = 'acme'});
is($rc, 0, 'client A sets convctx.tenant with a plain SET');
($rc, $out, $err) = client('one', 'svc_session',
    q{SELECT convctx.current_tenant() || ' ' || pg_catalog.pg_backend_pid()});
like($out, qr/^acme \d+$/, "client B, which named no tenant, acts for A's tenant (the leak): '$out'");
($rc, $out, $err) = client('one', 'svc_session',
    q{SELECT convctx.start_turn('shared-session', 'b-1', 'question of client B') IS NOT NULL});
is($out, 't', 'and client B writes a turn');
is($node->safe_psql('leak',
        q{SELECT tenant_id FROM convctx.turn WHERE request_id = 'b-1'}),
    'acme', "into A's tenant");
client('one', 'svc_session', 'RESET convctx.tenant');

# 2. The guard: the same two clients as role chat_service (scope "transaction").
($rc, $out, $err) = client('one', 'chat_service', q{SET convctx.tenant = 'acme'});
is($rc, 0, 'client A of chat_service sets convctx.tenant with a plain SET');
($rc, $out, $err) = client('one', 'chat_service', q{SELECT convctx.current_tenant()});
isnt($rc, 0, 'client B of chat_service is refused the leftover tenant');
like($err, qr/convctx\.tenant was not set in this transaction/, 'with the reason');
($rc, $out, $err) = client('one', 'chat_service',
    q{SELECT convctx.start_turn('shared-session', 'b-2', 'question of client B')});
like($err, qr/ERROR:  42501:/, 'a write is refused with 42501');
is($node->safe_psql('leak', q{SELECT count(*) FROM convctx.turn WHERE request_id = 'b-2'}),
    '0', 'and writes nothing');
($rc, $out, $err) = client('one', 'chat_service', q{BEGIN;
SELECT convctx.use_tenant('globex');
SELECT convctx.current_tenant();
COMMIT;});
is($out, "globex\nglobex", 'use_tenant chooses the tenant for the transaction');
($rc, $out, $err) = client('one', 'chat_service', q{SELECT convctx.current_tenant()});
isnt($rc, 0, 'and it does not outlive the transaction');
($rc, $out, $err) = client('one', 'chat_service', q{SELECT convctx.use_tenant('globex')});
like($err, qr/can only be used in transaction blocks/, 'use_tenant outside a transaction block is refused');
($rc, $out, $err) = client('one', 'chat_service',
    q{SELECT repeated FROM convctx.begin_turn('shared-session', 'b-3', 'question of client B', tenant => 'globex')});
is($out, 'f', 'begin_turn naming its tenant needs neither a transaction block nor use_tenant');
is($node->safe_psql('leak', q{SELECT tenant_id FROM convctx.turn WHERE request_id = 'b-3'}),
    'globex', 'and writes into the tenant it names');
($rc, $out, $err) = client('one', 'chat_service', q{SELECT convctx.current_tenant()});
isnt($rc, 0, 'the tenant it names does not outlive the call');

# 3. Many clients, few connections.
my $script = q{
\set t random(1, 8)
\set s random(1, 40)
\set r random(1, 150)
SELECT min(b.turn_id::text) AS turn,
       1 / (count(*) FILTER (WHERE h->>'question_neutral' NOT LIKE '% of tenant-:t'
                                OR h->>'answer_neutral' NOT LIKE '% of tenant-:t') = 0)::int AS own_tenant_only
  FROM convctx.begin_turn('session-:s', 'request-:r', 'question :r of tenant-:t', 50, tenant => 'tenant-:t') b
       LEFT JOIN LATERAL jsonb_array_elements(b.history) h ON true \gset
SELECT convctx.finalize_turn('session-:s', ':turn', 'answer :r of tenant-:t', tenant => 'tenant-:t');
};
PostgreSQL::Test::Utils::append_to_file("$dir/request.sql", $script);
my $pgbench = $node->config_data('--bindir') . '/pgbench';
my ($bench_out, $bench_err) = ('', '');
IPC::Run::run([ $pgbench, '-n', '-c', 16, '-j', 2, '-t', $transactions, '-f', "$dir/request.sql",
        '-h', '127.0.0.1', '-p', $port, '-U', 'chat_service', 'app' ],
    '>', \$bench_out, '2>', \$bench_err);
my $bench_rc = $? >> 8;
note "pgbench stdout:\n$bench_out";
note "pgbench stderr:\n$bench_err" if $bench_err ne '';
my ($done) = $bench_out =~ /^number of transactions actually processed: (\d+)/m;
is($bench_rc, 0, 'pgbench through pgbouncer exits 0 (every request read its own tenant only)');
is($done, 16 * $transactions, "all $done requests of 16 clients ran");
cmp_ok($done // 0, '>=', 10_000, 'at least 10,000 pooled requests');

# The server really was shared: at most 4 server connections served chat_service.
my $q = sub { $node->safe_psql('postgres', shift) };
my $servers = $q->(q{SELECT count(*) FROM pg_stat_activity WHERE usename = 'chat_service' AND datname = 'postgres'});
ok($servers >= 1 && $servers <= 4, "the 16 clients shared $servers server connections (pool of 4)");

is($q->(q{SELECT count(*) FROM convctx.turn
           WHERE tenant_id LIKE 'tenant-%'
             AND (question_neutral NOT LIKE '% of ' || tenant_id
                  OR answer_neutral NOT LIKE '% of ' || tenant_id)}),
    '0', 'no turn was written into another tenant');
is($q->(q{SELECT count(*) FROM (SELECT 1 FROM convctx.turn WHERE tenant_id LIKE 'tenant-%'
           GROUP BY tenant_id, session_id, request_id HAVING count(*) > 1) d}),
    '0', 'every request id has exactly one turn');
my $distinct = $q->(q{SELECT count(*) FROM convctx.turn WHERE tenant_id LIKE 'tenant-%'});
cmp_ok($distinct, '<', $done, "retried request ids were not stored twice ($distinct turns for $done requests)");
is($q->(q{SELECT count(*) FROM convctx.turn WHERE tenant_id LIKE 'tenant-%' AND finalized_at IS NULL}),
    '0', 'every turn was finalized');
is($q->(q{
    SELECT count(*)
      FROM convctx.session s
      JOIN (SELECT tenant_id, session_id, count(*) AS live, max(turn_no) AS last
              FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
     WHERE s.tenant_id LIKE 'tenant-%'
       AND (s.live_turns <> t.live OR s.live_answers <> t.live OR s.last_turn_no <> t.last
            OR t.last <> t.live)}),
    '0', 'each session numbers its turns 1..n with exact counts');
is($q->(q{SELECT count(DISTINCT tenant_id) FROM convctx.turn WHERE tenant_id LIKE 'tenant-%'}),
    '8', 'all 8 tenants wrote');

$bouncer->kill_kill;
$node->stop;
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'no backend crashed');

done_testing();
