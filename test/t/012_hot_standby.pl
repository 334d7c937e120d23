# Hot standby (issue 15, section 3). A streaming replica made with
# pg_basebackup -R serves every read function and view of convctx with the
# primary's data, to the app role and the administrator role of each
# tenant, and every function that writes refuses there with 25006 naming
# itself ("cannot execute convctx.start_turn() during recovery"), never
# quoting the SQL convctx runs inside. On the primary, in a read-only
# transaction, the same writers refuse with "cannot execute
# convctx.start_turn() in a read-only transaction" and nothing is written,
# while the readers work.
#
# Every routine of schema convctx must be listed below as a reader or a
# writer (by volatility), so a new function fails this test until it is.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->start;
my $superuser = $primary->safe_psql('postgres', 'SELECT current_user');

$primary->safe_psql('postgres', 'CREATE DATABASE app');
$primary->safe_psql('app', q{
    CREATE EXTENSION convctx;
    CREATE ROLE app_a LOGIN IN ROLE convctx_app;
    CREATE ROLE admin_a LOGIN IN ROLE convctx_admin;
    CREATE ROLE app_b LOGIN IN ROLE convctx_app;
    CREATE ROLE admin_b LOGIN IN ROLE convctx_admin;
    SELECT convctx.bind_role_tenant('app_a', 'A'), convctx.bind_role_tenant('admin_a', 'A'),
           convctx.bind_role_tenant('app_b', 'B'), convctx.bind_role_tenant('admin_b', 'B');
});

# Two tenants with the same session ids and every kind of row.
for my $t ('A', 'B')
{
    $primary->safe_psql('app', qq{
        SET convctx.tenant = '$t';
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', '$t question about VAT rates', 'user-$t',
                                     meta => '{"channel": "web"}'), '$t answer one');
        SELECT convctx.record_retrieval('s1', turn_id, '[{"id": "c1", "text": "$t chunk text", "title": "$t title"}]',
                                        '[{"id": "c1"}]')
          FROM convctx.recent_turns('s1');
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', '$t second question'), '$t answer two');
        SELECT convctx.record_clarification('s1', turn_id, '[{"id": "year", "question": "$t which year?"}]',
                                            '{"scope": "$t scope"}')
          FROM convctx.recent_turns('s1') WHERE request_id = 'r2';
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r3', '$t third question'), '$t answer three');
        SELECT convctx.set_summary('s1', '$t summary', turn_id, redactions)
          FROM convctx.turns_to_summarize('s1', 2) ORDER BY created_at LIMIT 1;
        SELECT convctx.context_add('s1', ARRAY['$t:n1', '$t:n2'], 'user-$t');
        SELECT convctx.start_turn('s2', 'r1', '$t to be redacted');
        SELECT convctx.redact_session('s2');
        INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('$t', 'clarification', 'dime más');
    });
}
my $turn_a = $primary->safe_psql('app',
    q{SET convctx.tenant = 'A'; SELECT turn_id FROM convctx.recent_turns('s1') WHERE request_id = 'r2'});
my $turn_b = $primary->safe_psql('app',
    q{SET convctx.tenant = 'B'; SELECT turn_id FROM convctx.recent_turns('s1') WHERE request_id = 'r2'});

# The streaming replica: pg_basebackup -R (init_from_backup with has_streaming).
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby, 'replay');
is($standby->safe_psql('app', 'SELECT pg_is_in_recovery()'), 't', 'the replica is in recovery');

sub as_role
{
    my ($node, $role, $sql) = @_;
    my ($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $role ]);
    return ($rc, $out, $err);
}

