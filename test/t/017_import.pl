# convctx import, the command-line tool (client/): a tenant exported,
# imported into a fresh database and exported again gives the same file;
# bad input is refused with its file, line and SQLSTATE, its exit code, and
# nothing of its conversation written; and the histories the real
# libraries wrote (test/import/fixtures) come in from their tables.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use File::Basename qw(dirname);
use Cwd qw(abs_path);

my $fixtures = abs_path(dirname(__FILE__) . '/../import/fixtures');

my $node = PostgreSQL::Test::Cluster->new('import');
$node->init;
$node->append_conf('postgresql.conf', "timezone = 'UTC'");
$node->start;
my $tool = $node->config_data('--bindir') . '/convctx';
ok(-x $tool, 'convctx is installed next to pg_dump');

# app: the source; fresh: an empty database; libs: the libraries' tables.
$node->safe_psql('postgres', q{
    CREATE DATABASE app;
    CREATE DATABASE fresh;
    CREATE DATABASE libs;
    CREATE ROLE admin_acme LOGIN;
    CREATE ROLE importer LOGIN;
});
for my $db ('app', 'fresh')
{
    $node->safe_psql($db, q{
        CREATE EXTENSION convctx;
        GRANT convctx_admin TO admin_acme, importer;
        SELECT convctx.bind_role_tenant('admin_acme', 'acme');
        SELECT convctx.bind_role_all_tenants('importer');
    });
    $node->safe_psql('postgres', "ALTER DATABASE $db SET convctx.metadata_allowlist = 'channel,score'");
}
$node->safe_psql('app', q{
    SET convctx.tenant = 'acme';
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1',
        'Q1 ' || chr(233) || chr(128512) || chr(131072) || chr(917569) || chr(983040) || chr(1114109) || ' "x" \ y',
        identity_id => 'u1', meta => '{"channel": "web", "score": 1.000000000000000005}'), 'A1');
    SELECT convctx.replace_turn('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)), 'A1, corrected');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', 'Q2'), 'A2');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r3', 'Q3'), 'A3');
    SELECT convctx.record_retrieval('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)),
        '[{"id": "c1", "text": "t", "n": 1.000000000000000005, "big": 12345678901234567890, "e": 1E6}]',
        '[{"id": "c1"}]');
    SELECT convctx.record_clarification('s1', (SELECT turn_id FROM convctx.recent_turns('s1', 1)),
        '[{"question": "Which year?"}]', '{"year": "2024"}');
    SELECT convctx.context_add('s1', ARRAY['n1', 'n2'], 'u1');
    SELECT convctx.start_turn('s2', 'r1', 'anonymous');
    SELECT convctx.context_save('s3', '{"activeNodeIds": ["n3"]}', 'u2');
    SELECT convctx.finalize_turn('s4', convctx.start_turn('s4', 'r1', 'Q of u2', identity_id => 'u2'), 'A of u2');
    SELECT convctx.set_session_title('s4', 'A title of its own ' || chr(10003));
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
    my @in = ();
    if (ref $_[0] eq 'SCALAR')
    {
        my $input = shift;
        @in = ('<', $input);
    }
    IPC::Run::run([ $tool, @_ ], @in, '>', \$stdout, '2>', \$stderr);
    return ($? >> 8, $stdout, $stderr);
}
my @app = ('-h', $node->host, '-p', $node->port, '-d', 'app');
my @fresh = ('-h', $node->host, '-p', $node->port, '-d', 'fresh');
my $dir = PostgreSQL::Test::Utils::tempdir;

sub write_file
{
    my ($name, $text) = @_;
    open my $fh, '>', "$dir/$name" or die;
    print $fh $text;
    close $fh;
    return "$dir/$name";
}

sub read_file
{
    my ($path) = @_;
    open my $fh, '<', $path or die "$path: $!";
    local $/;
    my $text = <$fh>;
    close $fh;
    return $text;
}

# The rows of a tenant in a database: every column of every table, so
# that a difference anywhere shows.
sub tenant_rows
{
    my ($db, $tenant) = @_;
    return $node->safe_psql($db, qq{
        SELECT 'session', s.session_id, s.identity_id, s.created_at, s.last_activity_at, s.last_turn_no,
               s.live_turns, s.live_answers, s.summary_through_turn_no, s.redactions, s.title
          FROM convctx.session s WHERE tenant_id = '$tenant' ORDER BY 2;
        SELECT 'link', session_id, identity_id, linked_at FROM convctx.session_link WHERE tenant_id = '$tenant' ORDER BY 2;
        SELECT 'turn', t.* FROM convctx.turn t WHERE tenant_id = '$tenant' ORDER BY turn_id;
        SELECT 'retrieval', r.* FROM convctx.turn_retrieval r WHERE tenant_id = '$tenant' ORDER BY session_id, turn_no;
        SELECT 'clarification', c.* FROM convctx.clarification c WHERE tenant_id = '$tenant' ORDER BY session_id, turn_no;
        SELECT 'summary', m.* FROM convctx.session_summary m WHERE tenant_id = '$tenant' ORDER BY session_id;
        SELECT 'context', x.tenant_id, x.conversation_id, x.context_json, x.user_id, x.created_at, x.updated_at
          FROM convctx.conversation_context x WHERE tenant_id = '$tenant' ORDER BY conversation_id;
    });
}

sub without_header
{
    my ($text) = @_;
    my @lines = split /\n/, $text;
    shift @lines;
    return join("\n", @lines);
}

# ---------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------
my ($rc, $out, $err) = tool('export', @app, '-U', 'admin_acme', '-f', "$dir/acme.jsonl");
is($rc, 0, 'export of acme') or diag($err);
my $exported = read_file("$dir/acme.jsonl");
like($exported, qr/"type": "turn".*"deleted_at": "20/, 'the export holds a tombstone');

($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'acme', '-f', "$dir/acme.jsonl");
is($rc, 0, 'import into a fresh database') or diag($err);
like($err, qr/imported 4 sessions, 6 turns, 1 retrieval, 1 clarification, 1 summary, 2 contexts/,
    'the summary counts what was imported');
is(tenant_rows('fresh', 'acme'), tenant_rows('app', 'acme'), 'every row of the tenant, column for column');
($rc, $out, $err) = tool('export', @fresh, '-U', 'importer', '--tenant', 'acme', '-f', "$dir/again.jsonl");
is($rc, 0, 'export from the fresh database') or diag($err);
my $again = read_file("$dir/again.jsonl");
is(without_header($again), without_header($exported), 'exported again: the same file apart from the header');
my ($h1, $h2) = (decode_json((split /\n/, $exported)[0]), decode_json((split /\n/, $again)[0]));
delete $h1->{exported_at};
delete $h2->{exported_at};
is_deeply($h2, $h1, 'the headers differ only in exported_at');
is($node->safe_psql('fresh', q{SELECT count(*) FROM convctx.session WHERE tenant_id = 'globex'}), '0',
    'another tenant of the source stays out');

# Run again: everything is there, skipped and counted, nothing changes.
my $before = tenant_rows('fresh', 'acme');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'acme', '-f', "$dir/acme.jsonl");
is($rc, 0, 'a second import succeeds') or diag($err);
like($err, qr/imported 0 sessions.*\n.*skipped 4 sessions, 6 turns.* \(already there: \d+\)\n/,
    'and skips every record, saying why');
