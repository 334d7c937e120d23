# Tenant binding fails closed (issue 14, section 2), on real servers: every
# event that used to leave a role unbound, and so free to act for any
# tenant, now leaves it acting for none.
#  - a bound group role is dropped: its member gets 42501, not tenant A's turns;
#  - a role bound in database app is unbound in app2: 42501 there, and it
#    cannot bind itself there;
#  - plain DML on convctx.role_tenant (a manual fix, a restore) is seen by an
#    already connected session at its next transaction;
#  - a dump restored into a cluster that lacks one bound role: pg_dump and
#    pg_restore succeed, every other binding works, the missing role's binding
#    binds nobody and unresolved_bindings lists it;
#  - logical replication of convctx.role_tenant: a subscriber session sees a
#    replicated binding at its next transaction; a binding of a role the
#    subscriber lacks does not stop replication of other rows and tables;
#  - bindings hold names, never OIDs: a renamed role is unbound, and a
#    binding never follows an OID to another role;
#  - the update from 0.2.0 carries bindings over by name.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('binding');
$node->init(allows_streaming => 'logical');
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('postgres', 'CREATE DATABASE app2');
$node->safe_psql('postgres', q{
    CREATE ROLE carol LOGIN;
    CREATE ROLE g_b NOLOGIN;
    GRANT g_b TO carol;
    CREATE ROLE dave LOGIN;
    CREATE ROLE erin LOGIN;
    CREATE ROLE ivan LOGIN;
    CREATE ROLE hank LOGIN;
    CREATE ROLE platform LOGIN;
});
for my $db ('app', 'app2')
{
    $node->safe_psql($db, q{
        CREATE EXTENSION convctx;
        GRANT convctx_admin TO carol, dave, erin, ivan, hank, platform;
    });
}

# psql as a login role (the session user, as a real client would be)
sub as_role
{
    my ($n, $db, $role, $sql) = @_;
    my ($rc, $out, $err) = $n->psql($db, $sql, extra_params => [ '-U', $role ]);
    return ($out, $err);
}

# tenant A holds a secret turn in app
$node->safe_psql('app', q{
    SET convctx.tenant = 'A';
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'A secret question'), 'A secret answer');
});

# ---------------------------------------------------------------------------
# A bound group role is dropped
# ---------------------------------------------------------------------------
$node->safe_psql('app', q{SELECT convctx.bind_role_tenant('g_b', 'B')});
my ($out, $err) = as_role($node, 'app', 'carol', q{SELECT convctx.current_tenant()});
is($out, 'B', 'carol acts for B through her group g_b');
$node->safe_psql('postgres', 'DROP ROLE g_b');
($out, $err) = as_role($node, 'app', 'carol', q{
    SET convctx.tenant = 'A';
    SELECT question_neutral FROM convctx.recent_turns('s1')});