# ---------------------------------------------------------------------------
# Readers: name => [who may call it, SQL]. T is replaced by the caller's
# tenant, TURN by the id of its turn r2. "app" readers are called by the app
# role and the admin role of each tenant, "admin" readers by the admin role.
# ---------------------------------------------------------------------------
my %readers = (
    current_tenant => [ 'app', q{SELECT convctx.current_tenant()} ],
    # volatile, but it only sets convctx.tenant for the transaction
    use_tenant => [ 'app', q{BEGIN; SELECT convctx.use_tenant(convctx.current_tenant()); SELECT convctx.current_tenant(); COMMIT;} ],
    context_merge => [ 'app', q{SELECT convctx.context_merge('{"activeNodeIds": ["x"]}', ARRAY['y'])} ],
    context_aspect => [ 'app', q{SELECT convctx.context_aspect(convctx.context_load('s1'))} ],
    context_load => [ 'app', q{SELECT convctx.context_load('s1')} ],
    recent_turns => [ 'app', q{SELECT turn_id, request_id, question_neutral, answer_neutral, metadata FROM convctx.recent_turns('s1')} ],
    recent_turns_json => [ 'app', q{SELECT convctx.recent_turns_json('s1')} ],
    conversation_state => [ 'app', q{SELECT convctx.conversation_state('s1', 2)} ],
    render_conversation_state => [ 'app', q{SELECT convctx.render_conversation_state(convctx.conversation_state('s1', 2))} ],
    turns_to_summarize => [ 'app', q{SELECT turn_id, question_neutral, redactions, previous_summary FROM convctx.turns_to_summarize('s1', 1)} ],
    context_history => [ 'app', q{SELECT convctx.context_history('s1')} ],
    render_context_history => [ 'app', q{SELECT convctx.render_context_history(convctx.context_history('s1'))} ],
    is_followup => [ 'app', q{SELECT convctx.is_followup('pues dime más sobre el tipo reducido que aplica hoy', 's1')} ],
    clarification_context => [ 'app', q{SELECT convctx.clarification_context('s1', 'TURN', '{"year": "2024"}')} ],
    render_clarification => [ 'app', q{SELECT convctx.render_clarification(convctx.clarification_context('s1', 'TURN'))} ],
    retention_settings => [ 'admin', q{SELECT * FROM convctx.retention_settings()} ],
    admin_sessions => [ 'admin', q{SELECT * FROM convctx.admin_sessions() ORDER BY session_id} ],
    admin_stats => [ 'admin', q{SELECT * FROM convctx.admin_stats()} ],
    admin_audit => [ 'admin', q{SELECT tenant_id, logged_at, role_name, action, session_id, details FROM convctx.admin_audit()} ],
    admin_session_turns => [ 'admin', q{SELECT turn_no, turn_id, question_neutral, deleted_at FROM convctx.admin_session_turns('s2')} ],
    list_conversations => [ 'app', q{SELECT session_id, title, live_turns FROM convctx.list_conversations('user-T')} ],
    conversation_turns => [ 'app', q{SELECT turn_no, question, answer FROM convctx.conversation_turns('s1')} ],
    replay_conversation => [ 'app', q{SELECT convctx.replay_conversation('s1') - 'created_at' - 'last_activity_at' - 'turns'} ],
    export_records => [ 'admin', q{SELECT record_type, line FROM convctx.export_records()} ],
    export_messages => [ 'admin', q{SELECT record_type, line FROM convctx.export_messages()} ],
    bindings => [ 'admin', q{SELECT role_name, tenant_id, role_exists FROM convctx.bindings() ORDER BY 1} ],
    unresolved_bindings => [ 'admin', q{SELECT * FROM convctx.unresolved_bindings()} ],
    'view sessions' => [ 'admin', q{SELECT * FROM convctx.sessions ORDER BY session_id} ],
    'view stats' => [ 'admin', q{SELECT * FROM convctx.stats} ],
    'view audit' => [ 'admin', q{SELECT * FROM convctx.audit} ],
);

# Writers: name => [who may call it, SQL].
my %writers = (
    context_save => [ 'app', q{SELECT convctx.context_save('s1', '{"activeNodeIds": ["z"]}')} ],
    context_add => [ 'app', q{SELECT convctx.context_add('s1', ARRAY['z'])} ],
    start_turn => [ 'app', q{SELECT convctx.start_turn('s1', 'r9', 'a new question')} ],
    begin_turn => [ 'app', q{SELECT turn_id FROM convctx.begin_turn('s1', 'r10', 'a new question')} ],
    finalize_turn => [ 'app', q{SELECT convctx.finalize_turn('s1', 'TURN', 'another answer')} ],
    replace_turn => [ 'app', q{SELECT convctx.replace_turn('s1', 'TURN', 'a corrected answer')} ],
    link_session => [ 'app', q{SELECT convctx.link_session('user-9', 's3')} ],
    set_summary => [ 'app', q{SELECT convctx.set_summary('s1', 'new summary', 'TURN', 0)} ],
    record_retrieval => [ 'app', q{SELECT convctx.record_retrieval('s1', 'TURN', '[{"id": "c9", "text": "x"}]')} ],
    record_clarification => [ 'app', q{SELECT convctx.record_clarification('s1', 'TURN', '[{"question": "q?"}]', '{}')} ],
    redact_turn => [ 'admin', q{SELECT convctx.redact_turn('s1', 'TURN')} ],
    redact_session => [ 'admin', q{SELECT convctx.redact_session('s1')} ],
    erase_identity => [ 'admin', q{SELECT convctx.erase_identity('user-T')} ],
    purge => [ 'admin', q{SELECT convctx.purge()} ],
    purge_all => [ 'admin', q{CALL convctx.purge_all()} ],
    schedule_retention => [ 'admin', q{SELECT convctx.schedule_retention()} ],
    unschedule_retention => [ 'admin', q{SELECT convctx.unschedule_retention()} ],
    bind_role_tenant => [ 'admin', q{SELECT convctx.bind_role_tenant('app_b', 'A')} ],
    bind_role_all_tenants => [ 'admin', q{SELECT convctx.bind_role_all_tenants('app_b')} ],
    unbind_role_tenant => [ 'admin', q{SELECT convctx.unbind_role_tenant('app_b')} ],
    set_session_title => [ 'app', q{SELECT convctx.set_session_title('s1', 'a title')} ],
    import_records => [ 'admin', q{SELECT * FROM convctx.import_records(ARRAY['{"type": "session", "session_id": "s9", "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z"}'], allow_anonymous => true)} ],
    # superusers only (and without Citus 55000 on the primary: the refusal comes first)
    distribute => [ 'superuser', q{SELECT convctx.distribute()} ],
);

