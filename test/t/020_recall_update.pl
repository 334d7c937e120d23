# convctx_recall 0.5.0 with tenant indexes, updated to 0.6.0: the indexes
# numbered in tenant order are dropped, the tenants get random numbers and
# the index worker builds their indexes again once the update commits;
# recall is exact meanwhile and the same after. The catalog is then the
# same as a fresh install's (test/catalog_state.sql), but for the tenants'
# indexes themselves. Skipped where pgvector is not installed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('recall_update');
$node->init;
$node->start;
my $sharedir = $node->safe_psql('postgres',
    q{SELECT setting FROM pg_config WHERE name = 'SHAREDIR'});
plan skip_all => 'pgvector is not installed'
  unless -f "$sharedir/extension/vector.control";

$node->safe_psql('postgres', 'CREATE DATABASE fresh; CREATE DATABASE updated');
$node->safe_psql('fresh', q{
    CREATE EXTENSION convctx;
    CREATE EXTENSION convctx_recall CASCADE;
});
$node->safe_psql('updated', q{
    CREATE EXTENSION convctx;
    CREATE EXTENSION vector;
    CREATE EXTENSION convctx_recall VERSION '0.5.0';
    SELECT convctx_recall.add_model('m3', 3);
    SET convctx.tenant = 'acme';
    SELECT count(convctx.begin_turn('s' || i, 'r', 'q' || i, 1)) FROM generate_series(1, 30) i;
    SET convctx.tenant = 'globex';
    SELECT count(convctx.begin_turn('s' || i, 'r', 'q' || i, 1)) FROM generate_series(1, 12) i;
    INSERT INTO convctx_recall.turn_embedding (tenant_id, session_id, turn_id, model_no, embedding)
    SELECT tenant_id, session_id, turn_id, 1, ('[1,' || substr(session_id, 2) || ',1]')::vector FROM convctx.turn;
    SELECT convctx_recall.index_tenants('m3', 10);
    -- 0.5.0 stored embeddings without a cosine distance: one of a third tenant
    SET convctx.tenant = 'initech';
    SELECT count(convctx.begin_turn('z', 'r', 'q', 1));
    INSERT INTO convctx_recall.turn_embedding (tenant_id, session_id, turn_id, model_no, embedding)
    SELECT tenant_id, session_id, turn_id, 1, '[0,0,0]'::vector FROM convctx.turn WHERE tenant_id = 'initech';
});
is($node->safe_psql('updated',
        q{SELECT string_agg(tenant_id || ' ' || index_no, ', ' ORDER BY tenant_id) FROM convctx_recall.tenant_index}),
    'acme 1, globex 2', '0.5.0 numbered the indexes in tenant order');

is($node->safe_psql('updated', q{SELECT count(*) FROM convctx_recall.turn_embedding}), '43',
    '0.5.0 holds 42 embeddings and one of zeros');
my $recall = q{SET convctx.tenant = 'acme';
    SELECT string_agg(session_id, ' ' ORDER BY distance, session_id) FROM convctx_recall.recall('[1,7.2,1]', 'm3', 5)};
$node->safe_psql('updated', 'ALTER EXTENSION convctx_recall UPDATE');
my $during = $node->safe_psql('updated', $recall);
ok($node->poll_query_until('updated',
        q{SELECT bool_and(ready AND NOT pending) FROM convctx_recall.tenant_index}),
    'the index worker built the tenants\' indexes again after the update');
is($node->safe_psql('updated', $recall), $during, 'recall gives the same turns through the new index');
is($during, 's7 s8 s6 s9 s10', 'and the nearest turns');
is($node->safe_psql('updated', q{
    SELECT count(*) FILTER (WHERE i.index_no > 2 AND x.indisvalid), count(*)
      FROM convctx_recall.tenant_index i
      LEFT JOIN pg_class c ON c.relname = format('turn_embedding_%s_%s', i.model_no, i.index_no)
      LEFT JOIN pg_index x ON x.indexrelid = c.oid}), '2|2', 'each tenant has a valid index under a new number');
is($node->safe_psql('updated', q{
    SELECT count(*) FROM pg_class WHERE relname IN ('turn_embedding_1_1', 'turn_embedding_1_2')}),
    '0', 'the indexes numbered in tenant order are gone');
is($node->safe_psql('updated', q{
    SELECT count(*) FROM convctx_recall.turn_embedding e JOIN convctx_recall.tenant_index i
        ON i.tenant_id = e.tenant_id AND i.model_no = e.model_no AND i.index_no = e.index_no}),
    '42', 'every row is marked with its tenant\'s new number');

is($node->safe_psql('updated', q{SELECT count(*) FROM convctx_recall.turn_embedding WHERE tenant_id = 'initech'}),
    '0', 'the update deleted the embedding without a cosine distance');
is($node->safe_psql('updated', q{SET convctx.tenant = 'initech';
    SELECT count(*) FROM convctx_recall.unembedded_turns('m3')}),
    '1', 'and its turn is on the work list again');

# a development form of 0.5.0, before the tenants' indexes were numbered,
# is refused by the update, which changes nothing
$node->safe_psql('postgres', 'CREATE DATABASE dev_form');
$node->safe_psql('dev_form', q{CREATE EXTENSION convctx; CREATE EXTENSION vector;
    CREATE EXTENSION convctx_recall VERSION '0.5.0';
    ALTER TABLE convctx_recall.turn_embedding DROP COLUMN index_no});
my ($rc, $out, $err) = $node->psql('dev_form', 'ALTER EXTENSION convctx_recall UPDATE');
like($err, qr/ERROR:  convctx_recall 0\.5\.0 in this database is a development form that cannot be updated in place/,
    'a development form of convctx_recall 0.5.0 is refused by the update');
is($node->safe_psql('dev_form', q{SELECT extversion FROM pg_extension WHERE extname = 'convctx_recall'}),
    '0.5.0', 'and stays as it was');

my $catalog_state = slurp_file('test/catalog_state.sql');
sub catalog
{
    my ($db) = @_;
    return $node->safe_psql($db,
        q{SET catalog_state.extension = 'convctx_recall';} . $catalog_state
          . q{SELECT kind || ' ' || name || ' ' || md5(props) FROM catalog_state
               WHERE name !~ '^turn_embedding_[0-9]+_[0-9]+' ORDER BY 1});
}
my ($fresh, $updated) = (catalog('fresh'), catalog('updated'));
ok(length($fresh) > 1000, 'the fresh catalog has its entries');
is($updated, $fresh, 'the updated catalog is the fresh one');

done_testing();