unlike($out, qr/secret/, 'group dropped: carol reads none of tenant A\'s turns');
like($err, qr/role "carol" is not bound to a tenant/, 'group dropped: carol gets an error');
like($err, qr/HINT:.*convctx\.bind_role_tenant\('carol'/, 'the error says how to bind her');
($out, $err) = as_role($node, 'app', 'carol', q{\set VERBOSITY verbose
    SET convctx.tenant = 'A'; SELECT convctx.start_turn('s1', 'r9', 'carol writes')});
like($err, qr/42501/, 'and she cannot write either (42501)');
is($node->safe_psql('app', q{SELECT role_name || '=' || tenant_id FROM convctx.unresolved_bindings()}),
    'g_b=B', 'the dropped group\'s binding is listed as unresolved');

# ---------------------------------------------------------------------------
# Bound in app, unbound in app2
# ---------------------------------------------------------------------------
$node->safe_psql('app', q{SELECT convctx.bind_role_tenant('carol', 'A')});
($out, $err) = as_role($node, 'app', 'carol',
    q{SELECT question_neutral FROM convctx.recent_turns('s1')});
is($out, 'A secret question', 'carol, bound to A in app, reads A there');
$node->safe_psql('app2', q{
    SET convctx.tenant = 'A';
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', 'app2 A question'), 'app2 A answer');
});
($out, $err) = as_role($node, 'app2', 'carol', q{
    SET convctx.tenant = 'A';
    SELECT question_neutral FROM convctx.recent_turns('s1')});
unlike($out, qr/question/, 'in app2 carol reads nothing');
like($err, qr/role "carol" is not bound to a tenant\nDETAIL:  In database "app2"/,
    'in app2 carol is unbound: 42501 naming the database');
for my $call (q{SELECT convctx.bind_role_tenant('carol', 'A')},
              q{SELECT convctx.bind_role_all_tenants('carol')},
              q{SELECT convctx.unbind_role_tenant('carol')})
{
    ($out, $err) = as_role($node, 'app2', 'carol', $call);
    like($err, qr/not bound to a tenant/, "in app2 carol cannot bind herself: $call");
}
is($node->safe_psql('app2', q{SELECT count(*) FROM convctx.role_tenant}), '0',
    'no binding was written in app2');
($out, $err) = as_role($node, 'app', 'carol', q{SELECT convctx.bind_role_tenant('carol', 'B')});
like($err, qr/permission denied to bind roles to tenants/, 'in app carol, bound to A, cannot rebind herself');
# a platform administrator bound to every tenant in app manages bindings in app only
$node->safe_psql('app', q{SELECT convctx.bind_role_all_tenants('platform')});
($out, $err) = as_role($node, 'app', 'platform', q{
    SELECT convctx.bind_role_tenant('dave', 'D');
    SET convctx.tenant = 'A';
    SELECT count(*) FROM convctx.admin_session_turns('s1')});
is($out, "\n1", 'a role bound to every tenant binds others and reads the tenant it names');
($out, $err) = as_role($node, 'app2', 'platform', q{SELECT convctx.bind_role_tenant('dave', 'D')});
like($err, qr/not bound to a tenant/, 'but not in app2, where it is bound to nothing');

# ---------------------------------------------------------------------------
# Plain DML on role_tenant is seen by a running session at its next transaction
# ---------------------------------------------------------------------------
sub bgq
{
    my ($bg, $sql) = @_;
    $bg->{stderr} = '';
    my ($o) = $bg->query($sql);
    return ($o, $bg->{stderr});
}
my $bg = $node->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'erin' ]);
($out, $err) = bgq($bg, q{SELECT convctx.current_tenant()});
like($err, qr/not bound/, 'erin, connected, is bound to nothing');
$node->safe_psql('app', q{INSERT INTO convctx.role_tenant (role_name, tenant_id) VALUES ('erin', 'A')});
($out, $err) = bgq($bg, q{SELECT convctx.current_tenant()});
is("$out|$err", 'A|', 'an INSERT by a superuser binds the running session to A');
($out, $err) = bgq($bg, q{SELECT question_neutral FROM convctx.recent_turns('s1')});
is($out, 'A secret question', 'and it reads A at once');
$node->safe_psql('app', q{UPDATE convctx.role_tenant SET tenant_id = 'B' WHERE role_name = 'erin'});
($out, $err) = bgq($bg, q{SELECT convctx.current_tenant(), (SELECT count(*) FROM convctx.recent_turns('s1'))});
is("$out|$err", 'B|0|', 'an UPDATE moves it to B, with none of A\'s turns');
$node->safe_psql('app', q{DELETE FROM convctx.role_tenant WHERE role_name = 'erin'});
($out, $err) = bgq($bg, q{SET convctx.tenant = 'A'; SELECT count(*) FROM convctx.recent_turns('s1')});
like($err, qr/not bound/, 'a DELETE unbinds it: 42501, not the tenant named by the setting');
$node->safe_psql('app', q{
    INSERT INTO convctx.role_tenant (role_name, tenant_id) VALUES ('erin', 'A');
});
($out, $err) = bgq($bg, q{RESET convctx.tenant; SELECT convctx.current_tenant()});
is("$out|$err", 'A|', 'bound again');
$node->safe_psql('app', q{TRUNCATE convctx.role_tenant});
($out, $err) = bgq($bg, q{SELECT convctx.current_tenant()});
like($err, qr/not bound/, 'a TRUNCATE unbinds it too');
# put the bindings back as a restore would: COPY
my $copy_file = $node->basedir . '/bindings.copy';
PostgreSQL::Test::Utils::append_to_file($copy_file,
    "carol\tA\nerin\tA\nplatform\t\\N\ng_b\tB\ndave\tD\n");
$node->safe_psql('app', "COPY convctx.role_tenant (role_name, tenant_id) FROM '$copy_file'");
($out, $err) = bgq($bg, q{SELECT convctx.current_tenant()});
is("$out|$err", 'A|', 'a COPY (as in a restore) is seen too');
$bg->quit;

