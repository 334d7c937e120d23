# Crash recovery of the turn lifecycle: 8 clients run start_turn ->
# finalize_turn -> recent_turns on their own sessions, the whole server is
# killed with SIGKILL mid-run and restarted. Every turn whose start_turn or
# finalize_turn returned to its client must then be stored intact, and the
# clients' retries of every key they tried must return the acknowledged ids
# and leave exactly one current turn per key.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Cwd qw(realpath);
use Digest::MD5 qw(md5_hex);
use POSIX ();
use Time::HiRes qw(time sleep);

my $clients         = 8;
my $per_session     = 15;     # requests per session; recent_turns(10) sees a window of them
my $min_run_seconds = 2;      # run at least this long before the kill ...
my $min_finalized   = 300;    # ... and until this many finalizes were acknowledged,
my $max_run_seconds = 15;     # but never longer than this
my $limit           = $PostgreSQL::Test::Utils::timeout_default;
my $uuid_re         = qr/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# An acknowledged commit must survive the crash: synchronous_commit = on
# makes the server write the commit's WAL before it answers the client.
# The test configuration's fsync = off does not weaken this here: the
# crash kills processes, not the machine, and the kernel keeps every WAL
# page that was written (it is only never forced to disk).
$node->append_conf('postgresql.conf', qq{
synchronous_commit = on
max_connections = 30
log_statement = none
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION convctx');

my $psql = $node->config_data('--bindir') . '/psql';
my @psql = ($psql, '-X', '-q', '-A', '-t', '-h', $node->host, '-p', $node->port, '-d', 'postgres');

# Deterministic keys and texts: recomputable from the key alone, so the
# stored rows can be checked after the crash. Lengths vary from a few dozen
# bytes to a few kB (compressed / toasted values are recovered too).
sub key_of
{
    my ($c, $n) = @_;
    return ("c$c-s" . (int(($n - 1) / $per_session) + 1), "r$n");
}

sub filler
{
    my ($tag, $n) = @_;
    my $len = 40 + ($n * 7919) % 3000;
    my ($s, $i) = ('', 0);
    $s .= md5_hex($tag . ':' . $i++) . ' ' while length($s) < $len;
    return substr($s, 0, $len);
}

sub question_of
{
    my ($sid, $rid) = @_;
    my ($n) = $rid =~ /(\d+)/;
    return "question $sid/$rid: " . filler("q $sid $rid", $n);
}

sub answer_of
{
    my ($sid, $rid) = @_;
    my ($n) = $rid =~ /(\d+)/;
    return "answer for $sid/$rid (it's exact): " . filler("a $sid $rid", $n);
}

sub lit { my $s = shift; $s =~ s/'/''/g; return "'$s'"; }
# A failure lists at most 20 of the offending keys.
sub few { return @_ <= 20 ? join(', ', @_) : join(', ', @_[ 0 .. 19 ]) . ' ... (' . @_ . ' in all)'; }
sub esc { my $s = shift; $s =~ s/\n/\\n/g; return $s; }

# One client, run in a forked process: one psql connection fed statement by
# statement through a pipe. Each statement is followed by "\echo END <n>",
# so its complete output is what psql printed before that line. The record
# file gets a line before each start ("T", attempted) and, only once psql
# printed the exact expected result, "S <key> <turn_id>" or "F <key>". psql
# prints a row only after the server's CommandComplete, which the server
# sends after the commit, so an acknowledged call is a committed one. A
# statement that errors prints no row; a lost connection makes psql exit
# (non-interactive), which ends the client.
sub client_main
{
    my ($c, $file) = @_;
    $SIG{PIPE} = 'IGNORE';
    open(my $rec, '>', $file) or die "open $file: $!";
    $rec->autoflush(1);
    my ($in, $out, $err) = ('', '', '');
    my $h = IPC::Run::start([ @psql, '-v', 'ON_ERROR_STOP=0' ],
        '<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout($limit));
    my $seq = 0;
    # The output of one statement, or undef once psql is gone.
    my $call = sub {
        my ($sql) = @_;
        my $end = 'END ' . ++$seq;
        $in .= "$sql\n\\echo $end\n";
        while ($out !~ /^\Q$end\E\n/m)
        {
            last unless $h->pumpable;
            $h->pump;
        }
        return undef unless $out =~ s/\A(.*?)^\Q$end\E\n//ms;
        my $o = $1;
        if ($err ne '')
        {
            print $rec 'X stderr: ' . esc($err) . "\n";
            $err = '';
        }
        return $o;
    };

    eval {
        for (my $n = 1;; $n++)
        {
            my ($sid, $rid) = key_of($c, $n);
            print $rec "T $sid $rid\n";
            my $o = $call->(sprintf(q{SELECT 'S %s %s ' || convctx.start_turn(%s, %s, %s);},
                    $sid, $rid, lit($sid), lit($rid), lit(question_of($sid, $rid))));
            last unless defined $o;
            my ($tid) = $o =~ /\AS \Q$sid $rid\E ($uuid_re)\n\z/;
            if (!defined $tid)
            {
                print $rec "X start $sid $rid: " . esc($o) . "\n";
                next;
            }
            print $rec "S $sid $rid $tid\n";

            $o = $call->(sprintf(q{SELECT 'F %s %s' FROM convctx.finalize_turn(%s, %s, %s) f;},
                    $sid, $rid, lit($sid), lit($tid), lit(answer_of($sid, $rid))));
            last unless defined $o;
            if ($o ne "F $sid $rid\n")
            {
                print $rec "X finalize $sid $rid: " . esc($o) . "\n";
                next;
            }
            print $rec "F $sid $rid\n";

            # The session's last (up to) 10 turns, oldest first, with their answers.
            $o = $call->(sprintf(q{SELECT 'R ' || coalesce(string_agg(request_id || ':' || md5(answer_neutral), ',' ORDER BY ordinality), '') FROM convctx.recent_turns(%s, 10) WITH ORDINALITY r;},
                    lit($sid)));
            last unless defined $o;
            my $first = (int(($n - 1) / $per_session)) * $per_session + 1;
            $first = $n - 9 if $n - 9 > $first;
            my $want = 'R ' . join(',',
                map { "r$_:" . md5_hex(answer_of($sid, "r$_")) } $first .. $n) . "\n";
            print $rec "X recent $sid $rid: " . esc($o) . "\n" if $o ne $want;
        }
        1;
    } or print $rec 'X client died: ' . esc($@) . "\n";

    eval { $h->finish; 1 } or print $rec 'X finish: ' . esc($@) . "\n";
    my $code = $h->result(0) // 'none';
    print $rec "Q $code " . esc($err) . "\n";
    close $rec;
}

my $dir = PostgreSQL::Test::Utils::tempdir();
my %client_pid;
for my $c (1 .. $clients)
{
    my $pid = fork() // die "fork: $!";
    if ($pid == 0)
    {
        # Never run the parent's END blocks (they would stop the node).
        eval { client_main($c, "$dir/client$c"); 1 } or POSIX::_exit(1);
        POSIX::_exit(0);
    }
    $client_pid{$pid} = $c;
}

sub count_lines
{
    my ($tag) = @_;
    my $count = 0;
    for my $c (1 .. $clients)
    {
        open(my $fh, '<', "$dir/client$c") or next;
        while (<$fh>) { $count++ if /^\Q$tag\E /; }
    }
    return $count;
}

# Let the clients run, then kill the server mid-run.
my $t0 = time;
while (1)
{
    sleep 0.25;
    my $elapsed = time - $t0;
    last if $elapsed >= $max_run_seconds;
    last if $elapsed >= $min_run_seconds && count_lines('F') >= $min_finalized;
}
my $run_seconds = time - $t0;

# Crash the whole server at once, as a power loss would: freeze the
# postmaster (no new children from here on) and its children with SIGSTOP,
# then SIGKILL the postmaster ($node->kill9) and every child. In-flight
# statements die anywhere, also after their commit record was written but
# before the client got the answer. (Killing only the postmaster would let
# each backend finish its statement and exit cleanly.)
my $pgdata = realpath($node->data_dir);
my ($postmaster) = split /\n/, slurp_file("$pgdata/postmaster.pid");
kill 'STOP', $postmaster or die "SIGSTOP $postmaster: $!";
my @children;
for my $stat (glob '/proc/[0-9]*/stat')
{
    open(my $fh, '<', $stat) or next;
    my $line = <$fh> // next;
    my ($ppid) = $line =~ /.*\) \S+ (\d+) /s;
    push @children, $stat =~ m{/proc/(\d+)/} if defined $ppid && $ppid == $postmaster;
}
kill 'STOP', @children;
$node->kill9;
kill 'KILL', @children;
note sprintf('killed postmaster %d and its %d children after %.1f s', $postmaster,
    scalar @children, $run_seconds);

# The clients end when their connection drops. Before the restart every
# server process must be gone: a surviving child would keep the old shared
# memory attached, and the new postmaster also refuses to start while the
# old postmaster's pid exists, which includes the time until its parent
# (here init) reaps it.
my $deadline = time + $limit;
while (%client_pid && time < $deadline)
{
    my $pid = waitpid(-1, POSIX::WNOHANG());
    if ($pid > 0) { delete $client_pid{$pid}; next; }
    sleep 0.05;
}
is(scalar keys %client_pid, 0, 'every client ended after the kill');
my @left;
do
{
    sleep 0.05 if @left;
    @left = grep { (readlink("/proc/$_/cwd") // '') eq $pgdata }
      map { m{/proc/(\d+)/} } glob '/proc/[0-9]*/cwd';
    push @left, $postmaster if kill 0, $postmaster;
} while (@left && time < $deadline);
is("@left", '', 'no server process is left');

my $log_offset = -s $node->logfile;
$node->start;
like(substr(slurp_file($node->logfile), $log_offset),
    qr/database system was interrupted|not properly shut down; automatic recovery in progress/,
    'the restart ran crash recovery');

# What the clients tried and what they were told.
my (@attempted, %client_of, %acked_start, %acked_finalize, @problems);
my ($clients_cut, $clients_with_turns) = (0, 0);
for my $c (1 .. $clients)
{
    my ($quit, $acked) = (0, 0);
    open(my $fh, '<', "$dir/client$c") or die "open client$c: $!";
    while (my $line = <$fh>)
    {
        chomp $line;
        if ($line =~ /^T (\S+) (\S+)$/)
        {
            push @attempted, "$1 $2";
            $client_of{"$1 $2"} = $c;
        }
        elsif ($line =~ /^S (\S+) (\S+) ($uuid_re)$/) { $acked_start{"$1 $2"} = $3; $acked++; }
        elsif ($line =~ /^F (\S+) (\S+)$/) { $acked_finalize{"$1 $2"} = 1; }
        elsif ($line =~ /^Q (\S+) (.*)$/)
        {
            my ($code, $err) = ($1, $2);
            # psql exits with 2 when the connection is lost; a SIGKILLed
            # backend reads as "server closed the connection unexpectedly".
            if ($code eq '2' && $err =~ /server closed the connection|connection to server was lost|terminating connection/
                && $err !~ /\bERROR:/)
            {
                $quit = 1;
            }
            else
            {
                push @problems, "client $c: psql exit $code: $err";
            }
        }
        else { push @problems, "client $c: $line"; }
    }
    $clients_cut++        if $quit;
    $clients_with_turns++ if $acked;
}
is($clients_cut, $clients, 'every client was still running and lost its connection at the kill');
is($clients_with_turns, $clients, 'every client had acknowledged turns before the kill');
is(join("\n", @problems), '', 'no client saw an error or a wrong result before the kill');
ok(keys %acked_start > 0 && keys %acked_finalize > 0, 'starts and finalizes were acknowledged');

# The stored turns, keyed by "session request", with digests of their texts.
sub stored_turns
{
    my %rows;
    for my $line (split /\n/, $node->safe_psql('postgres', q{
        SELECT session_id, request_id, turn_id, md5(question_neutral),
               coalesce(md5(answer_neutral), '-'), coalesce(finalized_at::text, '-'),
               tenant_id = '' AND replaced_by_turn_id IS NULL AND deleted_at IS NULL
          FROM convctx.turn}))
    {
        my ($sid, $rid, @cols) = split /\|/, $line, -1;
        push @{ $rows{"$sid $rid"} }, \@cols;
    }
    return \%rows;
}

# Nothing acknowledged was lost or changed by the crash.
my $before = stored_turns();
my %attempted = map { $_ => 1 } @attempted;
my (@lost, @extra);
my $in_doubt = 0;
for my $key (@attempted)
{
    my ($sid, $rid) = split / /, $key;
    my $rows = $before->{$key} // [];
    push @extra, "$key has " . scalar(@$rows) . ' rows' if @$rows > 1;
    my ($tid, $q, $a, $fin, $current) = @{ $rows->[0] // [] };
    if (defined $acked_start{$key})
    {
        push @lost, "start $key"
          unless @$rows == 1 && $tid eq $acked_start{$key} && $current eq 't'
          && $q eq md5_hex(question_of($sid, $rid));
    }
    elsif (@$rows)
    {
        $in_doubt++;    # committed, but the client never heard back
    }
    if ($acked_finalize{$key})
    {
        push @lost, "finalize $key"
          unless @$rows == 1 && $fin ne '-' && $a eq md5_hex(answer_of($sid, $rid));
    }
}
push @extra, map { "$_ was never attempted" } grep { !$attempted{$_} } keys %$before;
is(few(@lost), '', 'every acknowledged start and finalize survived the crash intact');
is(few(@extra), '', 'no turn stored twice or for a key nobody tried');

# The indexes that start_turn relies on (the idempotency key, chronology)
# agree with the recovered heap.
$node->safe_psql('postgres', 'CREATE EXTENSION amcheck');
my ($rc, $checked, $stderr) = $node->psql('postgres', q{
    SELECT count(*)
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      JOIN pg_am am ON am.oid = c.relam,
           LATERAL bt_index_check(c.oid, true) AS checked
     WHERE c.relnamespace = 'convctx'::regnamespace AND am.amname = 'btree'});
ok($rc == 0 && $checked > 0 && $stderr eq '', 'amcheck finds every convctx index consistent with its table')
  or diag("rc $rc, $checked indexes checked: $stderr");

# The clients retry, concurrently, every key they tried (acknowledged or
# not): start_turn again, then finalize_turn with the id it returned. Any
# error stops a client's psql with a non-zero exit.
my %retry_script;
for my $key (@attempted)
{
    my ($sid, $rid) = split / /, $key;
    $retry_script{ $client_of{$key} } .= sprintf(
        qq{SELECT convctx.start_turn(%s, %s, %s) AS tid \\gset\n\\echo S %s %s :tid\n}
          . qq{SELECT 'F %s %s' FROM convctx.finalize_turn(%s, :'tid', %s) f;\n},
        lit($sid), lit($rid), lit(question_of($sid, $rid)), $sid, $rid,
        $sid, $rid, lit($sid), lit(answer_of($sid, $rid)));
}
my %retry;
for my $c (1 .. $clients)
{
    my $script = "$dir/retry$c.sql";
    PostgreSQL::Test::Utils::append_to_file($script, $retry_script{$c} // '');
    my $r = $retry{$c} = { out => '', err => '' };
    $r->{h} = IPC::Run::start([ @psql, '-v', 'ON_ERROR_STOP=1', '-f', $script ],
        '<', \undef, '>', \$r->{out}, '2>', \$r->{err}, IPC::Run::timeout($limit));
}
my (%retry_id, %retry_finalized, @retry_problems);
for my $c (1 .. $clients)
{
    my $r = $retry{$c};
    eval { $r->{h}->finish; 1 } or push @retry_problems, "client $c: $@";
    my $code = $r->{h}->result(0) // 'none';
    push @retry_problems, "client $c: psql exit $code: $r->{err}" if $code ne '0' || $r->{err} ne '';
    for my $line (split /\n/, $r->{out})
    {
        if ($line =~ /^S (\S+) (\S+) ($uuid_re)$/ && !exists $retry_id{"$1 $2"}) { $retry_id{"$1 $2"} = $3; }
        elsif ($line =~ /^F (\S+) (\S+)$/ && !$retry_finalized{"$1 $2"}) { $retry_finalized{"$1 $2"} = 1; }
        else { push @retry_problems, "client $c: $line"; }
    }
}
is(join("\n", @retry_problems), '', 'the retries ran without errors');
is(scalar(grep { defined $retry_id{$_} && $retry_finalized{$_} } @attempted), scalar(@attempted),
    'every tried key was started and finalized again');
my @moved = grep {
    my $was = $acked_start{$_} // ($before->{$_} ? $before->{$_}[0][0] : undef);
    defined $was && defined $retry_id{$_} && $retry_id{$_} ne $was
} @attempted;
is(few(@moved), '', 'a retried start returns the turn that was acknowledged or stored before');

# After the retries: exactly one current turn per key, holding its texts,
# and an acknowledged finalize kept its original finalized_at.
my $dups = $node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT FROM convctx.turn WHERE replaced_by_turn_id IS NULL
                           GROUP BY tenant_id, session_id, request_id HAVING count(*) <> 1) d});
is($dups, '0', 'one current turn per (tenant, session, request)');
my $after = stored_turns();
my @wrong;
for my $key (@attempted)
{
    my ($sid, $rid) = split / /, $key;
    my $rows = $after->{$key} // [];
    my ($tid, $q, $a, $fin, $current) = @{ $rows->[0] // [] };
    push @wrong, $key
      unless @$rows == 1 && $tid eq ($retry_id{$key} // '') && $current eq 't'
      && $q eq md5_hex(question_of($sid, $rid)) && $a eq md5_hex(answer_of($sid, $rid))
      && $fin ne '-'
      && (!$acked_finalize{$key} || $fin eq $before->{$key}[0][3]);
}
is(few(@wrong), '', 'every tried key has one finalized turn with its own texts');
my @extra_after = ((grep { @{ $after->{$_} } > 1 } keys %$after),
                   (grep { !$attempted{$_} } keys %$after));
is(few(@extra_after), '', 'no key has a second turn, no turn belongs to a key nobody tried');

# The session rows updated with each turn recovered consistently.
is($node->safe_psql('postgres', q{
    SELECT count(*)
      FROM convctx.session s
      FULL JOIN (SELECT tenant_id, session_id, count(*) AS n, max(turn_no) AS hi,
                        count(DISTINCT turn_no) AS d, min(turn_no) AS lo,
                        count(*) FILTER (WHERE finalized_at IS NOT NULL) AS answers
                   FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
     WHERE s.last_turn_no IS DISTINCT FROM t.hi OR t.lo IS DISTINCT FROM 1
        OR t.n IS DISTINCT FROM t.hi OR t.d IS DISTINCT FROM t.n
        OR s.live_turns IS DISTINCT FROM t.n OR s.live_answers IS DISTINCT FROM t.answers}),
    '0', 'every session numbers its turns 1..last_turn_no and counts them right');

my $lost = @lost;
my $duplicates = $dups + @extra_after;
diag(sprintf('crash: %d clients, %d acknowledged starts, %d acknowledged finalizes, '
          . '%d lost, %d duplicates after retries (%d keys tried, %d committed unacknowledged, '
          . 'killed after %.1f s)',
        $clients, scalar(keys %acked_start), scalar(keys %acked_finalize), $lost, $duplicates,
        scalar(@attempted), $in_doubt, $run_seconds));

$node->stop;
my $log = substr(slurp_file($node->logfile), $log_offset);
unlike($log, qr/PANIC/, 'no PANIC in the server log after the restart');
unlike($log, qr/\bERROR:/, 'no ERROR in the server log after the restart');

done_testing();