like($err, qr/\(already there: 15\)\n.*: 15 records read: 0 imported, 15 skipped, 0 rejected\n/,
    'the records read are the records skipped');
is(tenant_rows('fresh', 'acme'), $before, 'and changes nothing');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'acme', '--on-conflict=error',
    '-f', "$dir/acme.jsonl");
is($rc, 1, '--on-conflict=error: exit 1');
like($err, qr/acme\.jsonl:\d+: error: .* exists already \(SQLSTATE 23505\)/, '--on-conflict=error names the line');

# A newer export merged into the import of an older one: what was made
# since (a turn, the app's title, a link) comes in, the title and the
# link's time as in the source; the session record counts as imported, and
# the tenant exports again as the newer file.
$node->safe_psql('app', q{SET convctx.tenant = 'newer';
    SELECT convctx.finalize_turn('n1', convctx.start_turn('n1', 'r1', 'first question'), 'first answer')});
($rc, $out, $err) = tool('export', @app, '-U', 'importer', '--tenant', 'newer', '-f', "$dir/older.jsonl");
is($rc, 0, 'export of the older file') or diag($err);
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'newer', '-f', "$dir/older.jsonl");
is($rc, 0, 'import of the older file') or diag($err);
$node->safe_psql('app', q{SET convctx.tenant = 'newer';
    SELECT convctx.set_session_title('n1', 'A title set since the export');
    SELECT convctx.link_session('u5', 'n1');
    SELECT convctx.finalize_turn('n1', convctx.start_turn('n1', 'r2', 'second question'), 'second answer')});
($rc, $out, $err) = tool('export', @app, '-U', 'importer', '--tenant', 'newer', '-f', "$dir/newer.jsonl");
is($rc, 0, 'export of the newer file') or diag($err);
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'newer', '-f', "$dir/newer.jsonl");
is($rc, 0, 'merge of the newer file') or diag($err);
like($err, qr/imported 1 session, 1 turn, .*\n.*skipped 0 sessions, 1 turn, .* \(already there: 1\)\n/,
    'merge of the newer file: the session record is imported, not already there');
($rc, $out, $err) = tool('export', @fresh, '-U', 'importer', '--tenant', 'newer', '-f', "$dir/merged.jsonl");
is($rc, 0, 'export of the merged tenant') or diag($err);
is(without_header(read_file("$dir/merged.jsonl")), without_header(read_file("$dir/newer.jsonl")),
    'the merged tenant exports as the newer file: its title, link and link time');
is($node->safe_psql('fresh', q{SELECT title || ':' || linked_later FROM convctx.session
    WHERE tenant_id = 'newer' AND session_id = 'n1'}),
    $node->safe_psql('app', q{SELECT title || ':' || linked_later FROM convctx.session
    WHERE tenant_id = 'newer' AND session_id = 'n1'}), 'title and linked_later as in the source');

# The data subject's export imports as well, and from standard input.
($rc, $out, $err) = tool('export', @app, '-U', 'admin_acme', '--identity', 'u2');
is($rc, 0, 'export of identity u2');
my $subject = $out;
($rc, $out, $err) = tool(\$subject, 'import', @fresh, '-U', 'importer', '--tenant', 'subject');
is($rc, 0, 'import of a data subject export from stdin') or diag($err);
is($node->safe_psql('fresh', q{SELECT string_agg(session_id || ':' || identity_id, ',' ORDER BY session_id)
    FROM convctx.session WHERE tenant_id = 'subject'}), 's4:u2', 'its linked session arrived');
is($node->safe_psql('fresh', q{SELECT string_agg(conversation_id, ',' ORDER BY conversation_id)
    FROM convctx.conversation_context WHERE tenant_id = 'subject'}), 's3', 'and the context saved under it');

# ---------------------------------------------------------------------------
# Bad input: each refused with its file, line and what is wrong, exit 1,
# and nothing of its conversation written.
# ---------------------------------------------------------------------------
my @lines = split /\n/, $exported;
my $header = $lines[0];
my $trailer = $lines[-1];
my @records = @lines[ 1 .. $#lines - 1 ];

sub count_sessions
{
    my ($tenant) = @_;
    return $node->safe_psql('fresh', qq{SELECT count(*) FROM convctx.session WHERE tenant_id = '$tenant'});
}

# the lines of session s (its group), and the trailer they would have
sub group_lines
{
    my ($sid) = @_;
    return grep { my $r = decode_json($_); ($r->{session_id} // $r->{conversation_id}) eq $sid } @records;
}

sub trailer_for
{
    my (@recs) = @_;
    my %n = map { $_ => 0 } qw(session turn retrieval clarification summary context);
    # by text: some of the records are broken on purpose
    for (@recs) { $n{$1}++ if /"type": "(\w+)"/; }
    return encode_json({ type => 'end', records => \%n, lines => scalar(@recs) + 2 });
}

sub file_of
{
    my ($name, @recs) = @_;
    return write_file($name, join("\n", $header, @recs, trailer_for(@recs)) . "\n");
}

# cut short: no trailer
my $truncated = write_file('truncated.jsonl', join("\n", $header, @records) . "\n");
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'cut', '-f', $truncated);
is($rc, 1, 'a file without its trailer: exit 1');
like($err, qr/has no trailer.*cut short; nothing was imported/, 'a file without its trailer: said so');
is(count_sessions('cut'), '0', 'a file without its trailer: nothing written');
my $cut_stream = join("\n", $header, @records) . "\n";
($rc, $out, $err) = tool(\$cut_stream, 'import', @fresh, '-U', 'importer', '--tenant', 'cut');
is($rc, 1, 'cut short on stdin: exit 1');
like($err, qr/<stdin> ends at line \d+ without its trailer/, 'cut short on stdin: said so');
is(count_sessions('cut'), '3', 'cut short on stdin: the conversations before the last are written, not the last');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'cut2', '--allow-truncated',
    '-f', $truncated);
is($rc, 0, '--allow-truncated imports what the file holds') or diag($err);

# cut mid-line, as a killed export ends: with --allow-truncated the last
# line without its newline is the cut, said and counted, and exit 0
{
    my $text = join("\n", $header, @records);
    my $file = write_file('cut_mid_line.jsonl', substr($text, 0, length($text) - 10));
    my $last = 1 + @records;
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'cutline', '--allow-truncated',
        '-f', $file);
    is($rc, 0, 'cut mid-line, --allow-truncated: exit 0') or diag($err);
    like($err, qr/cut_mid_line\.jsonl:$last:\d+: warning: the last line has no newline and is not a complete record \(.*\): the file was cut short there/,
        'cut mid-line: the cut is said, with its line');
    like($err, qr/records read: \d+ imported, 0 skipped, 0 rejected, [1-9]\d* left out \(the end of a file cut short\)/,
        'cut mid-line: what was left out is counted');
    unlike($err, qr/error/, 'cut mid-line: no error');
    is(count_sessions('cutline'), '3', 'cut mid-line: the conversations before the last are written');
}

