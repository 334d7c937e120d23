/*-------------------------------------------------------------------------
 *
 * import_send.c
 *	  convctx import: the queue of groups, sent in batches to
 *	  convctx.import_records(); what the server refuses, rejected
 *	  conversations, and how an import stops.
 *
 * Readers hand each complete group to importer_add, which queues it and
 * sends the queue once it is a batch; a group that cannot be sent goes to
 * importer_reject. A batch is sent without waiting for it (a pipeline), so
 * that the next one is read while the server writes it. When the server
 * refuses a record for its data, nothing of the batch was written: the
 * groups before the record's are sent again, its group is rejected, and
 * the rest follow. Any other error stops the import. Rejecting and
 * stopping live here because each may wait for the batch in flight, and
 * waiting may reject and stop again.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/import_send.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common.h"
#include "format.h"
#include "import.h"
#include "util.h"

static void reject_group(Importer *imp, Group *g);
static void importer_stop(Importer *imp) __attribute__((noreturn));
static void stop_import(Importer *imp, int code) __attribute__((noreturn));

/* Run a statement that must succeed; a lost connection is exit 2. */
void
exec_ok(Importer *imp, const char *what, const char *sql)
{
	PQclear(run(imp->conn, what, sql, 0, NULL, PGRES_COMMAND_OK));
}

void
begin_transaction(Importer *imp)
{
	exec_ok(imp, "starting a transaction", "BEGIN");
	if (imp->o->common.tenant)
	{
		const char *params[1] = {imp->o->common.tenant};

		PQclear(run(imp->conn, "choosing the tenant", "SELECT convctx.use_tenant($1)", 1, params,
					PGRES_TUPLES_OK));
	}
}

/* The records of groups[0..n) as a binary text[] (array_recv's format). */
static char *
batch_array(Group **groups, int n, int *size)
{
	size_t		total = 20;
	int			count = 0;
	int			i,
				j;
	char	   *buf;
	char	   *p;
	uint32_t	v;

	for (i = 0; i < n; i++)
		for (j = 0; j < groups[i]->n; j++)
		{
			total += 4 + groups[i]->lens[j];
			count++;
		}
	if (total > 0x3fffffff)
		fail(EXIT_ERROR, "a batch of %d records is over 1 GB: use a smaller --batch-size", count);
	buf = p = xmalloc(total);
#define PUT32(x) (v = htonl((uint32_t) (x)), memcpy(p, &v, 4), p += 4)
	PUT32(1);					/* dimensions */
	PUT32(0);					/* no nulls */
	PUT32(25);					/* text */
	PUT32(count);
	PUT32(1);					/* lower bound */
	for (i = 0; i < n; i++)
		for (j = 0; j < groups[i]->n; j++)
		{
			PUT32(groups[i]->lens[j]);
			memcpy(p, groups[i]->lines[j], groups[i]->lens[j]);
			p += groups[i]->lens[j];
		}
#undef PUT32
	*size = (int) total;
	return buf;
}

/* The server error of a refused batch, kept to be reported. */
typedef struct BatchError
{
	char	   *sqlstate;
	char	   *message;
	char	   *detail;
	char	   *hint;
	int			recno;			/* record of the batch it names (1-based), or 0 */
} BatchError;

static char *
strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

#define IMPORT_SQL \
	"SELECT record_type, imported, skipped, skipped_why::pg_catalog.text" \
	"  FROM convctx.import_records($1, $2, $3, $4, $5::pg_catalog.jsonb)"

/* The parameters of IMPORT_SQL for groups[0..n); *array is to be freed. */
static void
import_params(Importer *imp, Group **groups, int n, char **array, const char **values, int *lengths)
{
	int			size;

	*array = batch_array(groups, n, &size);
	values[0] = *array;
	lengths[0] = size;
	values[1] = imp->o->on_conflict;
	values[2] = imp->o->allow_anonymous ? "t" : "f";
	values[3] = imp->o->as_identity;
	values[4] = imp->identity_map;
	lengths[1] = lengths[2] = lengths[3] = lengths[4] = 0;
}

