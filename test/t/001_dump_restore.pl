# pg_dump / pg_restore round trip: every convctx row of every table comes
# back (audit rows with their keys), the role bindings (by role name), the
# privileges granted on convctx objects and the database's convctx
# settings; the extension works on the restored copy, for a bound role too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
# Roles are global (CREATE EXTENSION made convctx_app and convctx_admin):
# they exist before and after, as pg_dumpall --globals-only would bring
# them to another cluster.
$node->safe_psql('src', q{
    CREATE EXTENSION convctx;
    CREATE ROLE app_acme LOGIN IN ROLE convctx_app;
    CREATE ROLE admin_acme LOGIN IN ROLE convctx_admin;
    CREATE ROLE reporting LOGIN;
    ALTER DATABASE src SET convctx.max_session_turns = 50;
    ALTER DATABASE src SET convctx.session_ttl = '2h';
    SELECT convctx.bind_role_tenant('app_acme', 'acme');
    SELECT convctx.bind_role_tenant('admin_acme', 'acme');
    -- a privilege beyond the extension's own: pg_dump must keep it
    GRANT SELECT ON convctx.turn TO reporting;
});

# Data in every table, through the API, as the bound roles and as another
# tenant (the same session and request ids in both).
$node->safe_psql('src', q{
    SET ROLE app_acme;
    SELECT convctx.context_add('s1', ARRAY['vat', 'vrt'], 'user-1');
    SELECT convctx.start_turn('s1', 'r1', 'Q1', meta => '{"channel": "web", "ip": "192.0.2.1"}') AS t1 \gset
    SELECT convctx.record_retrieval('s1', :'t1', '[{"id": "c1", "text": "chunk"}]', '[{"id": "c1"}]');
    SELECT convctx.finalize_turn('s1', :'t1', 'A1');
    SELECT convctx.start_turn('s1', 'r2', 'Q2') AS t2 \gset
    SELECT convctx.record_clarification('s1', :'t2', '[{"id": "year", "question": "Which year?", "type": "text"}]', '{"detected_scope": "vat"}');
    SELECT convctx.finalize_turn('s1', :'t2', 'A2');
    SELECT convctx.replace_turn('s1', :'t2', 'A2 corrected');
    SELECT convctx.set_summary('s1', 'about vat', :'t1', 0);
    SELECT convctx.start_turn('s1', 'r3', 'Q3 secret') AS t3 \gset
    SELECT convctx.link_session('user-1', 's1');
    RESET ROLE;
    SET ROLE admin_acme;
    SELECT convctx.redact_turn('s1', :'t3');
    RESET ROLE;
    SET convctx.tenant = 'globex';
    SELECT convctx.start_turn('s1', 'r1', 'globex Q1') AS g1 \gset
    SELECT convctx.finalize_turn('s1', :'g1', 'globex A1');
    SELECT convctx.link_session('user-9', 's1');
});
# A refused link: its audit row is committed although the call fails.
$node->psql('src', q{SET convctx.tenant = 'globex'; SELECT convctx.link_session('user-8', 's1')});

