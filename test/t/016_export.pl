# convctx export, the command-line tool (client/): the file it writes is a
# header, exactly the records convctx.export_records() builds on the server,
# and a trailer that counts them; filters, tenants, roles, and the exit
# codes of bad options, server errors and failed connections.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;

my $node = PostgreSQL::Test::Cluster->new('export');
$node->init;
$node->start;
my $tool = $node->config_data('--bindir') . '/convctx';
ok(-x $tool, 'convctx is installed next to pg_dump');

$node->safe_psql('postgres', q{
    CREATE DATABASE app;
});
$node->safe_psql('app', q{
    CREATE EXTENSION convctx;
    CREATE ROLE admin_acme LOGIN IN ROLE convctx_admin;
    CREATE ROLE platform LOGIN IN ROLE convctx_admin;
    CREATE ROLE app_acme LOGIN IN ROLE convctx_app;
    SELECT convctx.bind_role_tenant('admin_acme', 'acme');
    SELECT convctx.bind_role_all_tenants('platform');
    SELECT convctx.bind_role_tenant('app_acme', 'acme');
    SET convctx.tenant = 'acme';
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'Q1 😀 𠀀 "x" \ y', identity_id => 'u1',
                                 meta => '{"channel": "web"}'), 'A1');
    SELECT convctx.replace_turn('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)), 'A1, corrected');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', 'Q2'), 'A2');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r3', 'Q3'), 'A3');
    SELECT convctx.record_retrieval('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)),
        '[{"id": "c1", "text": "t", "n": 1.000000000000000005, "big": 12345678901234567890}]');
    SELECT convctx.record_clarification('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)),
        '[{"question": "Which year?"}]', '{"year": "2024"}');
    SELECT convctx.context_add('s1', ARRAY['n1'], 'u1');
    SELECT convctx.start_turn('s2', 'r1', 'anonymous');
    SELECT convctx.context_save('s3', '{"activeNodeIds": ["n3"]}', 'u2');
    SET convctx.tenant = 'globex';
    SELECT convctx.start_turn('s1', 'r1', 'globex question');
});
$node->safe_psql('app', q{SET ROLE admin_acme; SELECT convctx.redact_turn('s1',
    (SELECT turn_id FROM convctx.admin_session_turns('s1') WHERE request_id = 'r2'))});
$node->safe_psql('app', q{SET convctx.tenant = 'acme';
    SELECT convctx.set_summary('s1', 'summary', (SELECT turn_id FROM convctx.recent_turns('s1', 1)), 1)});

# Run the tool; returns (exit code, stdout, stderr).
sub tool
{
    my ($stdout, $stderr) = ('', '');
    IPC::Run::run([ $tool, @_ ], '>', \$stdout, '2>', \$stderr);
    return ($? >> 8, $stdout, $stderr);
}
my @conn = ('-h', $node->host, '-p', $node->port, '-d', 'app');

# The records as the server builds them for a role.
sub server_lines
{
    my ($role, $args, $tenant) = @_;
    my $set = $tenant ? "SET convctx.tenant = '$tenant';" : '';
    my $out = $node->safe_psql('app', qq{SET ROLE $role; SET TimeZone = 'UTC'; $set
        SELECT line FROM convctx.export_records($args)});
    return $out eq '' ? [] : [ split /\n/, $out ];
}