# a NUL byte near the end of a complete file is a NUL, not a cut
{
    my $text = $exported;
    my $at = rindex($text, '"lines"');
    substr($text, $at, 1) = "\0";
    my $column = $at - rindex($text, "\n", $at);
    my $line = scalar(@lines);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'nul', '-f', write_file('nul.jsonl', $text));
    is($rc, 1, 'a NUL byte in the trailer: exit 1');
    like($err, qr/nul\.jsonl:$line:$column: error: invalid input: a NUL byte/, 'a NUL byte: named, at its line and column');
    unlike($err, qr/cut short|no trailer/, 'a NUL byte: not taken for a cut');
}

# bad JSON at a known line: the conversations before it are written, its own is not
my @s1 = group_lines('s1');
my @s2 = group_lines('s2');
my @s4 = group_lines('s4');
my $broken = $s4[1];
$broken =~ s/"request_id": "r1"/"request_id": "r1",,/;
my $bad_json = file_of('bad_json.jsonl', @s1, @s2, $s4[0], $broken, @s4[ 2 .. $#s4 ]);
my $bad_line = 2 + @s1 + @s2 + 1;
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'badjson', '-f', $bad_json);
is($rc, 1, 'bad JSON: exit 1');
like($err, qr/bad_json\.jsonl:$bad_line:\d+: error: invalid JSON/, "bad JSON: file, line $bad_line and column");
is($node->safe_psql('fresh', q{SELECT string_agg(session_id, ',' ORDER BY session_id) FROM convctx.session
    WHERE tenant_id = 'badjson'}), 's1,s2', 'bad JSON: the conversations before it are written, its own is not');

# --max-errors and --reject-file go on past it, and exit 3
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'badjson2', '--max-errors=1',
    '--reject-file', "$dir/rejects.jsonl", '-f', $bad_json);