# One line per table: row count and a fingerprint of every column of
# every row; plus the grants and the policies.
my $snapshot = q{
    SELECT string_agg(line, E'\n' ORDER BY line) FROM (
        SELECT c.relname || ': ' || (xpath('/row/n/text()',
                   query_to_xml(format('SELECT count(*) AS n FROM %s', c.oid::regclass), false, true, '')))[1]::text
               || ' rows, ' || (xpath('/row/h/text()',
                   query_to_xml(format('SELECT md5(coalesce(string_agg(x::text, ''|'' ORDER BY x::text), '''')) AS h FROM %s x',
                                       c.oid::regclass), false, true, '')))[1]::text AS line
        FROM pg_class c
        WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
        UNION ALL
        SELECT 'grant ' || c.relname || ': ' || coalesce(c.relacl::text, '-')
        FROM pg_class c WHERE c.relnamespace = 'convctx'::regnamespace
        UNION ALL
        SELECT 'grant ' || p.oid::regprocedure::text || ': ' || coalesce(p.proacl::text, '-')
               || ' ' || coalesce(array_to_string(p.proconfig, ','), '-') || ' ' || p.prosecdef::text
        FROM pg_proc p WHERE p.pronamespace = 'convctx'::regnamespace
        UNION ALL
        SELECT 'policy ' || polrelid::regclass::text || '.' || polname FROM pg_policy
        UNION ALL
        SELECT 'setting ' || array_to_string(s.setconfig, ',')
        FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
        WHERE d.datname = current_database()
    ) lines};
my $before = $node->safe_psql('src', $snapshot);
like($before, qr/^turn: 5 rows/m, 'the source holds every kind of row');
like($before, qr/^role_tenant: 2 rows/m, 'the source holds the role bindings');
like($before, qr/^audit_log: [1-9]/m, 'the source holds audit rows');

# A custom-format dump with --create, restored under the same name after
# the source is renamed, so that the database's settings come back too.
my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '--create', '-d', $node->connstr('src'), '-f', $dump ],
    'pg_dump');
$node->safe_psql('postgres', 'ALTER DATABASE src RENAME TO src_old');
$node->command_ok([ 'pg_restore', '--create', '--exit-on-error', '-d', $node->connstr('postgres'), $dump ],
    'pg_restore');

my $after = $node->safe_psql('src', $snapshot);
is($after, $before, 'every row, binding, grant, policy and setting restored');
is($node->safe_psql('src', "SELECT extversion FROM pg_extension WHERE extname = 'convctx'"),
   $node->safe_psql('src', "SELECT default_version FROM pg_available_extensions WHERE name = 'convctx'"),
   'extension version restored');

# The extension works on the restored copy.
is($node->safe_psql('src', q{
    SET ROLE app_acme;
    SELECT convctx.current_tenant() || ' ' || convctx.context_add('s1', ARRAY['cgt'])::text}),
   'acme {"activeNodeIds": ["vat", "vrt", "cgt"]}', 'bound role and context store work');
is($node->safe_psql('src', q{
    SET ROLE app_acme;
    SELECT string_agg(question_neutral || '=' || answer_neutral, ', ') FROM convctx.recent_turns('s1')}),
   'Q1=A1, Q2=A2 corrected', 'recent turns of the restored session');
is($node->safe_psql('src', q{
    SET ROLE admin_acme;
    SELECT (SELECT count(*) FROM convctx.admin_session_turns('s1')) || ' ' ||
           (SELECT convctx.start_turn('s1', 'r1', 'Q1 retried') = turn_id
              FROM convctx.admin_session_turns('s1') WHERE request_id = 'r1' AND replaced_by_turn_id IS NULL)::text
           || ' ' || (SELECT string_agg(tenant, ',') FROM convctx.sessions)}),
   '4 true acme', 'a retry on the restored copy finds its turn; the admin sees its tenant only');
is($node->safe_psql('src', q{
    SELECT string_agg(role_name || '=' || tenant_id, ',' ORDER BY role_name) FROM convctx.bindings()}),
   'admin_acme=acme,app_acme=acme', 'the bindings are restored by role name');
is($node->safe_psql('src', q{SELECT count(*) FROM convctx.unresolved_bindings()}), '0',
   'and every one resolves');
# reporting was granted SELECT on convctx.turn by the DBA, and is bound to
# nothing: with convctx_app it passes the privilege checks, and row-level
# security refuses it every row
$node->safe_psql('postgres', 'GRANT convctx_app TO reporting');
my ($rc0, $out0, $err0) = $node->psql('src', q{SET ROLE reporting; SET convctx.tenant = 'acme';
    SELECT count(*) FROM convctx.turn});
like($err0, qr/role "reporting" is not bound to a tenant/, 'an unbound role reads no tenant on the restored copy');
$node->safe_psql('postgres', 'REVOKE convctx_app FROM reporting');
is($node->safe_psql('src', q{
    SET convctx.tenant = 'globex';
    SELECT string_agg(question_neutral, ',') FROM convctx.recent_turns('s1')}),
   'globex Q1', 'the other tenant is intact');
my ($rc, $out, $err) = $node->psql('src', q{
    SET convctx.tenant = 'globex';
    SELECT convctx.link_session('user-8', 's1')});
like($err, qr/CV001|already linked/, 'the link rule holds on the restored copy');
is($node->safe_psql('src', q{SHOW convctx.max_session_turns}), '50', 'database setting restored');
my $audit_rows = $node->safe_psql('src', q{SELECT count(*) FROM convctx.audit_log});
$node->safe_psql('src', q{SET convctx.tenant = 'acme'; SELECT convctx.redact_session('s1')});
is($node->safe_psql('src', q{SELECT count(DISTINCT (tenant_id, audit_id)) FROM convctx.audit_log}),
   $audit_rows + 1, 'a new audit row is written on the restored copy, under a key of its own');

$node->stop;
done_testing();
