# Checks the TAP tests (test/t) share: loaded with
#	use FindBin;
#	use lib "$FindBin::RealBin/../perl";
#	use ConvctxChecks;
package ConvctxChecks;
use strict;
use warnings;
use Exporter 'import';
use Test::More;

our @EXPORT = qw(check_session_columns $FIRST_QUESTION_SQL);

# The session rows whose live_turns or live_answers differ from their turns.
our $LIVE_COUNTS_SQL = q{
    SELECT count(*)
      FROM convctx.session s
      LEFT JOIN (SELECT tenant_id, session_id,
                        count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL) AS live,
                        count(*) FILTER (WHERE deleted_at IS NULL AND replaced_by_turn_id IS NULL
                                           AND finalized_at IS NOT NULL) AS answers
                   FROM convctx.turn GROUP BY 1, 2) t USING (tenant_id, session_id)
     WHERE s.live_turns IS DISTINCT FROM coalesce(t.live, 0)
        OR s.live_answers IS DISTINCT FROM coalesce(t.answers, 0)};

# The session rows whose first_question is not the start of their first live
# question, or whose linked_later does not say whether the link came later.
our $FIRST_QUESTION_SQL = q{
    SELECT count(*) FROM convctx.session s
     WHERE s.first_question IS DISTINCT FROM
             (SELECT left(ltrim(q.question_neutral, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13)), 320)
                FROM convctx.turn q
               WHERE q.tenant_id = s.tenant_id AND q.session_id = s.session_id
                 AND q.deleted_at IS NULL AND q.replaced_by_turn_id IS NULL
               ORDER BY q.turn_no LIMIT 1)
        OR s.linked_later IS DISTINCT FROM
             coalesce((SELECT l.linked_at > s.created_at FROM convctx.session_link l
                        WHERE l.tenant_id = s.tenant_id AND l.session_id = s.session_id), false)};

# check_session_columns($q): two tests, that the session columns derived from
# the turns (live_turns, live_answers, first_question, linked_later) match
# them; $q runs a query and returns its result.
sub check_session_columns
{
	my ($q) = @_;
	is($q->($LIVE_COUNTS_SQL), '0', 'session.live_turns and live_answers match the turns');
	is($q->($FIRST_QUESTION_SQL), '0',
		'session.first_question and linked_later match the turns and the link');
	return;
}

1;