is($rc, 3, '--max-errors: exit 3 when conversations were rejected');
like($err, qr/rejected 1 conversation \(2 records\), written to .*rejects\.jsonl/, '--max-errors: the rejected count');
is(read_file("$dir/rejects.jsonl"), join("\n", $s4[0], $broken, @s4[ 2 .. $#s4 ]) . "\n",
    '--reject-file holds the lines of the rejected conversation');
is($node->safe_psql('fresh', q{SELECT string_agg(session_id, ',' ORDER BY session_id) FROM convctx.session
    WHERE tenant_id = 'badjson2'}), 's1,s2', '--max-errors: the others are written');

# -1: all or nothing
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'single', '-1', '-f', $bad_json);
is($rc, 1, '-1 with a bad line: exit 1');
like($err, qr/rolled back: nothing was imported/, '-1: rolled back');
is(count_sessions('single'), '0', '-1: nothing written');

# records the server refuses: wrong types, unknown type, duplicates, sizes, \u0000
my %bad = (
    'wrong type' => [ sub { $_[0] =~ s/"turn_no": 1,/"turn_no": "1",/ }, qr/key "turn_no" of a turn record must be an integer, not string \(SQLSTATE 22P04\)/ ],
    'unknown record type' => [ sub { $_[0] =~ s/"type": "turn"/"type": "ticket"/ }, qr/error: unknown record type "ticket"/ ],
    'duplicate key in a record' => [ sub { $_[0] =~ s/^\{/{"turn_no": 7, / }, qr/error: duplicate key "turn_no" \(a key may appear once in an object\)/ ],
    'NUL character' => [ sub { $_[0] =~ s/"question_neutral": "Q of u2"/"question_neutral": "Q\\u0000"/ }, qr/\\u0000 is not allowed: PostgreSQL text cannot hold the NUL character/ ],
    'unknown key' => [ sub { $_[0] =~ s/^\{/{"colour": "red", / }, qr/unknown key "colour" in a turn record \(SQLSTATE 22P04\)/ ],
);
for my $what (sort keys %bad)
{
    my ($mutate, $message) = @{ $bad{$what} };
    my @g = @s4;
    $mutate->($g[1]);
    (my $name = $what) =~ s/\W+/_/g;
    my $file = file_of("$name.jsonl", @g);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', "bad_$name", '-f', $file);
    is($rc, 1, "$what: exit 1");
    like($err, qr/\Q$name\E\.jsonl:3(:\d+)?: error: /, "$what: file and line");
    like($err, $message, "$what: what is wrong");
    is(count_sessions("bad_$name"), '0', "$what: nothing written");
}

# batches in flight: a record refused in the fourth conversation, one
# conversation a batch
{
    my @g = @s4;
    $g[1] =~ s/"turn_no": 1,/"turn_no": "1",/;
    my @s3 = group_lines('s3');
    my $file = file_of('pipelined.jsonl', @s1, @s2, @s3, @g);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'piped', '--batch-size=1', '-f', $file);
    is($rc, 1, 'one conversation a batch, the fourth refused: exit 1');
    is($node->safe_psql('fresh', q{SELECT string_agg(session_id, ',' ORDER BY session_id) FROM convctx.session
        WHERE tenant_id = 'piped'}), 's1,s2,s3', 'one conversation a batch: the three before it are written');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'piped2', '--batch-size=1',
        '--max-errors=1', '-f', file_of('pipelined2.jsonl', @g, @s1, @s2, @s3));
    is($rc, 3, 'one conversation a batch, the first refused, --max-errors=1: exit 3');
    is($node->safe_psql('fresh', q{SELECT string_agg(session_id, ',' ORDER BY session_id) FROM convctx.session
        WHERE tenant_id = 'piped2'}), 's1,s2,s3', 'one conversation a batch: the three after it are written');
}

# a record after another conversation's: its session's group, not sent
# yet, is rejected with it
{
    my @s3 = group_lines('s3');
    my @ret = grep { /"type": "retrieval"/ } @s1;
    my @rest = grep { !/"type": "retrieval"/ } @s1;
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'split',
        '-f', file_of('split.jsonl', @rest, @s3, @ret));
    is($rc, 1, 'a record outside its group: exit 1');
    like($err, qr/split\.jsonl:\d+: error: a retrieval record of session "s1" outside that session's group/,
        'a record outside its group: said so');
    is($node->safe_psql('fresh', q{SELECT string_agg(session_id, ',' ORDER BY session_id) FROM convctx.session
        WHERE tenant_id = 'split'}), 's3', 'a record outside its group: its session is not written without it');
}

# a record of session s4 in the middle of session s1's group: the error
# names s4 and its line; s1 goes on and is written whole
{
    my @g = ($s1[0], $s1[1], $s4[1], @s1[ 2 .. $#s1 ], @s2);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'stray', '--max-errors=1',
        '-f', file_of('stray.jsonl', @g));
    is($rc, 3, 'a stray record of another session: exit 3') or diag($err);
    like($err, qr/stray\.jsonl:4: error: a turn record of session "s4" outside that session's group/,
        'a stray record: its own session and line');
    unlike($err, qr/"s1"|stray\.jsonl:[^4]/, 'a stray record: the session it interrupts is not blamed');
    like($err, qr/rejected 1 conversation \(1 record\)/, 'a stray record: rejected alone');
    is($node->safe_psql('fresh', q{SELECT string_agg(session_id || ':' || live_turns, ',' ORDER BY session_id)
        FROM convctx.session WHERE tenant_id = 'stray'}),
        $node->safe_psql('app', q{SELECT string_agg(session_id || ':' || live_turns, ',' ORDER BY session_id)
        FROM convctx.session WHERE tenant_id = 'acme' AND session_id IN ('s1', 's2')}),
        'a stray record: the sessions around it written whole');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'stray2', '-f', "$dir/stray.jsonl");
    is($rc, 1, 'a stray record, no --max-errors: exit 1');
    like($err, qr/stray\.jsonl:4: error: a turn record of session "s4"/, 'a stray record, no --max-errors: its own session');
    unlike($err, qr/"s1"/, 'a stray record, no --max-errors: the session it interrupts is not blamed');
}

# the same turn twice in a conversation
{
    my @g = (@s4[ 0 .. 1 ], $s4[1], @s4[ 2 .. $#s4 ]);
    my $file = file_of('dup.jsonl', @g);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'dup', '-f', $file);
    is($rc, 1, 'a duplicate turn: exit 1');
    like($err, qr/dup\.jsonl:4: error: turn [0-9a-f-]+ appears twice in session "s4" \(SQLSTATE 23505\)/,
        'a duplicate turn: its line and what is wrong');
    is(count_sessions('dup'), '0', 'a duplicate turn: nothing written');
}

# a text over convctx.max_text_bytes
$node->safe_psql('fresh', q{ALTER ROLE importer SET convctx.max_text_bytes = 5});
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'big', '-f', file_of('big.jsonl', @s4));
is($rc, 1, 'a text over convctx.max_text_bytes: exit 1');
like($err, qr/big\.jsonl:3: error: question_neutral is too long \(SQLSTATE 54000\)/, 'too long: which text');
is(count_sessions('big'), '0', 'too long: nothing written');
$node->safe_psql('fresh', q{ALTER ROLE importer RESET convctx.max_text_bytes});

# a session of another identity: refused as link_session refuses it, and audited
{
    my @g = @s4;
    $g[0] =~ s/"identity_id": "u2"/"identity_id": "mallory"/;
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'acme', '-f', file_of('other.jsonl', @g));
    is($rc, 1, 'another identity: exit 1');
    like($err, qr/other\.jsonl:2: error: session "s4" is already linked to another identity \(SQLSTATE CV001\)/,
        'another identity: CV001');
    is($node->safe_psql('fresh', q{SELECT count(*) FROM convctx.audit_log
        WHERE tenant_id = 'acme' AND action = 'link_refused' AND identity_id = 'mallory'}), '1', 'another identity: audited');
}

# anonymous conversations the next purge would delete
{
    my @g = @s2;
    s/"(created_at|last_activity_at)": "[^"]+"/"$1": "2020-01-01T00:00:00+00:00"/g for @g;
    my $file = file_of('old.jsonl', @g);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'old', '-f', $file);
    is($rc, 1, 'an old anonymous conversation: exit 1');
    like($err, qr/anonymous session "s2" would be deleted by the next purge.*\n.*\nHINT: .*--as-identity/,
        'an old anonymous conversation: why, and what to do');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'old', '--as-identity', 'alice', '-f', $file);
    is($rc, 0, '--as-identity') or diag($err);
    is($node->safe_psql('fresh', q{SELECT s.identity_id || '/' || l.identity_id || '/' || t.identity_id
        FROM convctx.session s JOIN convctx.session_link l USING (tenant_id, session_id)
        JOIN convctx.turn t USING (tenant_id, session_id) WHERE s.tenant_id = 'old'}), 'alice/alice/alice',
        '--as-identity links the session and its turns');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'old2', '--allow-anonymous', '-f', $file);
    is($rc, 0, '--allow-anonymous') or diag($err);
    my $map = write_file('map.json', '{"u2": "user-two"}');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'mapped', '--identity-map', $map,
        '-f', file_of('s4.jsonl', @s4));
    is($rc, 0, '--identity-map') or diag($err);
    is($node->safe_psql('fresh', q{SELECT identity_id FROM convctx.session WHERE tenant_id = 'mapped'}), 'user-two',
        '--identity-map renames the identity');
}

# usage and connection errors
($rc, $out, $err) = tool('import', @fresh, '--max-errors=x');
is($rc, 1, 'a bad option: exit 1');
($rc, $out, $err) = tool('import', '-h', $node->host, '-p', '1', '-d', 'fresh', '-f', "$dir/acme.jsonl");
is($rc, 2, 'no server: exit 2');
($rc, $out, $err) = tool('import', @fresh, '-U', 'admin_acme', '--from=nothing', '-f', "$dir/acme.jsonl");
is($rc, 1, 'an unknown source: exit 1');
$node->safe_psql('fresh', q{CREATE ROLE app_only LOGIN IN ROLE convctx_app; SELECT convctx.bind_role_tenant('app_only', 'acme')});
($rc, $out, $err) = tool('import', @fresh, '-U', 'app_only', '-f', file_of('app.jsonl', @s4));
is($rc, 1, 'an app role cannot import');
like($err, qr/permission denied for function import_records \(SQLSTATE 42501\)/, 'an app role: 42501');

