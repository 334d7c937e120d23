/*-------------------------------------------------------------------------
 *
 * followup.c
 *	  The context decision is_followup: whether a query follows up on the
 *	  conversation, so that the app reuses its context rather than
 *	  retrieving afresh.
 *
 * Phrases are matched as whole words on folded text (lower case, Latin
 * accents removed, punctuation a space), from convctx.followup_phrase
 * (the tenant's and the shared rows) and the built-in list.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/prompt/followup.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/formatting.h"

#include "core/common.h"
#include "core/args.h"
#include "core/spi_plans.h"
#include "core/tenancy.h"

/* kept plans (spi_plans.c), NULL until first used */
static SPIPlanPtr finalized_exists_plan, phrases_plan;

/*
 * Whether the session has a finalized, live, current-version turn: its
 * row counts them (live_answers), so a session whose oldest turns are
 * tombstones is not walked through.
 */
#define FINALIZED_EXISTS_SQL \
	"SELECT 1 FROM convctx.session" \
	" WHERE " SESSION_KEY \
	"   AND live_answers OPERATOR(pg_catalog.>) 0"

/* The tenant's and the shared phrases, then the built-in ones (a view). */
#define PHRASES_SQL \
	"SELECT kind, phrase FROM convctx.followup_phrase" \
	" WHERE tenant_id OPERATOR(pg_catalog.=) ANY (ARRAY['', $1])" \
	" UNION ALL SELECT kind, phrase FROM convctx.builtin_followup_phrase"

/* Latin-1 Supplement and Latin Extended-A letters without their marks. */
static const char latin_fold[192 + 1] =
	"aaaaaaaceeeeiiiidnooooo ouuuuytsaaaaaaaceeeeiiiidnooooo ouuuuyty"	/* U+00C0 */
	"aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiiiiijjkkklllllll"	/* U+0100 */
	"lllnnnnnnnnnoooooooorrrrrrssssssssttttttuuuuuuuuuuuuwwyyyzzzzzzs";	/* U+0140 */

/*
 * Fold text for matching: lower case, accents removed from Latin letters,
 * every run of other punctuation and spaces one space, and a space at each
 * end, so that " phrase " matches whole words only.
 */
static char *
FoldForMatch(const char *s, int len)
{
	char	   *lower = str_tolower(s, len, DEFAULT_COLLATION_OID);
	int			n = strlen(lower);
	StringInfoData buf;
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;
	int			i = 0;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, ' ');
	while (i < n)
	{
		unsigned char c = (unsigned char) lower[i];
		char		out = 0;
		int			clen = 1;

		if (c < 0x80)
			out = (isalnum(c) ? (char) pg_ascii_tolower(c) : ' ');
		else if (utf8)
		{
			pg_wchar	cp;

			clen = pg_utf_mblen((const unsigned char *) lower + i);
			if (i + clen > n)
				clen = n - i;
			cp = utf8_to_unicode((const unsigned char *) lower + i);
			if (cp < 0xC0)
				out = ' ';
			else if (cp < 0x180)
				out = latin_fold[cp - 0xC0];
		}
		if (out == 0)
			appendBinaryStringInfo(&buf, lower + i, clen);
		else if (out != ' ' || buf.data[buf.len - 1] != ' ')
			appendStringInfoChar(&buf, out);
		i += clen;
	}
	if (buf.data[buf.len - 1] != ' ')
		appendStringInfoChar(&buf, ' ');
	return buf.data;
}

/* Number of words in folded text (runs of other characters than spaces). */
static int
CountWords(const char *folded)
{
	int			words = 0;
	const char *p;

	for (p = folded; *p; p++)
		if (*p != ' ' && p[-1] == ' ')
			words++;
	return words;
}

/* Whether the session has an answer to follow up on. SPI must be connected. */
static bool
SessionHasAnswer(text *tenant, text *session_id)
{
	SpiRunSessionPlan(&finalized_exists_plan, FINALIZED_EXISTS_SQL, tenant, session_id,
					  true, 1, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/*
 * Which kinds of the tenant's, the shared and the built-in phrases the
 * folded query holds as whole words: a fresh keyword (the search stops
 * there) or a clarification phrase. SPI must be connected.
 */
static void
MatchPhrases(text *tenant, const char *folded, bool *fresh, bool *clarification)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {PointerGetDatum(tenant)};
	uint64		r;

	SpiRunPlan(SpiKeptPlan(&phrases_plan, PHRASES_SQL, 1, argtypes),
			   values, NULL, true, 0, SPI_OK_SELECT);
	for (r = 0; r < SPI_processed && !*fresh; r++)
	{
		char	   *kind = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
		char	   *phrase = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
		char	   *fp = FoldForMatch(phrase, strlen(phrase));

		if (strcmp(fp, " ") == 0 || strstr(folded, fp) == NULL)
			continue;
		if (strcmp(kind, "fresh_keyword") == 0)
			*fresh = true;
		else
			*clarification = true;
	}
}

/*
 * Whether a query follows up on the conversation (session_id NULL: on
 * one assumed to have an answer): never when it holds a fresh keyword,
 * else when it is short (under six words) or holds a clarification phrase.
 */
static bool
IsFollowup(text *tenant, text *query, text *session_id)
{
	char	   *folded;
	bool		fresh = false;
	bool		clarification = false;

	CheckTextSize(query, "query");
	folded = FoldForMatch(VARDATA_ANY(query), VARSIZE_ANY_EXHDR(query));
	SPI_connect();
	if (session_id != NULL && !SessionHasAnswer(tenant, session_id))
	{
		SPI_finish();
		return false;			/* nothing to follow up on */
	}
	MatchPhrases(tenant, folded, &fresh, &clarification);
	SPI_finish();
	return !fresh && (CountWords(folded) < 6 || clarification);
}

PG_FUNCTION_INFO_V1(convctx_is_followup);

/*
 * is_followup(query, session_id) -> boolean
 */
Datum
convctx_is_followup(PG_FUNCTION_ARGS)
{
	text	   *session_id = ArgOptionalId(fcinfo, 1, "session_id");
	text	   *tenant = CurrentTenant();

	ArgNotNull(fcinfo, 0, "query");
	PG_RETURN_BOOL(IsFollowup(tenant, PG_GETARG_TEXT_PP(0), session_id));
}