static const Oid import_types[5] = {1009, 25, 16, 25, 25};	/* text[], text, bool, text, text */
static const int import_formats[5] = {1, 0, 0, 0, 0};

/* Add the counts of the JSON object why ({"reason": n, ...}) to the skip reasons. */
static void
count_skip_reasons(Importer *imp, const char *why)
{
	json_t	   *o = json_loads(why, JSON_DECODE_ANY, NULL);
	const char *reason;
	json_t	   *count;
	int			k;

	json_object_foreach(o, reason, count)
	{
		for (k = 0; k < imp->nskip && strcmp(imp->skip_reasons[k], reason) != 0; k++)
			;
		if (k == imp->nskip)
		{
			if (imp->nskip == MAX_DROPPED)
				continue;
			imp->skip_reasons[imp->nskip++] = xstrdup(reason);
			imp->skip_counts[k] = 0;
		}
		imp->skip_counts[k] += json_integer_value(count);
	}
	json_decref(o);
}

/* Add what a call of import_records() wrote and skipped to the totals. */
static void
count_result(Importer *imp, PGresult *res, Group **groups, int n)
{
	int			i;

	for (i = 0; i < PQntuples(res); i++)
	{
		const char *type = PQgetvalue(res, i, 0);
		int			t = record_type(type);

		if (t < RECORD_TYPES)
		{
			imp->imported[t] += atoll(PQgetvalue(res, i, 1));
			imp->skipped[t] += atoll(PQgetvalue(res, i, 2));
			if (!PQgetisnull(res, i, 3))
				count_skip_reasons(imp, PQgetvalue(res, i, 3));
		}
		else if (strcmp(type, "metadata key") == 0)
			imp->metadata_keys_dropped += atoll(PQgetvalue(res, i, 2));
	}
	for (i = 0; i < n; i++)
		imp->records_sent += groups[i]->n;
}

/* The error of a refused call, kept to be reported. */
static void
keep_error(PGconn *conn, PGresult *res, BatchError *err)
{
	const char *context = PQresultErrorField(res, PG_DIAG_CONTEXT);
	const char *at = context ? strstr(context, "import record ") : NULL;

	err->sqlstate = strdup_or_null(PQresultErrorField(res, PG_DIAG_SQLSTATE));
	err->message = strdup_or_null(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
	if (err->message == NULL)
		err->message = strdup(PQerrorMessage(conn));
	err->detail = strdup_or_null(PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL));
	err->hint = strdup_or_null(PQresultErrorField(res, PG_DIAG_MESSAGE_HINT));
	err->recno = at ? atoi(at + strlen("import record ")) : 0;
}

/*
 * Send groups[0..n) in one call and wait. true when written; false with
 * *err filled when the server refused a record (the transaction then
 * rolled back, or with -1 left failed).
 */
static bool
send_batch(Importer *imp, Group **groups, int n, BatchError *err)
{
	const char *values[5];
	int			lengths[5];
	char	   *array;
	PGresult   *res;

	if (n == 0)
		return true;
	import_params(imp, groups, n, &array, values, lengths);
	if (!imp->o->single_transaction)
		begin_transaction(imp);
	res = PQexecParams(imp->conn, IMPORT_SQL, 5, import_types, values, lengths, import_formats, 0);
	free(array);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		if (!imp->o->single_transaction)
			exec_ok(imp, "committing", "COMMIT");
		count_result(imp, res, groups, n);
		PQclear(res);
		return true;
	}
	if (PQstatus(imp->conn) != CONNECTION_OK)
		fail(EXIT_CONNECTION, "connection lost while importing: %s", PQerrorMessage(imp->conn));
	keep_error(imp->conn, res, err);
	PQclear(res);
	if (!imp->o->single_transaction)
		exec_ok(imp, "rolling back", "ROLLBACK");
	return false;
}