# ---------------------------------------------------------------------------
# Encoding: the files are UTF-8 whatever the environment says; what the
# database's encoding cannot hold is refused with its line, counted
# ---------------------------------------------------------------------------
sub questions
{
    my ($db, $tenant) = @_;
    # as UTF-8 hex, whatever the database's encoding
    return $node->safe_psql($db, qq{SELECT string_agg(session_id || ':' || encode(convert_to(question_neutral, 'UTF8'), 'hex'),
        ',' ORDER BY session_id, turn_no, record_version) FROM convctx.turn WHERE tenant_id = '$tenant'});
}
{
    local $ENV{PGCLIENTENCODING} = 'LATIN1';
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'latin1env', '-f', "$dir/acme.jsonl");
    is($rc, 0, 'PGCLIENTENCODING=LATIN1: exit 0') or diag($err);
    is(questions('fresh', 'latin1env'), questions('app', 'acme'), 'PGCLIENTENCODING=LATIN1: every character as it was');
}
$node->safe_psql('postgres', q{CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('latin1', q{CREATE EXTENSION convctx; GRANT convctx_admin TO importer;
    SELECT convctx.bind_role_all_tenants('importer')});
$node->safe_psql('app', q{SET convctx.tenant = 'enc';
    SELECT convctx.finalize_turn('e1', convctx.start_turn('e1', 'r1', 'caf' || chr(233) || ' na' || chr(239) || 've',
        identity_id => 'u1'), 'ok');
    SELECT convctx.finalize_turn('e2', convctx.start_turn('e2', 'r1', 'smile ' || chr(128512), identity_id => 'u1'), 'ok');
    SELECT convctx.finalize_turn('e3', convctx.start_turn('e3', 'r1', 'plain', identity_id => 'u1'), 'ok')});
($rc, $out, $err) = tool('export', @app, '-U', 'importer', '--tenant', 'enc', '-f', "$dir/enc.jsonl");
is($rc, 0, 'export of tenant enc') or diag($err);
my @latin1 = ('-h', $node->host, '-p', $node->port, '-d', 'latin1', '-U', 'importer');
my @enc = split /\n/, read_file("$dir/enc.jsonl");
my ($e2_line) = grep { $enc[ $_ - 1 ] =~ /^\{"type": "turn".*"session_id": "e2"/ } 1 .. @enc;
($rc, $out, $err) = tool('import', @latin1, '--tenant', 'enc', '-f', "$dir/enc.jsonl");
is($rc, 1, 'a LATIN1 database, a character it cannot hold: exit 1');
like($err, qr/enc\.jsonl:$e2_line: error: character with byte sequence 0xf0 0x9f 0x98 0x80 in encoding "UTF8" has no equivalent in encoding "LATIN1" \(SQLSTATE 22P05\)/,
    'a LATIN1 database: the line of the character and why');
($rc, $out, $err) = tool('import', @latin1, '--tenant', 'enc', '--max-errors=1', '-f', "$dir/enc.jsonl");
is($rc, 3, 'a LATIN1 database with --max-errors: exit 3');
like($err, qr/rejected 1 conversation/, 'a LATIN1 database: the conversation counted as rejected');
is(questions('latin1', 'enc'), join(',', map { "$_->[0]:" . unpack('H*', $_->[1]) }
    [ 'e1', "caf\xc3\xa9 na\xc3\xafve" ], [ 'e3', 'plain' ]), 'a LATIN1 database: the others, every character as it was');
($rc, $out, $err) = tool('export', @latin1, '--tenant', 'enc');
is($rc, 0, 'export from a LATIN1 database') or diag($err);
like($out, qr/"question_neutral": "caf\xc3\xa9 na\xc3\xafve"/, 'export from a LATIN1 database: UTF-8');

# ---------------------------------------------------------------------------
# The tenant: a role that acts for any tenant names it when the file came
# from another than ''
# ---------------------------------------------------------------------------
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '-f', "$dir/acme.jsonl");
is($rc, 1, 'no --tenant, a file of tenant acme, a role of every tenant: exit 1');
like($err, qr/acme\.jsonl was exported from tenant "acme"; without --tenant this import would write it into tenant ""\nHINT: .*--tenant="acme"/,
    'no --tenant: says which tenant the file came from');
is(count_sessions(''), '0', 'no --tenant: nothing written into tenant ""');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '-1', '-f', "$dir/acme.jsonl");
is($rc, 1, 'no --tenant, -1: exit 1');
($rc, $out, $err) = tool('import', @fresh, '-U', 'admin_acme', '-f', "$dir/acme.jsonl");
is($rc, 0, 'no --tenant, a role bound to the tenant: its own') or diag($err);
like($err, qr/skipped 4 sessions.*\(already there: \d+\)/, 'a role bound to the tenant: into tenant acme');
{
    local $ENV{PGOPTIONS} = '-c convctx.tenant=acme';
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '-f', "$dir/acme.jsonl");
    is($rc, 0, 'convctx.tenant set by the environment: that tenant') or diag($err);
}

# ---------------------------------------------------------------------------
# Interruptions: a cancel, a timeout, a deadlock is never a record's fault;
# the import stops with exit 4 whatever --max-errors says
# ---------------------------------------------------------------------------
{
    my $locker = $node->background_psql('fresh');
    $locker->query_safe('BEGIN');
    $locker->query_safe('LOCK TABLE convctx.session IN ACCESS EXCLUSIVE MODE');
    for my $case ([ 'lock_timeout', '55P03', 'lock timeout', '--max-errors=-1' ],
                  [ 'statement_timeout', '57014', 'statement timeout', '--max-errors=5' ],
                  [ 'statement_timeout', '57014', 'statement timeout', '-1' ])
    {
        my ($setting, $sqlstate, $what, $option) = @$case;
        local $ENV{PGOPTIONS} = "-c $setting=100ms";
        ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'interrupted', $option,
            '-f', "$dir/acme.jsonl");
        is($rc, 4, "$setting, $option: exit 4");
        like($err, qr/error: canceling statement due to $what \(SQLSTATE $sqlstate\)/, "$setting, $option: says why");
        like($err, qr/the server interrupted the import .* run the import again/, "$setting, $option: not the data");
        unlike($err, qr/rejected \d+ conversation|[1-9]\d* rejected|acme\.jsonl:\d+: error/,
            "$setting, $option: no conversation blamed");
    }
    $locker->query_safe('COMMIT');
    $locker->quit;
    is(count_sessions('interrupted'), '0', 'interrupted: nothing written');
}