# Check a file: header, the server's records, trailer; returns the header.
sub check_file
{
    my ($what, $text, $expected, $tenant) = @_;
    my @lines = split /\n/, $text, -1;
    is(pop @lines, '', "$what: the file ends with a newline");
    my $header = decode_json($lines[0]);
    my $trailer = decode_json($lines[-1]);
    is($header->{type}, 'header', "$what: the first line is the header");
    is($header->{format}, 'convctx.jsonl', "$what: of format convctx.jsonl");
    is($header->{format_version}, 1, "$what: version 1");
    is($header->{source_tenant}, $tenant, "$what: of tenant '$tenant'");
    like($header->{exported_at}, qr/^\d{4}-\d\d-\d\dT[\d:.]+\+00:00$/, "$what: exported_at in UTC");
    is($trailer->{type}, 'end', "$what: the last line is the trailer");
    is($trailer->{lines}, scalar(@lines), "$what: the trailer counts every line");
    my @records = @lines[ 1 .. $#lines - 1 ];
    is_deeply(\@records, $expected, "$what: the records are the server's, byte for byte");
    my %counts;
    $counts{ decode_json($_)->{type} }++ for @records;
    $counts{$_} //= 0 for keys %{ $trailer->{records} };
    is_deeply($trailer->{records}, \%counts, "$what: the trailer counts each record type");
    return $header;
}

my ($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme');
is($rc, 0, 'export as the tenant administrator exits 0') or diag($err);
my $all = server_lines('admin_acme', '');
cmp_ok(scalar(@$all), '>=', 10, 'tenant acme has records of every kind');
check_file('whole tenant', $out, $all, 'acme');
my %types = map { decode_json($_)->{type} => 1 } @$all;
is(join(',', sort keys %types), 'clarification,context,retrieval,session,summary,turn', 'every record type');
like($out, qr/"big": 12345678901234567890/, 'a big integer keeps every digit');
like($out, qr/"n": 1\.000000000000000005/, 'a long decimal keeps every digit');
unlike($out, qr/globex/, 'nothing of another tenant');

# to a file, with progress
my $file = PostgreSQL::Test::Utils::tempdir() . '/acme.jsonl';
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '-f', $file, '-P');
is($rc, 0, 'export to a file exits 0');
is($out, '', 'and writes nothing to stdout');
like($err, qr/convctx: \d+ records, \d+ records\/s, [\d.]+ s\n$/, 'progress on stderr');
check_file('file', slurp_file($file), $all, 'acme');

# the file is UTF-8 whatever client encoding the environment or the
# connection string ask for: the server converts
{
    local $ENV{PGCLIENTENCODING} = 'LATIN1';
    ($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme');
    is($rc, 0, 'PGCLIENTENCODING=LATIN1: exit 0') or diag($err);
    check_file('PGCLIENTENCODING=LATIN1', $out, $all, 'acme');
    ($rc, $out, $err) = tool('export', '-d', $node->connstr('app') . ' client_encoding=LATIN1', '-U', 'admin_acme');
    check_file('client_encoding=LATIN1 in the connection string', $out, $all, 'acme');
}

# filters
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--identity', 'u1');
my $header = check_file('identity u1', $out, server_lines('admin_acme', "identity_id => 'u1'"), 'acme');
is_deeply($header->{filters}, { identity_id => 'u1' }, 'the header names the filter');
unlike($out, qr/"session_id": "s2"/, 'an identity export leaves out the anonymous session');
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--session', 's2');
check_file('session s2', $out, server_lines('admin_acme', "'s2'"), 'acme');
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--since', '2100-01-01');
check_file('since', $out, [], 'acme');

# the portable messages: a line per conversation, no header or trailer
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--format', 'messages');
is($rc, 0, '--format=messages exits 0') or diag($err);
my $messages = $node->safe_psql('app', q{SET ROLE admin_acme; SET TimeZone = 'UTC';
    SELECT line FROM convctx.export_messages()});
is($out, "$messages\n", 'the lines are the server\'s, byte for byte, and nothing else');
# decoded without UTF-8 decoding, so that texts compare with this file's bytes
my ($s1) = grep { $_->{session_id} eq 's1' } map { JSON::PP->new->decode($_) } split /\n/, $out;
is(join(',', map { "$_->{role}:$_->{content}" } @{ $s1->{messages} }),
    'user:Q1 😀 𠀀 "x" \\ y,assistant:A1, corrected,user:Q3,assistant:A3',
    'current live turns as user and assistant messages, tombstones and old versions left out');
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--format', 'csv');
is($rc, 1, 'an unknown format: exit 1');
like($err, qr/unknown format "csv"/, 'says which');

# a role bound to every tenant names the tenant
($rc, $out, $err) = tool('export', @conn, '-U', 'platform', '--tenant', 'globex');
is($rc, 0, 'export with --tenant exits 0') or diag($err);
check_file('tenant globex', $out, server_lines('platform', '', 'globex'), 'globex');
like($out, qr/globex question/, 'the tenant it named');

# refusals and their exit codes
($rc, $out, $err) = tool('export', @conn, '-U', 'app_acme');
is($rc, 1, 'an app role: exit 1');
like($err, qr/42501 permission denied for function export_records/, 'with the SQLSTATE and the reason');
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--tenant', 'globex');
is($rc, 1, 'a bound administrator naming another tenant: exit 1');
like($err, qr/42501 permission denied for tenant "globex"/, 'refused');
($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme', '--since', 'not a time');
is($rc, 1, 'a bad time: exit 1');
like($err, qr/22007 invalid input syntax for type timestamp with time zone/, 'with the SQLSTATE');
($rc, $out, $err) = tool('export', '-h', $node->host, '-p', $node->port, '-d', 'nosuchdb');
is($rc, 2, 'a failed connection: exit 2');
like($err, qr/database "nosuchdb" does not exist/, 'says why');
{
    # a lock timeout is not an error of the export: exit 4, run it again
    my $locker = $node->background_psql('app');
    $locker->query_safe('BEGIN');
    $locker->query_safe('LOCK TABLE convctx.session IN ACCESS EXCLUSIVE MODE');
    local $ENV{PGOPTIONS} = '-c lock_timeout=100ms';
    ($rc, $out, $err) = tool('export', @conn, '-U', 'admin_acme');
    is($rc, 4, 'a lock timeout: exit 4');
    like($err, qr/55P03 canceling statement due to lock timeout/, 'says why');
    $locker->query_safe('COMMIT');
    $locker->quit;
}
($rc, $out, $err) = tool('export', '--bogus');
is($rc, 1, 'an unknown option: exit 1');
like($err, qr/unrecognized option/, 'says which');
($rc, $out, $err) = tool('export', @conn, '-f', '/nonexistent/dir/x.jsonl');
is($rc, 1, 'a file that cannot be written: exit 1');
like($err, qr/could not open "\/nonexistent\/dir\/x.jsonl" for writing/, 'says which');
($rc, $out, $err) = tool('frob');
is($rc, 1, 'an unknown command: exit 1');
($rc, $out, $err) = tool('--version');
like($out, qr/^convctx \(convctx\) \d+\.\d+\.\d+$/m, '--version');
($rc, $out, $err) = tool('export', '--help');
is($rc, 0, 'export --help exits 0');
like($out, qr/--identity=ID/, 'and lists the options');

done_testing();