# ---------------------------------------------------------------------------
# Bindings hold names, never OIDs
# ---------------------------------------------------------------------------
is($node->safe_psql('app', q{
    SELECT count(*) FROM pg_attribute
     WHERE attrelid = 'convctx.role_tenant'::regclass AND attnum > 0 AND NOT attisdropped
       AND atttypid IN ('oid'::regtype, 'regrole'::regtype)}), '0',
   'role_tenant holds no role OID');
$node->safe_psql('postgres', q{CREATE ROLE gina LOGIN IN ROLE convctx_app});
$node->safe_psql('app', q{SELECT convctx.bind_role_tenant('gina', 'A')});
$node->safe_psql('postgres', q{ALTER ROLE gina RENAME TO gina_renamed});
($out, $err) = as_role($node, 'app', 'gina_renamed', q{SET convctx.tenant = 'B'; SELECT convctx.current_tenant()});
like($err, qr/role "gina_renamed" is not bound/, 'a renamed role (the same OID) is bound to nothing');
is($node->safe_psql('app', q{SELECT role_name FROM convctx.unresolved_bindings() WHERE role_name = 'gina'}),
    'gina', 'its old name is listed as unresolved');
$node->safe_psql('app', q{SELECT convctx.unbind_role_tenant('gina')});

# ---------------------------------------------------------------------------
# Dump, restored into a cluster where one bound role is missing
# ---------------------------------------------------------------------------
# erin is bound to A in app; the other cluster has carol, dave and platform
# (created in another order, so that their OIDs differ) but no erin.
my $dump = $node->basedir . '/app.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('app'), '-f', $dump ], 'pg_dump of app');
my $other = PostgreSQL::Test::Cluster->new('restored');
$other->init;
$other->start;
$other->safe_psql('postgres', q{
    CREATE ROLE filler1; CREATE ROLE filler2;
    CREATE ROLE platform LOGIN; CREATE ROLE dave LOGIN; CREATE ROLE carol LOGIN;
    CREATE ROLE hank LOGIN; CREATE ROLE ivan LOGIN;
    CREATE DATABASE app;
});
$other->command_ok([ 'pg_restore', '--exit-on-error', '-d', $other->connstr('app'), $dump ],
    'pg_restore into a cluster without erin succeeds (exit 0)');
$other->safe_psql('postgres', q{GRANT convctx_admin TO carol, dave, platform, hank, ivan});
isnt($other->safe_psql('postgres', q{SELECT 'carol'::regrole::oid}),
     $node->safe_psql('postgres', q{SELECT 'carol'::regrole::oid}), 'carol has another OID there');
is($other->safe_psql('app', q{SELECT string_agg(role_name || '=' || coalesce(tenant_id, '*'), ',' ORDER BY role_name)
                               FROM convctx.role_tenant}),
   'carol=A,dave=D,erin=A,g_b=B,platform=*', 'every binding row was restored');
($out, $err) = as_role($other, 'app', 'carol', q{SELECT question_neutral FROM convctx.recent_turns('s1')});
is($out, 'A secret question', 'carol is bound to A on the restored copy');
($out, $err) = as_role($other, 'app', 'dave', q{SELECT convctx.current_tenant()});
is($out, 'D', 'dave is bound to D on the restored copy');
($out, $err) = as_role($other, 'app', 'platform', q{SET convctx.tenant = 'Q'; SELECT convctx.current_tenant()});
is($out, 'Q', 'platform is bound to every tenant on the restored copy');
is($other->safe_psql('app', q{SELECT string_agg(role_name || '=' || tenant_id, ',' ORDER BY role_name)
                               FROM convctx.unresolved_bindings()}),
   'erin=A,g_b=B', 'the missing roles\' bindings bind nobody and are listed');
($out, $err) = as_role($other, 'app', 'hank', q{SET convctx.tenant = 'A'; SELECT convctx.current_tenant()});
like($err, qr/not bound/, 'a role that was never bound acts for no tenant on the restored copy');
# the binding is by name: the role created later under that name is bound at once
$other->safe_psql('postgres', q{CREATE ROLE erin LOGIN IN ROLE convctx_app});
($out, $err) = as_role($other, 'app', 'erin', q{SELECT convctx.current_tenant()});
is($out, 'A', 'erin, created after the restore, is bound by her name');
$other->stop;

# ---------------------------------------------------------------------------
# Logical replication of role_tenant
# ---------------------------------------------------------------------------
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->start;
$sub->safe_psql('postgres', q{CREATE ROLE carol LOGIN; CREATE ROLE ivan LOGIN; CREATE DATABASE app});
$sub->safe_psql('app', q{CREATE EXTENSION convctx; GRANT convctx_admin TO carol, ivan});
$node->safe_psql('app', q{
    CREATE PUBLICATION bindings FOR TABLE convctx.role_tenant, convctx.conversation_context});