# ---------------------------------------------------------------------------
# Other stores: the histories the real libraries wrote
# ---------------------------------------------------------------------------
for my $source ('langchain-js', 'langchain-python', 'mastra', 'langgraph-js')
{
    $node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
        '-d', 'libs', '-f', "$fixtures/$source/schema.sql", '-f', "$fixtures/$source/data.sql" ],
        "the tables $source made, loaded");
}
my $libs = 'host=' . $node->host . ' port=' . $node->port . ' dbname=libs';
my $unicode = "Gr\x{fc}\x{df}e: \x{4f60}\x{597d} \x{1d11e} \x{1f600} \x{20000} \x{e0041} \x{f0000} \x{10fffd} \x{2014} does it apply to vans?";

sub turns_of
{
    my ($tenant) = @_;
    my $out = $node->safe_psql('fresh', qq{SELECT session_id || '|' || coalesce(identity_id, '') || '|' || turn_no || '|'
        || question_neutral || '|' || coalesce(answer_neutral, '<none>')
        FROM convctx.turn WHERE tenant_id = '$tenant' ORDER BY session_id, turn_no});
    utf8::decode($out);
    return $out;
}

my %sources = (
    'langchain-python' => [ [ '--from=langchain', '-f', "$fixtures/langchain-python/rows.jsonl" ],
                            [ '--from=langchain', "--source-dsn=$libs" ],
                            [ '0b6f0e6e-6d1c-4c0e-9d51-3f4b1f2a9c11', '5d0c2f1a-2b7e-4c55-8a3e-6f0e9b1d2c22', '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c33' ],
                            'Yes, vans too.' ],
    'langchain-js' => [ [ '--from=langchain-js', '-f', "$fixtures/langchain-js/rows.jsonl" ],
                        [ '--from=langchain-js', "--source-dsn=$libs" ],
                        [ 'thread-a', 'thread-b', 'thread-c' ], 'Yes, vans too.' ],
    'mastra' => [ [ '--from=mastra', '-f', "$dir/mastra.jsonl" ],
                  [ '--from=mastra', "--source-dsn=$libs" ],
                  [ 'thread-a', 'thread-b', 'thread-c' ], 'Yes,vans too.' ],
    'langgraph-js' => [ [ '--from=langgraph-js', '-f', "$dir/langgraph.jsonl" ],
                        [ '--from=langgraph-js', "--source-dsn=$libs" ],
                        [ 'thread-a', 'thread-b', 'thread-c' ], 'Yes, vans too.' ],
);
write_file('mastra.jsonl', read_file("$fixtures/mastra/threads.jsonl") . read_file("$fixtures/mastra/messages.jsonl"));
write_file('langgraph.jsonl', read_file("$fixtures/langgraph-js/checkpoints.jsonl")
    . read_file("$fixtures/langgraph-js/checkpoint_blobs.jsonl"));

for my $source (sort keys %sources)
{
    my ($from_file, $from_db, $ids, $vans) = @{ $sources{$source} };
    my $has_identity = $source eq 'mastra';
    my @identity = $has_identity ? () : ('--as-identity', 'migrated');
    my ($a, $b, $c) = @$ids;
    my ($u1, $u2) = $has_identity ? ('user-1', 'user-2') : ('migrated', 'migrated');
    my $expected = join("\n",
        "$a|$u1|1|Is VAT due on used cars?|Yes, under the margin scheme.",
        "$a|$u1|2|$unicode|$vans",
        "$b|$u2|1|What is the margin scheme?|A VAT scheme for second-hand goods.",
        "$b|$u2|2|Thanks|<none>",
        "$c|$u1|1|Hello|Hi, how can I help?");
    for my $way ([ 'file', $from_file ], [ 'db', $from_db ])
    {
        my ($how, $args) = @$way;
        my $tenant = "$source-$how";
        ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', $tenant, @$args, @identity);
        is($rc, 0, "$source from its $how: exit 0") or diag($err);
        my $got = turns_of($tenant);
        $got =~ s/\nthread-d\|user-3\|1\|Old question\|Old answer$// if $source eq 'mastra';
        is($got, $expected, "$source from its $how: the questions and answers, every Unicode plane");
        if ($source =~ /^lang/)
        {
            like($err, qr/not imported: system and developer messages: 1/, "$source from its $how: the system message counted");
            like($err, qr/not imported: tool messages: 1/, "$source from its $how: the tool message counted");
        }
        like($err, qr/not imported: tool calls: 1/, "$source from its $how: the tool call counted");
    }
}
is($node->safe_psql('fresh', q{SELECT question_neutral || '/' || answer_neutral || '/' || identity_id
    FROM convctx.turn WHERE tenant_id = 'mastra-db' AND session_id = 'thread-d'}), 'Old question/Old answer/user-3',
    'mastra: the plain-string rows of an old release');
is($node->safe_psql('fresh', q{SELECT count(*) FROM convctx.turn WHERE tenant_id = 'langchain-python-db'
    AND created_at = finalized_at}), '0', 'langchain-python: each message keeps its own time');
is($node->safe_psql('fresh', q{SELECT bool_and(t.created_at = r.created_at) FROM convctx.turn t
    JOIN convctx.turn r ON r.tenant_id = 'mastra-file' AND r.session_id = t.session_id AND r.turn_no = t.turn_no
    WHERE t.tenant_id = 'mastra-db'}), 't', 'mastra: the same times from the file and from the database');

# a source database whose collation is not C: the threads and the messages
# are merged in one order all the same (here "thread-a" sorts before
# "Thread-B", and after it byte for byte)
$node->safe_psql('postgres', q{CREATE DATABASE src_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'
    LOCALE 'C.UTF-8'});
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
    '-d', 'src_icu', '-f', "$fixtures/mastra/schema.sql" ], 'the Mastra tables in a database of collation en-US');
$node->safe_psql('src_icu', q{
    INSERT INTO mastra_threads (id, "resourceId", title, "createdAt", "updatedAt") VALUES
        ('thread-a', 'user-1', '', '2026-01-01 10:00', '2026-01-01 10:00'),
        ('Thread-B', 'user-2', '', '2026-01-01 10:00', '2026-01-01 10:02');
    INSERT INTO mastra_messages (id, thread_id, content, role, type, "createdAt") VALUES
        ('m1', 'Thread-B', 'Question B', 'user', 'text', '2026-01-01 10:01'),
        ('m2', 'Thread-B', 'Answer B', 'assistant', 'text', '2026-01-01 10:02');
});
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'icu', '--from=mastra',
    '--source-dsn=host=' . $node->host . ' port=' . $node->port . ' dbname=src_icu');
