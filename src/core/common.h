/*-------------------------------------------------------------------------
 *
 * common.h
 *	  What every convctx C file shares: the limits of ids, the SQLSTATE of
 *	  convctx's own error, the session row's SQL fragments, text equality.
 *	  Each module declares the rest in its own header (src/<folder>/<module>.h).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/common.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_H
#define CONVCTX_H

#include "postgres.h"

/* Longest id (conversation, session, request, identity, user) accepted. */
#define CONVCTX_MAX_ID_BYTES 1024

/* The key of a context object that holds the referenced node ids. */
#define CONVCTX_ACTIVE_NODE_IDS "activeNodeIds"

/* SQLSTATE of a refused link of a session to a second identity. */
#define ERRCODE_CONVCTX_SESSION_LINKED MAKE_SQLSTATE('C','V','0','0','1')

/*
 * SQL fragments used by statements in several files (a fragment used by
 * one file is defined there).
 *
 * The key of a conversation's rows, tenant $1 and session
 * $2, as every per-session statement states it (bare, or for a table
 * alias). Shared so that the key reads the same in every file.
 */
#define SESSION_KEY \
	"tenant_id OPERATOR(pg_catalog.=) $1 AND session_id OPERATOR(pg_catalog.=) $2"
#define SESSION_KEY_AT(alias) \
	alias ".tenant_id OPERATOR(pg_catalog.=) $1 AND " \
	alias ".session_id OPERATOR(pg_catalog.=) $2"

/*
 * SQL fragment: the SET item of every statement that counts as activity of a
 * conversation on its convctx.session row (a turn started, a link, a context
 * written). Anonymous sessions expire convctx.session_ttl after it. The
 * expiry index holds activity_bin, a generated column (last_activity_at
 * rounded down to 10 minutes) that follows without being named here; it
 * changes at most once per bin, so almost every update stays HOT.
 * It never moves backwards: a statement that waited for the row's lock
 * took its timestamp before it waited, and may find a later one there,
 * written by a statement of the transaction it waited for (and moving back
 * would show the conversation twice to list_conversations' paging).
 */
#define SESSION_ACTIVITY_SET \
	" last_activity_at = GREATEST(last_activity_at, pg_catalog.statement_timestamp())"

/*
 * The same in the DO UPDATE of an INSERT ... ON CONFLICT AS s that inserts
 * the session row: the time the inserted row got by default. Citus refuses
 * a function that is not immutable there (and a generic plan of one
 * crashes Citus 13.2), and so every timestamp of such a statement is taken
 * once.
 */
#define SESSION_ACTIVITY_UPSERT \
	" last_activity_at = GREATEST(s.last_activity_at, EXCLUDED.last_activity_at)"

/*
 * SQL fragment: what convctx.session.first_question stores of question q,
 * the start of the default title of the conversation browser: its first
 * 4 x 80 characters after its leading white space (browser.c folds its
 * white space and cuts it to 80 when it shows it). No backslash: a
 * statement's text must not depend on standard_conforming_strings.
 */
#define FIRST_QUESTION_OF(q) \
	"pg_catalog.\"left\"(pg_catalog.ltrim(" q ", ' ' OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(9) OPERATOR(pg_catalog.||) pg_catalog.chr(10) OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(11) OPERATOR(pg_catalog.||) pg_catalog.chr(12) OPERATOR(pg_catalog.||)" \
	" pg_catalog.chr(13)), 320)"

/*
 * SQL fragment: first_question as it is now for the session (tenant,
 * session), from its first live current-version turn, NULL when it has
 * none; cond leaves out (" AND ...", on turn alias q) the turns that the
 * statement itself deletes or redacts, which its snapshot still shows.
 * Every writer that deletes or redacts turns sets it so, under the
 * session row's lock, so that the browser never shows a question that is
 * gone.
 */
#define FIRST_LIVE_QUESTION(tenant, session, cond) \
	"(SELECT " FIRST_QUESTION_OF("q.question_neutral") " FROM convctx.turn q" \
	"   WHERE q.tenant_id OPERATOR(pg_catalog.=) " tenant \
	"     AND q.session_id OPERATOR(pg_catalog.=) " session \
	"     AND q.deleted_at IS NULL AND q.replaced_by_turn_id IS NULL" cond \
	"   ORDER BY q.turn_no LIMIT 1)"

/*
 * cond of FIRST_LIVE_QUESTION: not a live current version that a CTE "d"
 * (returning tenant_id, session_id, turn_no, deleted_at and
 * replaced_by_turn_id, as they were before) deleted or redacted.
 */
#define NOT_REMOVED_BY_D \
	" AND (q.tenant_id, q.session_id, q.turn_no) NOT IN (SELECT d.tenant_id, d.session_id, d.turn_no" \
	"        FROM d WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL)"

/*
 * SQL fragment: the matching adjustment of the messages that summaries
 * cover, for a CTE "d" that also returned turn_no.
 */
#define SUMMARY_COVERED_ADJUST_D \
	" sadj AS (UPDATE convctx.session_summary ss" \
	"   SET covered_messages = ss.covered_messages OPERATOR(pg_catalog.-) a.msgs" \
	"   FROM (SELECT d.tenant_id, d.session_id," \
	"                pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(d.finalized_at) AS msgs" \
	"           FROM d JOIN convctx.session_summary s2" \
	"             ON s2.tenant_id OPERATOR(pg_catalog.=) d.tenant_id" \
	"            AND s2.session_id OPERATOR(pg_catalog.=) d.session_id" \
	"            AND d.turn_no OPERATOR(pg_catalog.<=) s2.through_turn_no" \
	"          WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL" \
	"          GROUP BY d.tenant_id, d.session_id) a" \
	"  WHERE ss.tenant_id OPERATOR(pg_catalog.=) a.tenant_id" \
	"    AND ss.session_id OPERATOR(pg_catalog.=) a.session_id)"

/*
 * The same for the one session $1, $2 of the statement, keyed by it in
 * every part, so that Citus sends it to that session's shard only.
 */
#define SUMMARY_COVERED_ADJUST_D_ONE \
	" sadj AS (UPDATE convctx.session_summary ss" \
	"   SET covered_messages = ss.covered_messages OPERATOR(pg_catalog.-) a.msgs" \
	"   FROM (SELECT pg_catalog.count(*) OPERATOR(pg_catalog.+) pg_catalog.count(d.finalized_at) AS msgs" \
	"           FROM d JOIN convctx.session_summary s2" \
	"             ON " SESSION_KEY_AT("s2") \
	"            AND d.turn_no OPERATOR(pg_catalog.<=) s2.through_turn_no" \
	"          WHERE d.deleted_at IS NULL AND d.replaced_by_turn_id IS NULL) a" \
	"  WHERE " SESSION_KEY_AT("ss") " AND a.msgs OPERATOR(pg_catalog.>) 0)"

/*
 * Byte equality of two texts, NULL equal only to NULL (ids and stored
 * texts compare so: the key columns are COLLATE "C").
 */
static inline bool
TextEqual(const text *a, const text *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/* The order of two texts in collation "C": bytes, then length. */
static inline int
TextCmpC(const text *a, const text *b)
{
	int			la = VARSIZE_ANY_EXHDR(a);
	int			lb = VARSIZE_ANY_EXHDR(b);
	int			c = memcmp(VARDATA_ANY(a), VARDATA_ANY(b), Min(la, lb));

	return c != 0 ? c : (la > lb) - (la < lb);
}

#endif							/* CONVCTX_H */
