#!/usr/bin/env bash
# The map of the tree in CONTRIBUTING.md ("## Layout", its ```text block)
# must name every file of src/ and client/ and every suite, and nothing that
# does not exist. Fails (exit 1) naming each miss; the last line is
# "layout: ok (...)" or "layout: N missing or stale".
#
# The map: one entry a line, names first, then two or more spaces and the
# description. Names are separated by ", "; a name without a slash is in
# the folder of the name before it ("src/turns/turns.c, turns.h"), a name that
# starts with a dot has the stem of the one before it ("src/core/idmap.c, .h");
# a trailing slash marks a folder.
#
# What must be named, each by its own path:
#	- every file of src/ and client/;
#	- every file of scripts/ (not below it);
#	- every benchmark: test/bench/NAME.sh and its folder test/bench/NAME/
#	  (and any other folder there, such as lib/).
# The suites may instead be named as a group by one glob in the map,
#	sql/*.sql (the regression tests: not the install scripts convctx--*),
#	test/specs/*.spec (isolation), test/t/*.pl (TAP),
# and then each suite of the group is named in its own bullet of
# "## The suites" ("- Regression", "- Isolation", "- TAP"), as `name`.
#
# The files are those on disk that .gitignore does not exclude: listed by
# git in a checkout, else (the build copy scripts/run-suites.sh runs in)
# found and matched against .gitignore here.
set -euo pipefail
cd "$(dirname "$0")/.."

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files --cached --others --exclude-standard | while IFS= read -r f; do
                [ -e "$f" ] && printf '%s\n' "$f"; done)
else
    files=$(find . -path ./.git -prune -o -type f -print | sed 's|^\./||' | sort)
fi

printf '%s\n' "$files" | exec perl -e '
use strict;
use warnings;

my $doc = "CONTRIBUTING.md";
open my $fh, "<", $doc or die "layout: cannot read $doc: $!\n";
my @doc = <$fh>;
close $fh;
chomp @doc;

# The tree: files, less what .gitignore excludes (only matters without git).
my @ignore;
if (open my $gi, "<", ".gitignore")
{
	while (<$gi>)
	{
		chomp;
		next if /^\s*(#|$)/;
		my $dir = s{/$}{};
		my $anchored = s{^/}{};
		(my $re = quotemeta) =~ s/\\\*/[^\/]*/g;
		$re =~ s/\\\?/[^\/]/g;
		$re = ($anchored ? "^" : "(?:^|/)") . $re . ($dir ? "/" : "(?:/|\$)");
		push @ignore, qr/$re/;
	}
}
my @files = grep { my $f = $_; $f ne "" && !grep { $f =~ $_ } @ignore } map { chomp; $_ } <STDIN>;
my %file = map { $_ => 1 } @files;
my %dir;
for my $f (@files)
{
	my $d = $f;
	$dir{$d} = 1 while $d =~ s{/[^/]*$}{};
}

# The map.
my ($in_layout, $in_block, @map);
for my $line (@doc)
{
	if ($line =~ /^## /) { $in_layout = $line eq "## Layout"; next; }
	next unless $in_layout;
	if ($line =~ /^```/) { last if $in_block; $in_block = 1; next; }
	next unless $in_block && $line =~ /\S/;
	my ($names) = split /\s{2,}/, $line, 2;
	my $prev;
	for my $name (split /,\s*/, $names)
	{
		$name =~ s{/$}{};
		my $path = $name;
		if (defined $prev && $name =~ /^\./) { ($path = $prev) =~ s/\.[^.\/]*$//; $path .= $name; }
		elsif (defined $prev && $name !~ m{/}) { $path = $prev =~ m{^(.*)/} ? "$1/$name" : $name; }
		push @map, $path;
		$prev = $path;
	}
}
die "layout: no ```text block under \"## Layout\" in $doc\n" unless @map;

# The bullets of "## The suites": the names of each, in backticks.
my (%bullet, $in_suites, $current);
for my $line (@doc)
{
	if ($line =~ /^## /) { $in_suites = $line eq "## The suites"; next; }
	next unless $in_suites;
	if ($line =~ /^- (\w+)/) { $current = $1; }
	elsif ($line !~ /^\s+\S/) { undef $current; }
	next unless defined $current;
	$bullet{$current}{$1} = 1 while $line =~ /`([^`]+)`/g;
}

sub glob_re
{
	(my $re = quotemeta shift) =~ s/\\\*/[^\/]*/g;
	$re =~ s/\\\?/[^\/]/g;
	return qr/^$re$/;
}

my @problems;
my (%named, @globs);
for my $m (@map)
{
	if ($m =~ /[*?]/)
	{
		my $re = glob_re($m);
		push @problems, "the map names $m, which matches no file" unless grep { $_ =~ $re } @files;
		push @globs, [$m, $re];
	}
	elsif (!$file{$m} && !$dir{$m})
	{
		push @problems, "the map names $m, which does not exist";
	}
	$named{$m} = 1;
}

# The suite groups: which files, and the bullet that must name each one.
my @groups = (
	[qr{^sql/(?!convctx--)([^/]+)\.sql$}, "Regression"],
	[qr{^test/specs/([^/]+)\.spec$},      "Isolation"],
	[qr{^test/t/([^/]+)\.pl$},            "TAP"],
);

my @wanted = grep { m{^(src|client)/} || m{^scripts/[^/]+$} || m{^test/bench/[^/]+\.sh$} } @files;
push @wanted, grep { m{^test/bench/[^/]+$} } sort keys %dir;
my $checked = @wanted;
for my $w (sort @wanted)
{
	push @problems, "$w is not in the map" unless $named{$w};
}
for my $g (@groups)
{
	my ($re, $bullet) = @$g;
	for my $f (grep { $_ =~ $re } @files)
	{
		$checked++;
		next if $named{$f};
		my ($suite) = $f =~ $re;
		my @by = map { $_->[0] } grep { $f =~ $_->[1] } @globs;
		if (!@by)
		{
			push @problems, "$f is not in the map";
		}
		elsif (!$bullet{$bullet}{$suite})
		{
			push @problems, "$f is in the map only as $by[0], and the \"- $bullet\" bullet of \"## The suites\" does not name `$suite`";
		}
	}
}

if (@problems)
{
	print "layout: $_\n" for @problems;
	printf "layout: %d missing or stale in the map of %s (## Layout)\n", scalar @problems, $doc;
	exit 1;
}
printf "layout: ok (%d files and suites named, %d map entries)\n", $checked, scalar @map;
'