is($rc, 0, 'Mastra from a database of collation en-US: exit 0') or diag($err);
is(turns_of('icu'), 'Thread-B|user-2|1|Question B|Answer B', 'collation en-US: every message in its thread');
unlike($err, qr/threads that do not exist/, 'collation en-US: no message without its thread');

# anonymous conversations whose source holds no time would take the
# import's time and expire convctx.session_ttl after it: refused unless
# linked or allowed, and then counted
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'undated', '--from=langchain-js',
    '-f', "$fixtures/langchain-js/rows.jsonl");
is($rc, 1, 'anonymous conversations without times: exit 1');
like($err, qr/error: anonymous conversation "thread-a" has no time in its source: .*convctx\.session_ttl\nHINT: .*--as-identity=ID.*--allow-anonymous/,
    'anonymous conversations without times: why, and what to do');
is(count_sessions('undated'), '0', 'anonymous conversations without times: nothing written');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'undated', '--from=langchain-js',
    '--allow-anonymous', '-f', "$fixtures/langchain-js/rows.jsonl");
is($rc, 0, 'anonymous conversations without times, --allow-anonymous: exit 0') or diag($err);
like($err, qr/warning: 3 anonymous conversations without a time in their source took the import's time: the first purge after convctx\.session_ttl from now deletes them/,
    '--allow-anonymous: warned, with the count');
is(count_sessions('undated'), '3', '--allow-anonymous: imported');

# a source row the tool cannot read: reported with its source key, nothing of its conversation written
{
    my $rows = read_file("$fixtures/langchain-js/rows.jsonl");
    $rows =~ s/\{"type": "human", "content": "Hello"/{"content": "Hello"/;
    my $file = write_file('lc_bad.jsonl', $rows);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'lcbad', '--from=langchain-js',
        '--as-identity', 'x', '--max-errors=1', '-f', $file);
    is($rc, 3, 'a LangChain row without a type: exit 3 with --max-errors');
    like($err, qr/lc_bad\.jsonl:\d+: error: a message of session "thread-c" without a "type" \(langchain_chat_histories id 11\)/,
        'a LangChain row without a type: its source key');
    is($node->safe_psql('fresh', q{SELECT string_agg(DISTINCT session_id, ',') FROM convctx.turn WHERE tenant_id = 'lcbad'}),
        'thread-a,thread-b', 'a LangChain row without a type: its conversation is not written');
    my $mastra = read_file("$dir/mastra.jsonl");
    $mastra =~ s/"type":"v2"/"type":"v3"/;
    $file = write_file('mastra_bad.jsonl', $mastra);
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'mbad', '--from=mastra', '-f', $file);
    is($rc, 1, 'a Mastra message of an unknown content format: exit 1');
    like($err, qr/in a content format this tool does not read: type "v3" \(mastra_messages id [0-9a-f-]+\)/,
        'a Mastra message of an unknown content format: its source key');
}

# a file of rows in another order than the library's (SELECT row_to_json
# without ORDER BY): ordered by id again; a row without a conversation is
# refused with its key and written to the reject file
{
    my @rows = reverse split /\n/, read_file("$fixtures/langchain-python/rows.jsonl");
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'lc-shuffled', '--from=langchain',
        '--as-identity', 'migrated', '-f', write_file('lc_shuffled.jsonl', join("\n", @rows) . "\n"));
    is($rc, 0, 'LangChain rows in reverse order: exit 0') or diag($err);
    is(turns_of('lc-shuffled'), turns_of('langchain-python-db'), 'LangChain rows in reverse order: the same turns');
    my $mastra = read_file("$dir/mastra.jsonl");
    $mastra =~ s/"thread_id":"thread-b"/"thread_id":null/;
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'mnull', '--from=mastra', '--max-errors=1',
        '--reject-file', "$dir/mnull.rej", '-f', write_file('mnull.jsonl', $mastra));
    is($rc, 3, 'a Mastra message without a thread: exit 3 with --max-errors');
    like($err, qr/a row of mastra_messages without a string thread_id/, 'a Mastra message without a thread: said so');
    like(read_file("$dir/mnull.rej"), qr/"thread_id":null/, 'a Mastra message without a thread: in the reject file');
    is($node->safe_psql('fresh', q{SELECT count(*) FROM convctx.turn WHERE tenant_id = 'mnull'}), '5',
        'a Mastra message without a thread: the other threads\' turns are all there');
}

# portable messages: what export --format=messages writes comes back in
($rc, $out, $err) = tool('export', @app, '-U', 'admin_acme', '--format=messages');
is($rc, 0, 'export --format=messages');
my $messages = $out;
($rc, $out, $err) = tool(\$messages, 'import', @fresh, '-U', 'importer', '--tenant', 'portable', '--from=messages');
is($rc, 0, 'import --from=messages') or diag($err);
is($node->safe_psql('fresh', q{SELECT string_agg(session_id || ':' || question_neutral || ':' || coalesce(answer_neutral, '-'), ',' ORDER BY session_id, turn_no)
    FROM convctx.turn WHERE tenant_id = 'portable' AND session_id <> 's1'}), 's2:anonymous:-,s4:Q of u2:A of u2',
    'the current turns of each conversation');
is($node->safe_psql('fresh', q{SELECT string_agg(request_id, ',' ORDER BY turn_no) FROM convctx.turn
    WHERE tenant_id = 'portable' AND session_id = 's1'}), 'r1,r3', 'request ids kept, the redacted turn left out');