/* The group of groups[0..n) that holds record recno of their batch. */
static int
group_of_record(Group **groups, int n, int recno, int *index_in_group)
{
	int			i;

	*index_in_group = -1;
	if (recno < 1)
		return -1;				/* an error of the call, not of a record */
	for (i = 0; i < n; i++)
	{
		if (recno <= groups[i]->n)
		{
			*index_in_group = recno - 1;
			return i;
		}
		recno -= groups[i]->n;
	}
	*index_in_group = -1;
	return -1;
}

/* s with every from replaced by to (malloc'd), or NULL when s is. */
static char *
replace_all(const char *s, const char *from, const char *to)
{
	char	   *out;
	size_t		len = 0;
	size_t		cap;
	const char *p;

	if (s == NULL)
		return NULL;
	cap = strlen(s) + 1;
	if (from != NULL)
		for (p = strstr(s, from); p; p = strstr(p + strlen(from), from))
			cap += strlen(to);
	out = xmalloc(cap);
	while (from != NULL && (p = strstr(s, from)) != NULL)
	{
		memcpy(out + len, s, p - s);
		len += p - s;
		memcpy(out + len, to, strlen(to));
		len += strlen(to);
		s = p + strlen(from);
	}
	strcpy(out + len, s);
	return out;
}

/*
 * Print an error about a record: "FILE:LINE: error: message", as a
 * compiler does, and the server's SQLSTATE, detail and hint. A record
 * made from another source is named by what the source holds: a value
 * made here (a turn id) by what it was made of, which a CONTEXT line
 * gives with the times as written.
 */
static void
report_record_error(Importer *imp, const Group *g, int index, const char *sqlstate,
					const char *message, const char *detail, const char *hint)
{
	const RecordOrigin *origin = index >= 0 && g->origins ? &g->origins[index] : NULL;
	char	   *m = replace_all(message, origin ? origin->generated : NULL,
								origin ? origin->generated_as : NULL);
	char	   *d = replace_all(detail, origin ? origin->generated : NULL,
								origin ? origin->generated_as : NULL);

	if (index >= 0 && g->linenos[index] > 0)
		fprintf(stderr, "%s:%ld: error: %s", imp->input_name, g->linenos[index], m);
	else
		fprintf(stderr, "%s: error: %s", g->where, m);
	if (sqlstate)
		fprintf(stderr, " (SQLSTATE %s)", sqlstate);
	fputc('\n', stderr);
	if (d)
		fprintf(stderr, "DETAIL:  %s\n", d);
	if (hint)
		fprintf(stderr, "HINT:  %s\n", hint);
	if (origin && origin->made_of)
		fprintf(stderr, "CONTEXT:  %s\n", origin->made_of);
	free(m);
	free(d);
}

/*
 * An error of a record's data, counted against its conversation: classes
 * 22 and 23, the limits of class 54, and the refusals of import_records()
 * that are not of those classes (an erasure, 55000; a session linked to
 * another identity, CV001). Anything else (a cancel, a timeout, a
 * deadlock, a shutdown) stops the import whatever --max-errors says.
 */
static bool
data_error(const char *sqlstate)
{
	return sqlstate && (strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0 ||
						strncmp(sqlstate, "54", 2) == 0 || strcmp(sqlstate, "55000") == 0 ||
						strcmp(sqlstate, "CV001") == 0);
}

static void
free_error(BatchError *err)
{
	free(err->sqlstate);
	free(err->message);
	free(err->detail);
	free(err->hint);
	memset(err, 0, sizeof(*err));
}

/*
 * A character the database's encoding cannot hold is refused while the
 * server reads the batch's parameter, before import_records() sees a
 * record, so the error names none. Find the record: the first of
 * groups[0..n) the server cannot take as text (a call per record, made
 * only after such a refusal, outside the transaction that failed). Its
 * number in the batch, with *err its error; 0 when every record passes.
 */