# Every routine of the schema is listed: volatile ones as writers, the
# others and use_tenant (which writes nothing) as readers (the trigger
# function is called by no one).
my @routines = split /\n/, $primary->safe_psql('app', q{
    SELECT p.proname || ' ' || p.provolatile::text FROM pg_proc p
     WHERE p.pronamespace = 'convctx'::regnamespace AND p.prorettype <> 'trigger'::regtype
     ORDER BY 1});
for my $r (@routines)
{
    my ($name, $vol) = split / /, $r;
    if ($vol eq 'v' && $name ne 'use_tenant')
    {
        ok(exists $writers{$name}, "writer $name is tested");
    }
    else
    {
        ok(exists $readers{$name}, "reader $name is tested");
    }
}
my @views = split /\n/, $primary->safe_psql('app', q{
    SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'v'
       AND c.relname <> 'builtin_followup_phrase' ORDER BY 1});
ok(exists $readers{"view $_"}, "view $_ is tested") for @views;

sub fill
{
    my ($sql, $tenant, $turn) = @_;
    $sql =~ s/'TURN'/'$turn'/g;
    $sql =~ s/user-T/user-$tenant/g;
    return $sql;
}

# ---------------------------------------------------------------------------
# Every reader returns on the standby what it returns on the primary
# ---------------------------------------------------------------------------
my %tenant_turn = (A => $turn_a, B => $turn_b);
for my $name (sort keys %readers)
{
    my ($who, $sql) = @{ $readers{$name} };
    for my $t ('A', 'B')
    {
        my @roles = $who eq 'app' ? ("app_\L$t", "admin_\L$t") : ("admin_\L$t");
        for my $role (@roles)
        {
            my $q = fill($sql, $t, $tenant_turn{$t});
            my ($rc_p, $out_p, $err_p) = as_role($primary, $role, $q);
            my ($rc_s, $out_s, $err_s) = as_role($standby, $role, $q);
            is($rc_p, 0, "primary: $name as $role succeeds") or diag($err_p);
            is($rc_s, 0, "standby: $name as $role succeeds") or diag($err_s);
            is($out_s, $out_p, "standby: $name as $role returns the primary's rows");
        }
    }
}

# the rows are the tenant's own, and there
my ($rc, $out, $err) = as_role($standby, 'app_a', q{SELECT string_agg(question_neutral, '|') FROM convctx.recent_turns('s1')});
is($out, 'A question about VAT rates|A second question|A third question', 'standby: app_a reads tenant A\'s turns');
($rc, $out, $err) = as_role($standby, 'app_b', q{SELECT string_agg(question_neutral, '|') FROM convctx.recent_turns('s1')});
is($out, 'B question about VAT rates|B second question|B third question', 'standby: app_b reads tenant B\'s turns');
($rc, $out, $err) = as_role($standby, 'app_a', q{SELECT convctx.context_load('s1')->>'activeNodeIds'});
is($out, '["A:n1", "A:n2"]', 'standby: app_a reads tenant A\'s context');
($rc, $out, $err) = as_role($standby, 'app_a', q{SELECT convctx.is_followup('pues dime más sobre el tipo reducido que aplica hoy', 's1'),
                                                        convctx.is_followup('what does the law say about this rate today', 's1')});
