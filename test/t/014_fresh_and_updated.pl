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
	my ($db, $extension) = @_;
	$extension //= 'convctx';
	my $rows = $node->safe_psql($db,
		"SET catalog_state.extension = '$extension';\n" . $catalog_state
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

# 0.5.0-first: the first form of 0.5.0's install script that main held
# (test/upgrade/), installed under a name of its own by the test command,
# updated by the same script as 0.5.0.
foreach my $old ('0.1.0', '0.2.0', '0.3.0', '0.4.0', '0.5.0', '0.5.0-first')
{
	(my $name = "v$old") =~ s/[.-]/_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $name");
	$node->safe_psql($name, "CREATE EXTENSION convctx VERSION '$old'");
	# a linked conversation of two turns, written as that version's API
	# left it: after the update it is listed with its first question as its
	# title, and the API works on it
	$node->safe_psql($name, q{
		BEGIN;
		INSERT INTO convctx.session (tenant_id, session_id, identity_id, last_turn_no, live_turns, live_answers, created_at)
		VALUES ('acme', 's1', 'u1', 2, 2, 2, now());
		INSERT INTO convctx.session_link (tenant_id, session_id, identity_id, linked_at) VALUES ('acme', 's1', 'u1', now());
		INSERT INTO convctx.turn (tenant_id, session_id, turn_id, turn_no, request_id, identity_id,
		                          finalized_at, question_neutral, answer_neutral)
		VALUES ('acme', 's1', gen_random_uuid(), 1, 'r1', 'u1', now(), '  Q1', 'A1'),
		       ('acme', 's1', gen_random_uuid(), 2, 'r2', 'u1', now(), 'Q2', 'A2');
		COMMIT})
	  if $old ge '0.4.0';
	# the last form of 0.5.0 keeps the default title in the row
	$node->safe_psql($name, q{UPDATE convctx.session SET first_question = 'Q1'}) if $old eq '0.5.0';
	$node->safe_psql($name, 'ALTER EXTENSION convctx UPDATE');
	is(join("\n", @{ differences($fresh, catalog($name)) }), '',
		"$old updated: the catalog and the roles of a fresh install");
	if ($old ge '0.4.0')
	{
		is($node->safe_psql($name, q{
			SET convctx.tenant = 'acme';
			SELECT title || ' ' || title_is_default || ' ' || linked_later || ' ' || live_turns
			  FROM convctx.list_conversations('u1');
			SELECT repeated || ' ' || jsonb_array_length(history)
			  FROM convctx.begin_turn('s1', 'r3', 'Q3', identity_id => 'u1');
			SELECT convctx.erase_identity('u1');
			SELECT count(*) FROM convctx.list_conversations('u1')}),
			"Q1 true false 2\nfalse 2\n3\n0",
			"$old updated: its conversation listed with its default title; begin_turn and erase_identity work");
	}
	drop_everything($name);
}

# A development form of 0.5.0 (before the trigger session_truncated) is
# refused by the update, which changes nothing, rather than updated to a
# catalog that differs from a fresh install.
$node->safe_psql('postgres', 'CREATE DATABASE dev_form');
$node->safe_psql('dev_form', q{CREATE EXTENSION convctx VERSION '0.5.0-first';
	DROP TRIGGER session_truncated ON convctx.session});
my ($rc, $out, $err) = $node->psql('dev_form', 'ALTER EXTENSION convctx UPDATE');
like($err, qr/ERROR:  convctx 0\.5\.0 in this database is a development form that cannot be updated in place/,
	'a development form of 0.5.0 is refused by the update');
is($node->safe_psql('dev_form', q{SELECT extversion FROM pg_extension WHERE extname = 'convctx'}),
	'0.5.0-first', 'and stays as it was');
drop_everything('dev_form');

# convctx_recall (where pgvector is installed): a fresh install of the
# current version and each older one updated give the same catalog.
SKIP:
{
	skip 'pgvector is not installed', 2
	  unless $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'}) eq '1';
	my $setup = 'CREATE EXTENSION convctx; CREATE EXTENSION vector';
	$node->safe_psql('postgres', 'CREATE DATABASE recall_fresh');
	$node->safe_psql('recall_fresh', "$setup; CREATE EXTENSION convctx_recall");
	my $recall_fresh = catalog('recall_fresh', 'convctx_recall');
	ok(scalar(@$recall_fresh) > 20,
		'convctx_recall\'s catalog has its entries (' . scalar(@$recall_fresh) . ')');
	foreach my $old ('0.5.0')
	{
		(my $name = "recall_v$old") =~ s/[.-]/_/g;
		$node->safe_psql('postgres', "CREATE DATABASE $name");
		$node->safe_psql($name, "$setup; CREATE EXTENSION convctx_recall VERSION '$old'");
		$node->safe_psql($name, 'ALTER EXTENSION convctx_recall UPDATE');
		is(join("\n", @{ differences($recall_fresh, catalog($name, 'convctx_recall')) }), '',
			"convctx_recall $old updated: the catalog of a fresh install");
	}
}

done_testing();