static int
find_unconvertible(Importer *imp, Group **groups, int n, BatchError *err)
{
	int			recno = 0;
	int			found = 0;
	int			i,
				j;

	if (imp->o->single_transaction)
		exec_ok(imp, "rolling back", "ROLLBACK");	/* failed: nothing is written */
	for (i = 0; i < n && !found; i++)
		for (j = 0; j < groups[i]->n && !found; j++)
		{
			const char *value[1] = {groups[i]->lines[j]};
			PGresult   *res = PQexecParams(imp->conn, "SELECT $1::pg_catalog.text IS NULL", 1, NULL,
										   value, NULL, NULL, 0);

			recno++;
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
			{
				if (PQstatus(imp->conn) != CONNECTION_OK)
					fail(EXIT_CONNECTION, "connection lost while importing: %s", PQerrorMessage(imp->conn));
				free_error(err);
				keep_error(imp->conn, res, err);
				found = recno;
			}
			PQclear(res);
		}
	if (imp->o->single_transaction)
		exec_ok(imp, "starting a transaction", "BEGIN");	/* for importer_abort to roll back */
	return found;
}

/*
 * Stop after a server error that blames no record: a transaction that
 * failed as a whole, or an interruption (a cancel, a timeout, a deadlock,
 * a shutdown), which is never a record's fault and stops the import with
 * status 4, whatever --max-errors says.
 */
static void
stop_on_server_error(Importer *imp, BatchError *err)
{
	bool		interrupted = interrupted_error(err->sqlstate);

	fprintf(stderr, "%s: error: %s%s%s%s\n", progname, err->message,
			err->sqlstate ? " (SQLSTATE " : "", err->sqlstate ? err->sqlstate : "",
			err->sqlstate ? ")" : "");
	if (err->detail)
		fprintf(stderr, "DETAIL:  %s\n", err->detail);
	if (err->hint)
		fprintf(stderr, "HINT:  %s\n", err->hint);
	if (interrupted)
		fprintf(stderr, "%s: the server interrupted the import (a cancel, a timeout, a deadlock, a shutdown "
				"or a lack of resources), not a record of it: the batch it was writing is rolled back; "
				"run the import again to go on (conversations already there are skipped)\n", progname);
	stop_import(imp, interrupted ? EXIT_INTERRUPTED : EXIT_ERROR);
}

/*
 * Write groups[0..n): in one call when the server takes them all; when it
 * refuses a record for its data, the groups before its group are sent
 * again, its group is rejected, and the rest follow. With refused set, the
 * first call was made already and refused with *refused.
 */
static void
flush_groups(Importer *imp, Group **groups, int n, BatchError *refused)
{
	BatchError err;
	int			failed;
	int			index;

	while (n > 0)
	{
		memset(&err, 0, sizeof(err));
		if (refused)
		{
			err = *refused;
			refused = NULL;
		}
		else if (send_batch(imp, groups, n, &err))
			return;
		if (err.recno == 0 && err.sqlstate &&
			(strcmp(err.sqlstate, "22P05") == 0 || strcmp(err.sqlstate, "22021") == 0))
			err.recno = find_unconvertible(imp, groups, n, &err);
		failed = group_of_record(groups, n, err.recno, &index);
		if (failed < 0 || !data_error(err.sqlstate))
			stop_on_server_error(imp, &err);
		report_record_error(imp, groups[failed], index, err.sqlstate, err.message, err.detail, err.hint);
		free_error(&err);
		if (imp->o->single_transaction)
			importer_abort(imp);
		flush_groups(imp, groups, failed, NULL);
		reject_group(imp, groups[failed]);
		groups += failed + 1;
		n -= failed + 1;
	}
}

static void
free_groups(Group **groups, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		group_free(groups[i]);
}

