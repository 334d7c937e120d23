# A fresh install and an updated one leave the same catalog, roles included.
# The regression test upgrade compares the two in one database, where the
# roles convctx_app, convctx_admin and convctx_audit exist before either
# install (roles belong to the cluster and survive DROP EXTENSION). Here a
# new cluster has none: the full install script of the current version
# creates them in one database; then extension, schema and roles are
# dropped, and each older version, installed in a database of its own and
# updated, creates them again through its own scripts. Everything
# test/catalog_state.sql covers must come out the same.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('fresh_updated');
$node->init;
$node->start;

my $catalog_state = slurp_file('test/catalog_state.sql');

# One line per catalog entry: kind, name and a hash of its properties.
sub catalog
{
	my ($db) = @_;
	my $rows = $node->safe_psql($db,
		$catalog_state
		  . q{SELECT kind || ' ' || name || ' ' || md5(props) FROM catalog_state ORDER BY 1});
	return [ split /\n/, $rows ];
}

# The entries found in only one of two catalogs (a changed one is in both
# lists, with two hashes).
sub differences
{
	my ($a, $b) = @_;
	my %in_a = map { $_ => 1 } @$a;
	my %in_b = map { $_ => 1 } @$b;
	return [ (grep { !$in_b{$_} } @$a), (grep { !$in_a{$_} } @$b) ];
}

sub drop_everything
{
	my ($db) = @_;
	$node->safe_psql($db, 'DROP EXTENSION convctx; DROP SCHEMA convctx');
	$node->safe_psql('postgres', 'DROP ROLE convctx_app, convctx_admin, convctx_audit');
	is($node->safe_psql('postgres',
			q{SELECT count(*) FROM pg_roles WHERE rolname LIKE 'convctx%'}),
		'0', "no role of convctx is left after dropping $db\'s install");
}

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION convctx');
my $fresh = catalog('fresh');
my $roles = grep { /^role / } @$fresh;
is($roles, 3, 'the fresh install created three roles');
ok(scalar(@$fresh) > 300, 'and the catalog has its entries (' . scalar(@$fresh) . ')');
drop_everything('fresh');

foreach my $old ('0.1.0', '0.2.0', '0.3.0', '0.4.0')
{
	(my $name = "v$old") =~ s/\./_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $name");
	$node->safe_psql($name, "CREATE EXTENSION convctx VERSION '$old'");
	$node->safe_psql($name, 'ALTER EXTENSION convctx UPDATE');
	is(join("\n", @{ differences($fresh, catalog($name)) }), '',
		"$old updated: the catalog and the roles of a fresh install");
	drop_everything($name);
}

done_testing();
