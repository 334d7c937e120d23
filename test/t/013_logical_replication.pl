# Logical replication and failover (issue 15, section 4), following the
# recipe of docs/replication.md:
#  - publisher and subscriber each run CREATE EXTENSION convctx; the
#    publication covers every table of schema convctx (FOR TABLES IN SCHEMA),
#    each with its primary key as replica identity; the subscription copies
#    the existing rows first (copy_data), the built-in follow-up phrases
#    included in no table, so the initial copy cannot meet a duplicate;
#  - rows written through the API before and after subscribing (turns,
#    answers, corrections, links and a refused link, contexts, summaries,
#    retrievals, clarifications, tenant phrases, redactions, an erasure, a
#    purge, bindings) arrive: every row of every table is equal on both;
#  - the subscription is disabled, as at a failover, and the subscriber
#    takes writes: every audited function (redaction, erasure, purge,
#    purge_all, bindings, a refused link) and new turns succeed, with no
#    setval or other step by hand: audit keys are random UUIDs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->start;

# Roles belong to the cluster and are not replicated: both clusters get them.
for my $node ($pub, $sub)
{
    $node->safe_psql('postgres', q{
        CREATE DATABASE app;
        CREATE ROLE app_a LOGIN; CREATE ROLE admin_a LOGIN; CREATE ROLE admin_b LOGIN;
        CREATE ROLE platform LOGIN;
    });
    $node->safe_psql('app', q{
        CREATE EXTENSION convctx;
        GRANT convctx_app TO app_a;
        GRANT convctx_admin TO admin_a, admin_b, platform;
    });
}

sub as_role
{
    my ($node, $role, $sql) = @_;
    my ($rc, $out, $err) = $node->psql('app', "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $role ]);
    return ($rc, $out, $err);
}

# ---------------------------------------------------------------------------
# Rows before the subscription exists: the initial copy carries them
# ---------------------------------------------------------------------------
$pub->safe_psql('app', q{
    SELECT convctx.bind_role_tenant('app_a', 'A'), convctx.bind_role_tenant('admin_a', 'A'),
           convctx.bind_role_tenant('admin_b', 'B'), convctx.bind_role_all_tenants('platform');
    INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase)
    VALUES ('', 'clarification', 'say again'), ('A', 'fresh_keyword', 'reglamento');
});
for my $t ('A', 'B')
{
    $pub->safe_psql('app', qq{
        SET convctx.tenant = '$t';
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r1', '$t first question', 'user-$t'), '$t first answer');
        SELECT convctx.record_retrieval('s1', turn_id, '[{"id": "c1", "text": "$t chunk"}]', '[{"id": "c1"}]')
          FROM convctx.recent_turns('s1');
        SELECT convctx.context_save('s1', '{"activeNodeIds": ["$t:n1"], "flags": {"x": 1}}', 'user-$t');
        SELECT convctx.start_turn('old', 'r1', '$t anonymous and idle');
        SELECT convctx.finalize_turn('gone', convctx.start_turn('gone', 'r1', '$t of the erased user', 'erased-$t'), 'bye');
    });
}

# The recipe: every table of the schema, replica identity = primary key.
is($pub->safe_psql('app', q{
    SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_class c
     WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r'
       AND NOT (c.relreplident = 'd' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))}),
   '', 'every convctx table has a primary key as its replica identity');
is($pub->safe_psql('app', q{
    SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'S'}),
   '0', 'convctx has no sequence (logical replication would not carry it)');
$pub->safe_psql('app', q{CREATE PUBLICATION convctx FOR TABLES IN SCHEMA convctx});
my $pub_conn = $pub->connstr . ' dbname=app';
$sub->safe_psql('app', qq{CREATE SUBSCRIPTION convctx CONNECTION '$pub_conn' PUBLICATION convctx});
$sub->wait_for_subscription_sync($pub, 'convctx', 'app');
# wait_for_subscription_sync also accepts tables still in state "s"
# (synchronized, about to become ready): wait for "r" on each
ok($sub->poll_query_until('app', q{
    SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate <> 'r'}),
   'the initial copy of every table is done');