is($out, 't|f', 'standby: is_followup reads the tenant\'s phrase and the built-in ones');
($rc, $out, $err) = as_role($standby, 'admin_a', q{SELECT string_agg(action, ',' ORDER BY logged_at) FROM convctx.audit});
is($out, 'bind_role_tenant,bind_role_tenant,redact_session', 'standby: admin_a reads tenant A\'s audit rows (bindings, redaction)');
($rc, $out, $err) = as_role($standby, 'admin_b', q{SELECT string_agg(session_id || ':' || turns, ',' ORDER BY session_id) FROM convctx.sessions});
is($out, 's1:3,s2:1', 'standby: admin_b reads tenant B\'s sessions');
($rc, $out, $err) = as_role($standby, 'admin_a', q{SELECT string_agg(role_name || '=' || tenant_id, ',' ORDER BY role_name) FROM convctx.bindings()});
is($out, 'admin_a=A,app_a=A', 'standby: admin_a reads the bindings of tenant A');

# ---------------------------------------------------------------------------
# Every writer refuses on the standby, naming itself, before anything else
# ---------------------------------------------------------------------------
sub refused
{
    my ($node, $where, $name, $role, $sql, $message) = @_;
    my ($rc, $out, $err) = as_role($node, $role, $sql);
    isnt($rc, 0, "$where: $name as $role fails");
    like($err, qr/ERROR:  25006: \Q$message\E\n/, "$where: $name as $role: 25006 \"$message\"");
    unlike($err, qr/INSERT INTO|UPDATE convctx|DELETE FROM|SELECT |convctx\.(turn|session|audit_log)\b/,
        "$where: $name as $role: the message quotes no SQL of convctx");
    return $err;
}

for my $name (sort keys %writers)
{
    my ($who, $sql) = @{ $writers{$name} };
    my $role = $who eq 'app' ? 'app_a' : $who eq 'superuser' ? $superuser : 'admin_a';
    my $err = refused($standby, 'standby', $name, $role, fill($sql, 'A', $turn_a),
        "cannot execute convctx.$name() during recovery");
    like($err, qr/DETAIL:  This server is a standby/, "standby: $name says why") if $name eq 'start_turn';
}
# a superuser, an unbound role and bad arguments are refused the same way:
# the check comes first
refused($standby, 'standby', 'start_turn', 'postgres', q{SELECT convctx.start_turn(NULL, NULL, NULL)},
    'cannot execute convctx.start_turn() during recovery');
$standby->safe_psql('postgres', 'SELECT 1');    # the standby is still up
($rc, $out, $err) = as_role($standby, 'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'convctx worker'});
is($out, '0', 'standby: no worker was started by the refused scheduling calls');

# ---------------------------------------------------------------------------
# On the primary, in a read-only transaction: the same refusal, nothing written
# ---------------------------------------------------------------------------
# every row of every table of convctx
sub fingerprint
{
    my ($node) = @_;
    my @tables = split /\n/, $node->safe_psql('app', q{
        SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r' ORDER BY 1});
    return join ',', map {
        "$_:" . $node->safe_psql('app', "SELECT count(*) || '/' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM convctx.$_ x")
    } @tables;
}
my $before = fingerprint($primary);
for my $name (sort keys %writers)
{
    my ($who, $sql) = @{ $writers{$name} };
    my $role = $who eq 'app' ? 'app_a' : $who eq 'superuser' ? $superuser : 'admin_a';
    refused($primary, 'read-only transaction', $name, $role,
        "BEGIN READ ONLY;\n" . fill($sql, 'A', $turn_a) . ";\nROLLBACK;",
        "cannot execute convctx.$name() in a read-only transaction");
}
# default_transaction_read_only, as a role or database may set it
refused($primary, 'default_transaction_read_only', 'purge_all', 'admin_a',
    "SET default_transaction_read_only = on;\nCALL convctx.purge_all();",
    'cannot execute convctx.purge_all() in a read-only transaction');
is(fingerprint($primary), $before, 'read-only transactions wrote nothing');
for my $name (sort keys %readers)
{
    my ($who, $sql) = @{ $readers{$name} };
    my $role = $who eq 'app' ? 'app_a' : $who eq 'superuser' ? $superuser : 'admin_a';
    my ($rc_r, $out_r, $err_r) = as_role($primary, $role, "BEGIN READ ONLY;\n" . fill($sql, 'A', $turn_a) . ";\nCOMMIT;");
    is($rc_r, 0, "read-only transaction: $name as $role succeeds") or diag($err_r);
}
# and the writers still work outside one
($rc, $out, $err) = as_role($primary, 'app_a', q{SELECT convctx.start_turn('s1', 'r9', 'a new question') IS NOT NULL});
is($out, 't', 'primary: start_turn works in a read-write transaction');

$standby->stop;
$primary->stop;
done_testing();
