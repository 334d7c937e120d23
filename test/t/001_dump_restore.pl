# pg_dump / pg_restore round trip: every convctx row comes back, and the
# extension works on the restored copy.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', 'CREATE EXTENSION convctx');
$node->safe_psql('src', q{
    SELECT convctx.context_add('conv-1', ARRAY['vat', 'vrt'], 'user-1');
    SET convctx.tenant = 'tenant-b';
    SELECT convctx.context_save('conv-1', '{"activeNodeIds": ["b"], "flags": {"x": 1}}');
});

my $snapshot = q{
    SELECT string_agg(tenant_id || '|' || conversation_id || '|' || context_json::text || '|'
                      || coalesce(user_id, '-') || '|' || (created_at <= updated_at)::text,
                      E'\n' ORDER BY tenant_id, conversation_id)
    FROM convctx.conversation_context};
my $before = $node->safe_psql('src', $snapshot);

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');

is($node->safe_psql('restored', $snapshot), $before, 'every context row restored');
is($node->safe_psql('restored', "SELECT convctx.context_add('conv-1', ARRAY['cgt'])"),
   '{"activeNodeIds": ["vat", "vrt", "cgt"]}', 'extension works on the restored copy');
is($node->safe_psql('restored', "SELECT extversion FROM pg_extension WHERE extname = 'convctx'"),
   '0.1.0', 'extension version restored');

$node->stop;
done_testing();
