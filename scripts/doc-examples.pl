#!/usr/bin/perl
# Extracts the SQL examples of a Markdown file and checks what psql printed
# for them; scripts/doc-examples.sh drives it, CONTRIBUTING.md ("Examples in
# the documentation") describes the conventions. Only core Perl: perl-base.
#
#   doc-examples.pl script FILE   print the psql script of FILE's examples
#   doc-examples.pl check FILE OUT compare psql's output OUT with FILE's
#                                  ```text blocks; exit 1 on a difference
#
# An example is a fenced ```sql block (the fence may be indented, as in a
# list item; the indent is removed). Every block starts as the superuser
# running the file, unless its first line is "-- as ROLE": then it runs under
# SET SESSION AUTHORIZATION ROLE, as if ROLE had logged in. psql variables
# (\gset) and settings carry over from block to block. A ```text block
# that follows it, with nothing but blank lines between, is the exact output
# of the example. Any other fence language is never run. A block whose
# first line is "-- needs pgvector" (before any "-- as ROLE") is left out,
# output and all, when CONVCTX_DOCS_NO_PGVECTOR is set (scripts/doc-examples.sh
# sets it where pgvector is not installed).
use strict;
use warnings;

my ($mode, $file, $out) = @ARGV;
die "usage: $0 script FILE | check FILE OUTPUT\n"
    unless defined $file && ($mode eq 'script' || ($mode eq 'check' && defined $out));

# The examples of FILE: [{line, role, sql, expected (undef: not shown)}].
sub examples {
    my ($path) = @_;
    open(my $fh, '<', $path) or die "$path: $!\n";
    my @lines = <$fh>;
    close($fh);
    my (@found, $lang, $indent, $start, @body);
    my $last_sql_end;           # index of the line closing the last sql block
    for (my $i = 0; $i < @lines; $i++) {
        my $l = $lines[$i];
        if (!defined $lang) {
            if ($l =~ /^(\s*)```(\S*)\s*$/) {
                ($indent, $lang, $start, @body) = ($1, $2, $i + 1);
            }
            next;
        }
        if ($l =~ /^\s*```\s*$/) {
            my $text = join('', @body);
            if ($lang eq 'sql') {
                my $vector = $text =~ s/\A--\s*needs pgvector\s*\n//;
                my $role = $text =~ /\A--\s*as\s+(\S+)\s*\n/ ? $1 : undef;
                push @found, {line => $start, role => $role, sql => $text,
                              skip => $vector && $ENV{CONVCTX_DOCS_NO_PGVECTOR}};
                $last_sql_end = $i;
            } elsif ($lang eq 'text' && defined $last_sql_end
                     && !grep { /\S/ } @lines[$last_sql_end + 1 .. $start - 2]) {
                $found[-1]{expected} = $text;
            }
            undef $lang;
            next;
        }
        (my $b = $l) =~ s/^\Q$indent\E//;
        push @body, $b;
    }
    die "$path: the fence opened at line $start is not closed\n" if defined $lang;
    return @found;
}

# Lines as compared: no "psql:FILE:LINE: " prefix (interactive psql prints
# none), no trailing blanks, no blank lines at either end.
sub normal {
    my ($text) = @_;
    my @l = map { s/^psql:[^:]*:\d+: //; s/\s+$//; $_ } split /\n/, $text, -1;
    shift @l while @l && $l[0] eq '';
    pop @l while @l && $l[-1] eq '';
    return join("\n", @l);
}

my @ex = examples($file);
if ($mode eq 'script') {
    for my $n (0 .. $#ex) {
        my $e = $ex[$n];
        next if $e->{skip};
        print "RESET SESSION AUTHORIZATION;\nRESET ROLE;\n";
        print "SET SESSION AUTHORIZATION \"$e->{role}\";\n" if defined $e->{role};
        print "\\echo '<<<example $n>>>'\n";
        print $e->{sql};
    }
    print "\\echo '<<<example end>>>'\n";
    exit 0;
}

open(my $fh, '<', $out) or die "$out: $!\n";
my $got = do { local $/; <$fh> };
close($fh);
my %part;
my @pieces = split /^<<<example (\d+|end)>>>\n/m, $got;
shift @pieces;                  # anything before the first example
while (my ($k, $v) = splice(@pieces, 0, 2)) { $part{$k} = $v }
my $bad = 0;
for my $n (0 .. $#ex) {
    my $e = $ex[$n];
    next unless defined $e->{expected} && !$e->{skip};
    my $want = normal($e->{expected});
    my $have = normal($part{$n} // '(not run)');
    next if $want eq $have;
    $bad = 1;
    print "$file:$e->{line}: the example's output differs\n--- shown\n$want\n--- psql printed\n$have\n---\n";
}
exit $bad;