/*
 * Read the results of the batch in flight, up to its sync: the counts of
 * import_records(), and *refused with the first error in *err when the
 * server refused something.
 */
static PGresult *
read_pipeline(Importer *imp, BatchError *err, bool *refused)
{
	PGresult   *res;
	PGresult   *counted = NULL;

	for (;;)
	{
		res = PQgetResult(imp->conn);
		if (res == NULL)
		{
			if (PQstatus(imp->conn) != CONNECTION_OK)
				fail(EXIT_CONNECTION, "connection lost while importing: %s", PQerrorMessage(imp->conn));
			continue;			/* between the results of two statements */
		}
		switch (PQresultStatus(res))
		{
			case PGRES_PIPELINE_SYNC:
				PQclear(res);
				return counted;
			case PGRES_TUPLES_OK:
				if (PQnfields(res) == 4 && counted == NULL)
				{
					counted = res;	/* import_records' counts */
					continue;
				}
				break;
			case PGRES_COMMAND_OK:
			case PGRES_PIPELINE_ABORTED:
				break;
			default:
				if (PQstatus(imp->conn) != CONNECTION_OK)
					fail(EXIT_CONNECTION, "connection lost while importing: %s", PQerrorMessage(imp->conn));
				if (!*refused)
					keep_error(imp->conn, res, err);
				*refused = true;
				break;
		}
		PQclear(res);
	}
}

/*
 * Wait for the batch in flight (send_async). When the server refused it,
 * nothing of it was written: write it again the careful way (flush_groups).
 */
static void
finish_async(Importer *imp)
{
	PGresult   *counted;
	BatchError	err;
	bool		refused = false;
	Group	  **groups = imp->inflight;
	int			n = imp->ninflight;

	if (n == 0)
		return;
	/* taken: an error below that stops the import must not wait for it again */
	imp->inflight = NULL;
	imp->ninflight = 0;
	imp->cap_inflight = 0;
	memset(&err, 0, sizeof(err));
	counted = read_pipeline(imp, &err, &refused);
	if (PQexitPipelineMode(imp->conn) != 1)
		fail(EXIT_ERROR, "could not leave pipeline mode: %s", PQerrorMessage(imp->conn));
	if (!refused)
		count_result(imp, counted, groups, n);
	PQclear(counted);
	if (refused)
	{
		if (!imp->o->single_transaction)
			PQclear(PQexec(imp->conn, "ROLLBACK"));
		flush_groups(imp, groups, n, &err);
	}
	free_groups(groups, n);
	free(groups);
}

/*
 * Send the pending groups as a batch without waiting for it (a pipeline:
 * BEGIN, use_tenant, import_records, COMMIT), so that the next batch is
 * read while the server writes this one.
 */
static void
send_async(Importer *imp)
{
	const char *values[5];
	int			lengths[5];
	char	   *array;
	const char *tenant[1] = {imp->o->common.tenant};
	bool		ok;

	finish_async(imp);
	if (imp->npending == 0)
		return;
	if (imp->cap_inflight < imp->npending)
	{
		imp->cap_inflight = imp->npending;
		imp->inflight = xrealloc(imp->inflight, imp->cap_inflight * sizeof(Group *));
	}
	memcpy(imp->inflight, imp->pending, imp->npending * sizeof(Group *));
	imp->ninflight = imp->npending;
	imp->npending = 0;
	imp->pending_records = 0;

	import_params(imp, imp->inflight, imp->ninflight, &array, values, lengths);
	ok = PQenterPipelineMode(imp->conn) == 1;
	if (ok && !imp->o->single_transaction)
	{
		ok = PQsendQueryParams(imp->conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) == 1;
		if (ok && imp->o->common.tenant)
			ok = PQsendQueryParams(imp->conn, "SELECT convctx.use_tenant($1)", 1, NULL, tenant,
								   NULL, NULL, 0) == 1;
	}
	ok = ok && PQsendQueryParams(imp->conn, IMPORT_SQL, 5, import_types, values, lengths,
								 import_formats, 0) == 1;
	if (ok && !imp->o->single_transaction)
		ok = PQsendQueryParams(imp->conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) == 1;
	ok = ok && PQpipelineSync(imp->conn) == 1;
	free(array);
	if (!ok)
		fail(PQstatus(imp->conn) == CONNECTION_OK ? EXIT_ERROR : EXIT_CONNECTION,
			 "could not send a batch: %s", PQerrorMessage(imp->conn));
}