is($sub->safe_psql('app', q{SELECT string_agg(tenant_id || ':' || phrase, ',' ORDER BY phrase) FROM convctx.followup_phrase}),
   'A:reglamento,:say again', 'the tenants\' phrases were copied, nothing else was in the table');

# ---------------------------------------------------------------------------
# Rows written afterwards, through the API, stream over
# ---------------------------------------------------------------------------
for my $t ('A', 'B')
{
    $pub->safe_psql('app', qq{
        SET convctx.tenant = '$t';
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r2', '$t second question'), '$t second answer');
        SELECT convctx.replace_turn('s1', turn_id, '$t second answer, corrected')
          FROM convctx.recent_turns('s1') WHERE request_id = 'r2';
        SELECT convctx.record_clarification('s1', turn_id, '[{"id": "year", "question": "$t which year?"}]', '{"scope": "$t"}')
          FROM convctx.recent_turns('s1') WHERE request_id = 'r2';
        SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r3', '$t third question'), '$t third answer');
        SELECT convctx.set_summary('s1', '$t summary', turn_id, redactions)
          FROM convctx.turns_to_summarize('s1', 2) ORDER BY created_at LIMIT 1;
        SELECT convctx.context_add('s2', ARRAY['$t:n2', '$t:n3'], 'user-$t');
        SELECT convctx.link_session('user-$t', 's2');
        SELECT convctx.finalize_turn('s3', convctx.start_turn('s3', 'r1', '$t to redact'), 'x');
        SELECT convctx.finalize_turn('s3', convctx.start_turn('s3', 'r2', '$t to redact too'), 'y');
        SELECT convctx.redact_turn('s3', turn_id) FROM convctx.recent_turns('s3') WHERE request_id = 'r1';
        SELECT convctx.redact_session('s3');
        SELECT convctx.erase_identity('erased-$t');
        INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('$t', 'clarification', '$t otra vez');
    });
    # a refused link: CV001, audited by a worker in its own transaction
    my ($rc, $out, $err) = $pub->psql('app', qq{SET convctx.tenant = '$t'; SELECT convctx.link_session('intruder', 's1')});
    like($err, qr/already linked/, "publisher: tenant ${t}'s refused link is refused");
}
# sessions idle for 3 days: the purge on the publisher deletes A's, the
# subscriber will purge B's after the failover
$pub->safe_psql('app', q{
    UPDATE convctx.session SET last_activity_at = now() - interval '3 days' WHERE session_id = 'old';
    SET convctx.tenant = 'A';
});
my ($rc, $out, $err) = as_role($pub, 'admin_a', q{SELECT convctx.purge()->>'anonymous_sessions'});
is($out, '1', 'publisher: admin_a purges tenant A\'s idle session');
$pub->safe_psql('app', q{
    SELECT convctx.unbind_role_tenant('platform');
    SELECT convctx.bind_role_all_tenants('platform');
});
$pub->wait_for_catchup('convctx');

# every row of every table, compared
sub fingerprint
{
    my ($node) = @_;
    my @tables = split /\n/, $node->safe_psql('app', q{
        SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'convctx'::regnamespace AND c.relkind = 'r' ORDER BY 1});
    my %f;
    for my $t (@tables)
    {
        $f{$t} = $node->safe_psql('app',
            "SELECT count(*) || ' rows ' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM convctx.$t x");
    }
    return \%f;
}
my $fp_pub = fingerprint($pub);
my $fp_sub = fingerprint($sub);
is(scalar(keys %$fp_pub), 10, 'ten tables compared');
for my $t (sort keys %$fp_pub)
{
    unlike($fp_pub->{$t}, qr/^0 rows/, "publisher: table $t holds rows");
    is($fp_sub->{$t}, $fp_pub->{$t}, "subscriber: every row of table $t equals the publisher's");
}
is($sub->safe_psql('app', q{SELECT string_agg(role_name || '=' || coalesce(tenant_id, '*'), ',' ORDER BY role_name) FROM convctx.bindings()}),
   'admin_a=A,admin_b=B,app_a=A,platform=*', 'the bindings arrived');

