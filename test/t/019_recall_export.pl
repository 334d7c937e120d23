# convctx export and import with semantic recall (convctx_recall, pgvector):
# an identity's export carries its embeddings, an import into another
# database stores the same vectors, an export after erase_identity carries
# none, and a file whose trailer does not count embeddings still imports.
# Skipped where pgvector is not installed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('recall_export');
$node->init;
$node->append_conf('postgresql.conf', "timezone = 'UTC'");
$node->start;
my $sharedir = $node->safe_psql('postgres',
    q{SELECT setting FROM pg_config WHERE name = 'SHAREDIR'});
plan skip_all => 'pgvector is not installed'
  unless -f "$sharedir/extension/vector.control";

my $tool = $node->config_data('--bindir') . '/convctx';
my $dir = PostgreSQL::Test::Utils::tempdir;

$node->safe_psql('postgres', q{
    CREATE DATABASE app;
    CREATE DATABASE fresh;
    CREATE DATABASE old;
    CREATE ROLE admin_acme LOGIN;
});
for my $db ('app', 'fresh', 'old')
{
    $node->safe_psql($db, q{
        CREATE EXTENSION convctx;
        CREATE EXTENSION convctx_recall CASCADE;
        SELECT convctx_recall.add_model('m3', 3);
        GRANT convctx_admin TO admin_acme;
        SELECT convctx.bind_role_tenant('admin_acme', 'acme');
    });
}
$node->safe_psql('app', q{
    SET convctx.tenant = 'acme';
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'Q1', identity_id => 'u1'), 'A1');
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', 'Q2', identity_id => 'u1'), 'A2');
    SELECT convctx.start_turn('s2', 'r1', 'Q of u2', identity_id => 'u2');
    SELECT convctx_recall.store_embedding(session_id, turn_id, 'm3',
           CASE question_neutral WHEN 'Q1' THEN '[0.1,0.2,0.3]' WHEN 'Q2' THEN '[1e-7,-0.33333334,1]'
                                 ELSE '[1,1,1]' END::vector)
      FROM convctx_recall.unembedded_turns('m3');
});

sub tool
{
    my ($stdout, $stderr) = ('', '');
    IPC::Run::run([ $tool, @_ ], '>', \$stdout, '2>', \$stderr);
    return ($? >> 8, $stdout, $stderr);
}

my @conn = ('-h', $node->host, '-p', $node->port, '-U', 'admin_acme');
my $vectors = q{SELECT e.session_id, t.question_neutral, e.embedding::text, e.stored_at
                  FROM convctx_recall.turn_embedding e JOIN convctx.turn t USING (tenant_id, session_id, turn_id)
                 WHERE e.tenant_id = 'acme' AND e.session_id = 's1' ORDER BY 2};

# An identity's export, for access or before erasing it, has its embeddings.
my ($rc, $out, $err) = tool('export', @conn, '-d', 'app', '--identity', 'u1', '-f', "$dir/u1.jsonl");
is($rc, 0, 'export of identity u1') or diag($err);
my $file = slurp_file("$dir/u1.jsonl");
my @embeddings = ($file =~ /^\{"type": "embedding",[^\n]*/mg);
is(scalar @embeddings, 2, 'the export has the identity\'s two embeddings');
unlike($file, qr/"session_id": "s2"/, 'and nothing of another identity');
like($file, qr/"embedding":\s*2\b/, 'the trailer counts them');

($rc, $out, $err) = tool('import', @conn, '-d', 'fresh', '-f', "$dir/u1.jsonl");
is($rc, 0, 'import into another database') or diag($err);
like($err, qr/imported 1 session, 2 turns, .*, 2 embeddings/, 'the summary counts the embeddings');
is($node->safe_psql('fresh', $vectors), $node->safe_psql('app', $vectors),
    'the same vectors and times, to the last bit');
is($node->safe_psql('fresh', q{SET convctx.tenant = 'acme';
    SELECT question_neutral FROM convctx_recall.recall('[0,-0.3,1]', 'm3', 1)}), 'Q2',
    'recalled there');

($rc, $out, $err) = tool('import', @conn, '-d', 'fresh', '-f', "$dir/u1.jsonl");
is($rc, 0, 'imported again') or diag($err);
like($err, qr/skipped .*2 embeddings \(already there: 5\)/, 'every record already there');

# After the erasure, an export carries no embedding of what it erased.
$node->safe_psql('app', q{SET convctx.tenant = 'acme'; SELECT convctx.erase_identity('u1')});
($rc, $out, $err) = tool('export', @conn, '-d', 'app', '-f', "$dir/after.jsonl");
is($rc, 0, 'export after the erasure') or diag($err);
$file = slurp_file("$dir/after.jsonl");
@embeddings = ($file =~ /^\{"type": "embedding",[^\n]*/mg);
is(scalar @embeddings, 1, 'only the embedding of the identity not erased');
like($embeddings[0], qr/"session_id": "s2"/, 'which is of s2');

# A file whose trailer does not count embeddings (it has none) imports.
my $no_embeddings = join('', grep { !/"type": "embedding"/ } split /^/, $file);
$no_embeddings =~ s/,\s*"embedding":\s*1\b//;
my $lines = () = $no_embeddings =~ /\n/g;
$no_embeddings =~ s/"lines": \d+/"lines": $lines/;
unlike($no_embeddings, qr/"embedding"/, 'a file without embeddings and without their count');
append_to_file("$dir/old.jsonl", $no_embeddings);
($rc, $out, $err) = tool('import', @conn, '-d', 'old', '-f', "$dir/old.jsonl");
is($rc, 0, 'imports') or diag($err);
like($err, qr/imported 2 sessions, 3 turns, .*, 0 embeddings/, 'its sessions and turns');

done_testing();