my $pub_conn = $node->connstr . ' dbname=app';
$sub->safe_psql('app', qq{CREATE SUBSCRIPTION bindings CONNECTION '$pub_conn' PUBLICATION bindings});
$sub->wait_for_subscription_sync($node, 'bindings', 'app');
is($sub->safe_psql('app', q{SELECT string_agg(role_name, ',' ORDER BY role_name) FROM convctx.role_tenant}),
   'carol,dave,erin,g_b,platform', 'the initial copy brought the bindings');
my $sbg = $sub->background_psql('app', on_error_stop => 0, extra_params => [ '-U', 'ivan' ]);
($out, $err) = bgq($sbg, q{SELECT convctx.current_tenant()});
like($err, qr/not bound/, 'ivan, connected to the subscriber, is bound to nothing');
$node->safe_psql('app', q{SELECT convctx.bind_role_tenant('ivan', 'C')});
$node->wait_for_catchup('bindings');
($out, $err) = bgq($sbg, q{SELECT convctx.current_tenant()});
is("$out|$err", 'C|', 'a binding replicated to the subscriber is seen by its running session');
$node->safe_psql('app', q{UPDATE convctx.role_tenant SET tenant_id = 'D' WHERE role_name = 'ivan'});
$node->wait_for_catchup('bindings');
($out, $err) = bgq($sbg, q{SELECT convctx.current_tenant()});
is("$out|$err", 'D|', 'and a replicated UPDATE');
# hank exists on the publisher only
$node->safe_psql('app', q{
    SELECT convctx.bind_role_tenant('hank', 'H');
    SET convctx.tenant = 'Z';
    SELECT convctx.context_add('after-hank', ARRAY['n1']);
    RESET convctx.tenant;
    SELECT convctx.unbind_role_tenant('ivan');
});
$node->wait_for_catchup('bindings');
is($sub->safe_psql('app', q{SELECT string_agg(role_name || '=' || tenant_id, ',') FROM convctx.unresolved_bindings()
                             WHERE role_name = 'hank'}),
   'hank=H', 'the binding of a role the subscriber lacks arrives, unresolved');
is($sub->safe_psql('app', q{SELECT count(*) FROM convctx.conversation_context WHERE conversation_id = 'after-hank'}),
   '1', 'replication of other tables went on after it');
($out, $err) = bgq($sbg, q{SELECT convctx.current_tenant()});
like($err, qr/not bound/, 'and of other rows: ivan\'s replicated unbinding is seen');
$sbg->quit;
$sub->stop;

# ---------------------------------------------------------------------------
# Upgrade from 0.2.0: bindings keyed by regrole become bindings by name
# ---------------------------------------------------------------------------
# A live binding keeps its name; a stale one (its role renamed or dropped:
# in 0.2.0 it bound nobody) keeps its name too, unless that name now belongs
# to another role or binding, where it would bind a role that was never
# bound: then it is dropped with a warning.
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', q{
    CREATE EXTENSION convctx VERSION '0.2.0';
    CREATE ROLE u_live; CREATE ROLE u_renamed; CREATE ROLE u_dropped; CREATE ROLE u_reused;
    INSERT INTO convctx.role_tenant (role_id, tenant_id, role_name) SELECT r::regrole, t, r
    FROM (VALUES ('u_live', 'A'), ('u_renamed', 'B'), ('u_dropped', 'C'), ('u_reused', 'D')) v(r, t);
    ALTER ROLE u_renamed RENAME TO u_renamed_new;
    DROP ROLE u_dropped;
    ALTER ROLE u_reused RENAME TO u_reused_old;
    CREATE ROLE u_reused;
});
my ($rc_up, $out_up, $err_up) = $node->psql('old', q{ALTER EXTENSION convctx UPDATE});
is($rc_up, 0, 'the update from 0.2.0 succeeds');
like($err_up, qr/WARNING:  stale binding of role "u_reused" to tenant "D" removed/,
    'a stale binding whose name now belongs to another role is dropped, with a warning');
is($node->safe_psql('old', q{
    SELECT string_agg(role_name || '=' || tenant_id || ':' || role_exists, ',' ORDER BY role_name)
      FROM convctx.bindings()}),
   'u_dropped=C:false,u_live=A:true,u_renamed=B:false', 'the other bindings are kept by name');
$node->safe_psql('postgres', 'DROP ROLE u_live, u_renamed_new, u_reused, u_reused_old');

$node->stop;
done_testing();