# ---------------------------------------------------------------------------
# Failover: the subscriber stops following and takes writes
# ---------------------------------------------------------------------------
$sub->safe_psql('app', q{ALTER SUBSCRIPTION convctx DISABLE});
my $audit_before = $sub->safe_psql('app', q{SELECT count(*) FROM convctx.audit_log});
my $since = $sub->safe_psql('app', q{SELECT clock_timestamp()});

# new turns, in sessions the publisher started and in new ones
($rc, $out, $err) = as_role($sub, 'app_a', q{
    SELECT convctx.finalize_turn('s1', convctx.start_turn('s1', 'r4', 'A fourth question, after the failover'), 'A fourth answer');
    SELECT convctx.record_retrieval('s1', turn_id, '[{"id": "c4", "text": "A chunk four"}]') FROM convctx.recent_turns('s1') WHERE request_id = 'r4';
    SELECT convctx.context_add('s1', ARRAY['A:n4']);
    SELECT convctx.finalize_turn('new', convctx.start_turn('new', 'r1', 'A new session'), 'A new answer');
    SELECT string_agg(request_id, ',') FROM convctx.recent_turns('s1');});
is($rc, 0, 'subscriber: app_a writes new turns') or diag($err);
like($out, qr/r1,r2,r3,r4$/, 'subscriber: the new turn follows the replicated ones');
is($sub->safe_psql('app', q{SELECT string_agg(turn_no::text, ',' ORDER BY turn_no) FROM convctx.turn
                             WHERE tenant_id = 'A' AND session_id = 's1' AND replaced_by_turn_id IS NULL}),
   '1,2,3,4', 'subscriber: turn numbers go on from the replicated session row');

# every audited function; A's session s3 has been idle for 3 days meanwhile,
# for purge_all (B's session old is idle since before the failover)
$sub->safe_psql('app', q{
    UPDATE convctx.session SET last_activity_at = now() - interval '3 days'
     WHERE tenant_id = 'A' AND session_id = 's3'});
my @audited = (
    [ 'admin_a', 'redact_turn', q{SELECT convctx.redact_turn('s1', turn_id) FROM convctx.recent_turns('s1') WHERE request_id = 'r1'} ],
    [ 'admin_a', 'redact_session', q{SELECT convctx.redact_session('s2')} ],
    [ 'admin_a', 'erase_identity', q{SELECT convctx.erase_identity('user-A')} ],
    [ 'admin_b', 'purge', q{SELECT convctx.purge()} ],
    [ 'admin_a', 'purge_all', q{CALL convctx.purge_all()} ],
    [ 'platform', 'bind_role_tenant', q{SELECT convctx.bind_role_tenant('app_a', 'A')} ],
    [ 'platform', 'bind_role_all_tenants', q{SELECT convctx.bind_role_all_tenants('admin_b')} ],
    [ 'platform', 'unbind_role_tenant', q{SELECT convctx.unbind_role_tenant('admin_b')} ],
    [ 'postgres', 'bind_role_tenant', q{SELECT convctx.bind_role_tenant('admin_b', 'B')} ],
);
for my $call (@audited)
{
    my ($role, $action, $sql) = @$call;
    ($rc, $out, $err) = as_role($sub, $role, $sql);
    is($rc, 0, "subscriber: $action as $role succeeds") or diag($err);
    unlike($err, qr/23505|duplicate key/, "subscriber: $action as $role meets no duplicate audit key");
}
($rc, $out, $err) = as_role($sub, 'app_a', q{SELECT convctx.link_session('intruder', 'new'); SELECT convctx.link_session('intruder2', 'new')});
like($err, qr/CV001/, 'subscriber: a refused link is refused');
unlike($err, qr/WARNING/, 'subscriber: and its audit row is written');
is($sub->safe_psql('app', qq{
    SELECT string_agg(DISTINCT action, ',' ORDER BY action) FROM convctx.audit_log WHERE logged_at > '$since'}),
   'bind_role_all_tenants,bind_role_tenant,erase_identity,link_refused,purge,redact_session,redact_turn,unbind_role_tenant',
   'subscriber: every audited function wrote its rows');