/* A complete group: queue it, and send the queue once it is a batch. */
void
importer_add(Importer *imp, Group *g)
{
	if (imp->npending == imp->cap_pending)
	{
		imp->cap_pending = imp->cap_pending ? imp->cap_pending * 2 : 64;
		imp->pending = xrealloc(imp->pending, imp->cap_pending * sizeof(Group *));
	}
	imp->pending[imp->npending++] = g;
	imp->pending_records += g->n;
	if (imp->pending_records >= imp->o->batch_size)
	{
		send_async(imp);
		importer_progress(imp);
	}
}

/* The queued group of conversation id, taken out of the queue, or NULL. */
Group *
importer_take_pending(Importer *imp, const char *id)
{
	int			i;

	for (i = imp->npending - 1; i >= 0; i--)
		if (strcmp(imp->pending[i]->id, id) == 0)
		{
			Group	   *g = imp->pending[i];

			memmove(&imp->pending[i], &imp->pending[i + 1], (imp->npending - i - 1) * sizeof(Group *));
			imp->npending--;
			imp->pending_records -= g->n;
			return g;
		}
	return NULL;
}

/* Write every group read so far, and wait until it is written. */
void
flush_pending(Importer *imp)
{
	send_async(imp);
	finish_async(imp);
	importer_progress(imp);
}

/*
 * A group that cannot be sent (a bad line in it): reject it, after
 * writing the groups before it.
 */
void
importer_reject(Importer *imp, Group *g)
{
	flush_pending(imp);
	reject_group(imp, g);
	group_free(g);
}

/*
 * A group was refused: count it, keep its records in the reject file,
 * and stop unless --max-errors allows one more.
 */
static void
reject_group(Importer *imp, Group *g)
{
	int			i;

	imp->rejected++;
	imp->rejected_records += g->n;
	if (imp->reject)
	{
		for (i = 0; i < g->n; i++)
			if (fwrite(g->lines[i], 1, g->lens[i], imp->reject) != g->lens[i] ||
				fputc('\n', imp->reject) == EOF)
				fail(EXIT_ERROR, "could not write to \"%s\": %s", imp->o->reject_file, strerror(errno));
	}
	if (imp->o->max_errors >= 0 && imp->rejected > imp->o->max_errors)
		importer_stop(imp);
}

/* Stop because --max-errors was reached (the groups before are written). */
static void
importer_stop(Importer *imp)
{
	fprintf(stderr, "%s: error: stopped after %lld rejected conversation%s%s\n", progname,
			imp->rejected, imp->rejected == 1 ? "" : "s",
			imp->o->max_errors == 0 ? " (see --max-errors)" : " (--max-errors)");
	importer_abort(imp);
}

void
importer_abort(Importer *imp)
{
	stop_import(imp, EXIT_ERROR);
}

/* Stop after an error: what was committed stays; -1 rolls back. */
static void
stop_import(Importer *imp, int code)
{
	/* the batch in flight: written, or with -1 about to be rolled back */
	finish_async(imp);
	if (imp->o->single_transaction && PQstatus(imp->conn) == CONNECTION_OK)
	{
		PQclear(PQexec(imp->conn, "ROLLBACK"));
		if (imp->o->common.verbosity >= 0)
			fprintf(stderr, "%s: rolled back: nothing was imported\n", progname);
	}
	else
		print_summary(imp);
	PQfinish(imp->conn);
	exit(code);
}