# the quirks of real message logs, taken as a user expects, each counted:
# a clock a millisecond off (a message before the one before it, an
# answer before its question), an empty question (dropped with its
# answer), an id twice (a request id of its own, the same every time)
my $json = JSON::PP->new->canonical;
my $quirks = write_file('quirks.jsonl', join('', map { $json->encode($_) . "\n" }
    { session_id => 'q-skew', identity_id => 'u', messages => [
        { role => 'user', content => 'Q1', id => 'm1', created_at => '2026-01-01T10:00:00.001Z' },
        { role => 'assistant', content => 'A1', id => 'm2', created_at => '2026-01-01T10:00:00.000Z' },
        { role => 'user', content => 'Q2', id => 'm3', created_at => '2026-01-01T10:00:00.000Z' },
        { role => 'assistant', content => 'A2', id => 'm4', created_at => '2026-01-01T10:00:01Z' } ] },
    { session_id => 'q-empty', identity_id => 'u', messages => [
        { role => 'user', content => 'Q1', id => 'm1', created_at => '2026-01-01T10:00:00Z' },
        { role => 'assistant', content => 'A1', id => 'm2', created_at => '2026-01-01T10:00:01Z' },
        { role => 'user', content => '', id => 'm3', created_at => '2026-01-01T10:00:02Z' },
        { role => 'assistant', content => 'An answer to nothing', id => 'm4', created_at => '2026-01-01T10:00:03Z' },
        { role => 'user', content => 'Q3', id => 'm5', created_at => '2026-01-01T10:00:04Z' } ] },
    { session_id => 'q-dup', identity_id => 'u', messages => [
        { role => 'user', content => 'Q1', id => 'm1', created_at => '2026-01-01T10:00:00Z' },
        { role => 'assistant', content => 'A1', id => 'm2', created_at => '2026-01-01T10:00:01Z' },
        { role => 'user', content => 'Q2', id => 'm1', created_at => '2026-01-01T10:00:02Z' },
        { role => 'assistant', content => 'A2', id => 'm3', created_at => '2026-01-01T10:00:03Z' } ] }));
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'quirks', '--from=messages', '-f', $quirks);
is($rc, 0, 'messages with quirks: exit 0') or diag($err);
unlike($err, qr/error|last_activity_at|[0-9a-f]{8}-[0-9a-f]{4}-/, 'messages with quirks: no error, no value made here');
is(turns_of('quirks'), join("\n", 'q-dup|u|1|Q1|A1', 'q-dup|u|2|Q2|A2', 'q-empty|u|1|Q1|A1', 'q-empty|u|2|Q3|<none>',
    'q-skew|u|1|Q1|A1', 'q-skew|u|2|Q2|A2'), 'messages with quirks: every turn that has a question');
like($err, qr/warning: message times earlier than the time before them, moved up to it: 2 \(the first: .*quirks\.jsonl:1, message 2 \(id "m2"\) of conversation "q-skew": "2026-01-01T10:00:00\.000Z" after "2026-01-01T10:00:00\.001Z"\)/,
    'a time that goes back: moved up, counted, the first named as written');
is($node->safe_psql('fresh', q{SELECT string_agg(to_char(created_at, 'SS.MS') || '-' || to_char(finalized_at, 'SS.MS'), ','
    ORDER BY turn_no) FROM convctx.turn WHERE tenant_id = 'quirks' AND session_id = 'q-skew'}),
    '00.001-00.001,00.001-01.000', 'a time that goes back: the time before it');
like($err, qr/not imported: user messages without text: 1\n.*not imported: answers to user messages without text: 1\n/,
    'an empty question: dropped with its answer, counted');
like($err, qr/warning: message ids repeated in a conversation, each given a request id of its own: 1 \(the first: .*quirks\.jsonl:3, message 3 \(id "m1"\) of conversation "q-dup": request "m1#2"\)/,
    'an id twice: a request id of its own, counted');
my $ids = q{SELECT string_agg(session_id || ':' || request_id || ':' || turn_id, ',' ORDER BY session_id, turn_no)
    FROM convctx.turn WHERE tenant_id = 'quirks'};
my $ids_before = $node->safe_psql('fresh', $ids);
like($ids_before, qr/q-dup:m1:[^,]+,q-dup:m1#2:/, 'an id twice: request ids m1 and m1#2');
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'quirks', '--from=messages', '-f', $quirks);
is($rc, 0, 'messages with quirks, again: exit 0') or diag($err);
like($err, qr/imported 0 sessions, 0 turns.*\n.*\(already there: 9\)\n(.*\n)*.*: 9 records read: 0 imported, 9 skipped, 0 rejected\n/,
    'messages with quirks, again: everything skipped');
is($node->safe_psql('fresh', $ids), $ids_before, 'messages with quirks, again: the same turn and request ids');

# an error of a record made from messages names the messages it was made
# of, with their ids and times as written, not the values made of them
{
    (my $changed = read_file($quirks)) =~ s/"created_at":"2026-01-01T10:00:00Z","id":"m1"(.*"q-dup")/"created_at":"2026-01-01T10:00:00.500Z","id":"m1"$1/;
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'quirks', '--from=messages',
        '-f', write_file('quirks_changed.jsonl', $changed));
    is($rc, 1, 'a message changed since the last import: exit 1');
    like($err, qr/quirks_changed\.jsonl:3: error: turn 1 of session "q-dup" differs from the one stored here \(SQLSTATE 23505\)\nDETAIL:  Turn of message 1 \(id "m1"\) has another/,
        'a message changed since: the message, not the turn id');
    like($err, qr/\nCONTEXT:  the turn made of message 1 \(id "m1", time "2026-01-01T10:00:00\.500Z"\) of conversation "q-dup", answered by message 2 \(id "m2", time "2026-01-01T10:00:01Z"\)\n/,
        'a message changed since: its time as written');
    unlike($err, qr/[0-9a-f]{8}-[0-9a-f]{4}-/, 'a message changed since: no turn id made here');
    ($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'quirks-future', '--from=messages',
        '-f', write_file('future.jsonl', $json->encode({ session_id => 'f', identity_id => 'u', messages => [
            { role => 'user', content => 'Q', id => 'm1', created_at => '2099-01-01T00:00:00Z' } ] }) . "\n"));
    is($rc, 1, 'a message time in the future: exit 1');
    like($err, qr/future\.jsonl:1: error: \w+ of a session record is in the future.*\n(.*\n)*CONTEXT:  the session record made of conversation "f" \(its created_at none, its updated_at none, the times of its first and last messages "2099-01-01T00:00:00Z" and "2099-01-01T00:00:00Z"\)\n/,
        'a message time in the future: the time as written');
}

# OpenAI Conversations items
my $openai = write_file('openai.jsonl', encode_json({ id => 'conv_1', object => 'conversation', created_at => 1764000000,
    items => { object => 'list', data => [
        { type => 'message', id => 'msg_1', role => 'user', content => [ { type => 'input_text', text => 'Is VAT due?' } ] },
        { type => 'reasoning', id => 'rs_1' },
        { type => 'message', id => 'msg_2', role => 'assistant',
          content => [ { type => 'output_text', text => 'Yes.', annotations => [] } ] } ] } }) . "\n");
($rc, $out, $err) = tool('import', @fresh, '-U', 'importer', '--tenant', 'openai', '--from=openai-items',
    '--as-identity', 'o', '-f', $openai);
is($rc, 0, 'import --from=openai-items') or diag($err);
like($err, qr/not imported: conversation items that are not messages: 1/, 'the reasoning item counted');
is($node->safe_psql('fresh', q{SELECT request_id || ':' || question_neutral || ':' || answer_neutral || ':' || (created_at = '2025-11-24 16:00:00+00')
    FROM convctx.turn WHERE tenant_id = 'openai'}), 'msg_1:Is VAT due?:Yes.:true', 'the conversation, at its creation time');

done_testing();