is($sub->safe_psql('app', q{SELECT count(*) FROM convctx.session WHERE session_id = 'old' OR (tenant_id = 'A' AND session_id = 's3')}),
   '0', 'subscriber: purge and purge_all deleted the idle sessions');
is($sub->safe_psql('app', q{SELECT count(*) = count(DISTINCT (tenant_id, audit_id)) FROM convctx.audit_log}), 't',
   'subscriber: audit keys are unique');
cmp_ok($sub->safe_psql('app', q{SELECT count(*) FROM convctx.audit_log}), '>', $audit_before,
   'subscriber: the audit log grew');

# ---------------------------------------------------------------------------
# A pair that ran 0.3.0: the copy of followup_phrase was stuck on 23505 and
# audit ids came from a sequence. Updating the publisher, then the
# subscriber, unsticks it and carries the audit rows over, with nothing else
# done by hand.
# ---------------------------------------------------------------------------
sub rows
{
    my ($node, $sql) = @_;
    return $node->safe_psql('old', $sql);
}
for my $node ($pub, $sub)
{
    $node->safe_psql('postgres', 'CREATE DATABASE old');
    $node->safe_psql('old', q{CREATE EXTENSION convctx VERSION '0.3.0'});
}
$pub->safe_psql('old', q{
    INSERT INTO convctx.audit_log (tenant_id, action) VALUES ('A', 'old one'), ('A', 'old two');
    INSERT INTO convctx.followup_phrase (tenant_id, kind, phrase) VALUES ('A', 'clarification', 'otra vez');
    CREATE PUBLICATION convctx_old FOR TABLES IN SCHEMA convctx;
});
my $old_conn = $pub->connstr . ' dbname=old';
$sub->safe_psql('old', qq{CREATE SUBSCRIPTION convctx_old CONNECTION '$old_conn' PUBLICATION convctx_old});
$sub->poll_query_until('old', q{
    SELECT count(*) = 1 FROM pg_subscription_rel WHERE srsubstate <> 'r'
       AND srrelid = 'convctx.followup_phrase'::regclass})
  or die 'the other tables were not copied';
my $log_offset = -s $sub->logfile;
$sub->wait_for_log(qr/duplicate key value violates unique constraint "followup_phrase_pkey"/, $log_offset);
pass('0.3.0: the initial copy of followup_phrase fails with 23505, the other tables are copied');

$pub->safe_psql('old', q{ALTER EXTENSION convctx UPDATE});
$pub->safe_psql('old', q{INSERT INTO convctx.audit_log (tenant_id, action) VALUES ('A', 'new on the publisher')});
$sub->safe_psql('old', q{ALTER EXTENSION convctx UPDATE});
$sub->wait_for_subscription_sync($pub, 'convctx_old', 'old');
ok($sub->poll_query_until('old', q{SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate <> 'r'}),
   'updated on both sides: every table is copied');
is(rows($sub, q{SELECT string_agg(tenant_id || ':' || phrase, ',') FROM convctx.followup_phrase}), 'A:otra vez',
   'updated: followup_phrase holds the tenant\'s phrase');
is(rows($sub, q{SELECT string_agg(action || '=' || (audit_id::text LIKE '00000000-0000-0000-0000-%'), ',' ORDER BY logged_at)
                  FROM convctx.audit_log}),
   'old one=true,old two=true,new on the publisher=false', 'updated: the audit rows, old and new, arrived');
for my $t ('audit_log', 'followup_phrase')
{
    my $q = "SELECT md5(string_agg(x::text, '|' ORDER BY x::text)) FROM convctx.$t x";
    is(rows($sub, $q), rows($pub, $q), "updated: every row of $t equals the publisher's");
}

$sub->stop;
$pub->stop;
done_testing();
