/*-------------------------------------------------------------------------
 *
 * import.c
 *	  convctx import: conversations into a tenant, from a convctx.jsonl
 *	  file or from another store's history (sources.c).
 *
 * Every source becomes conversation groups of convctx.jsonl records (a
 * session record and its turns, retrievals, clarifications, summary and
 * context; or a context alone). Groups are sent in batches to
 * convctx.import_records(), which writes them under the rules of the API;
 * the lines of a convctx.jsonl file are sent as read, so the server's own
 * jsonb parser reads every number and character (jansson is used here to
 * check each line and find its type and conversation, never to re-encode
 * it). Each batch is a transaction of its own; with -1 the whole import is
 * one.
 *
 * Bad input: by default the first bad line or refused record stops the
 * import with the file, line and column and what is wrong; the groups
 * read before it are written, nothing of its own group is. With
 * --max-errors=N up to N groups are rejected (written to --reject-file
 * when given) and the import goes on; it then ends with status 3. A
 * convctx.jsonl file must end with its trailer, whose counts are
 * checked: a regular file without one is refused before anything is
 * written.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/import.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* memrchr */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "convctx.h"

/* Records per call of convctx.import_records() (whole groups). */
#define DEFAULT_BATCH 1000

static void
import_usage(FILE *out)
{
	fprintf(out,
			"%s import writes conversations into a tenant: a convctx.jsonl file, or the\n"
			"history another library stored.\n\n"
			"Usage:\n  %s import [OPTION]...\n\n"
			"Input:\n"
			"  -f, --file=FILE         read FILE (default: standard input)\n"
			"  --from=SOURCE           convctx (default), messages, openai-items, langchain,\n"
			"                          langchain-js, mastra, langgraph-js\n"
			"  --source-dsn=CONNSTR    read a library's tables from this database instead\n"
			"  --source-table=NAME     the message table of a LangChain history\n"
			"                          (default chat_history, langchain_chat_histories for -js)\n"
			"  --source-schema=NAME    schema of a library's tables (default public)\n"
			"  --session=ID            conversation id for a messages file without one\n\n"
			"Rules:\n"
			"  --on-conflict=WHAT      skip (default): leave existing conversations alone and\n"
			"                          count them; error: refuse them\n"
			"  --as-identity=ID        link anonymous conversations to identity ID\n"
			"  --identity-map=FILE     rename identities: a JSON object {\"old\": \"new\", ...}\n"
			"  --allow-anonymous       import anonymous conversations that the next purge or\n"
			"                          the anonymous cap would cut, and those whose source\n"
			"                          holds no time (they expire convctx.session_ttl after\n"
			"                          the import)\n"
			"  --max-errors=N          reject up to N conversations and go on (-1: no limit;\n"
			"                          default 0: stop at the first)\n"
			"  --reject-file=FILE      write the records of rejected conversations to FILE\n"
			"  --allow-truncated       import a convctx.jsonl file cut short, without its\n"
			"                          trailer, its last line maybe cut mid-line: all but\n"
			"                          its last conversation, which may be cut (exit 0)\n"
			"  -1, --single-transaction  all or nothing\n"
			"  --batch-size=N          records per call of the server (default %d)\n"
			"  -P, --progress          show records, records/s and elapsed time on stderr\n"
			"  -v, --verbose           say what is done\n"
			"  -q, --quiet             no messages but errors\n\n"
			"Connection (as pg_dump):\n"
			"  -d, --dbname=CONNSTR    database name or connection string\n"
			"  -h, --host=HOST      -p, --port=PORT      -U, --username=USER\n"
			"  -w, --no-password    -W, --password\n"
			"  --tenant=TENANT         the tenant, for a role bound to every tenant (needed\n"
			"                          for a file exported from a tenant other than \"\")\n\n"
			"The role must be a member of convctx_admin.\n"
			"Exit status: 0 done, 1 error (nothing more written), 2 connection failed or\n"
			"lost, 3 done but conversations were rejected (--max-errors), 4 interrupted by\n"
			"the server (a cancel, a timeout, a deadlock, a shutdown, a lack of resources;\n"
			"never counted against a conversation): run it again to go on.\n",
			progname, progname, DEFAULT_BATCH);
}

/* An option's number: arg as a whole, at least min; else exit 1 with message. */
static long
number_option(const char *arg, long min, const char *message)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno != 0 || *end != '\0' || end == arg || v < min)
		fail(EXIT_ERROR, "%s", message);
	return v;
}

static void
parse_import_options(int argc, char **argv, ImportOptions *o)
{
	static const struct option longopts[] = {
		COMMON_LONG_OPTIONS,
		{"single-transaction", no_argument, NULL, '1'},
		{"from", required_argument, NULL, 2},
		{"source-dsn", required_argument, NULL, 3},
		{"source-table", required_argument, NULL, 4},
		{"on-conflict", required_argument, NULL, 5},
		{"as-identity", required_argument, NULL, 6},
		{"identity-map", required_argument, NULL, 7},
		{"allow-anonymous", no_argument, NULL, 8},
		{"max-errors", required_argument, NULL, 9},
		{"reject-file", required_argument, NULL, 10},
		{"allow-truncated", no_argument, NULL, 11},
		{"batch-size", required_argument, NULL, 12},
		{"source-schema", required_argument, NULL, 13},
		{"session", required_argument, NULL, 14},
		{NULL, 0, NULL, 0}
	};
	int			c;

	memset(o, 0, sizeof(*o));
	o->from = "convctx";
	o->on_conflict = "skip";
	o->batch_size = DEFAULT_BATCH;
	optind = 1;
	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "1?", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case '1': o->single_transaction = true; break;
			case 2: o->from = optarg; break;
			case 3: o->source_dsn = optarg; break;
			case 4: o->source_table = optarg; break;
			case 5:
				if (strcmp(optarg, "skip") != 0 && strcmp(optarg, "error") != 0)
					fail(EXIT_ERROR, "--on-conflict must be skip or error, not \"%s\"", optarg);
				o->on_conflict = optarg;
				break;
			case 6: o->as_identity = optarg; break;
			case 7: o->identity_map_file = optarg; break;
			case 8: o->allow_anonymous = true; break;
			case 9:
				o->max_errors = number_option(optarg, -1, "--max-errors must be a number of conversations, or -1");
				break;
			case 10: o->reject_file = optarg; break;
			case 11: o->allow_truncated = true; break;
			case 12:
				o->batch_size = number_option(optarg, 1, "--batch-size must be a positive number");
				break;
			case 13: o->source_schema = optarg; break;
			case 14: o->session_id = optarg; break;
			default:
				other_option(c, &o->common, argv, "import", import_usage);
				break;
		}
	}
	no_arguments_left(argc, argv);
	if (o->single_transaction && o->max_errors != 0)
		fail(EXIT_ERROR, "-1 (--single-transaction) stops at the first error: it cannot be used with --max-errors");
	if (o->as_identity && o->as_identity[0] == '\0')
		fail(EXIT_ERROR, "--as-identity must name an identity");
	if (o->source_dsn && o->common.file)
		fail(EXIT_ERROR, "--source-dsn and -f both name the input: give one");
}

/*
 * Groups
 */

Group *
group_new(const char *id, const char *where)
{
	Group	   *g = calloc(1, sizeof(Group));

	if (g == NULL)
		fail(EXIT_ERROR, "out of memory");
	g->id = strdup(id);
	g->where = strdup(where);
	return g;
}

/* Add a record (the text of one line, len bytes) found at line lineno. */
void
group_add(Group *g, const char *line, size_t len, long lineno)
{
	if (g->n == g->cap)
	{
		g->cap = g->cap ? g->cap * 2 : 16;
		g->lines = realloc(g->lines, g->cap * sizeof(char *));
		g->lens = realloc(g->lens, g->cap * sizeof(size_t));
		g->linenos = realloc(g->linenos, g->cap * sizeof(long));
		if (g->lines == NULL || g->lens == NULL || g->linenos == NULL)
			fail(EXIT_ERROR, "out of memory");
		if (g->origins)
		{
			g->origins = realloc(g->origins, g->cap * sizeof(RecordOrigin));
			if (g->origins == NULL)
				fail(EXIT_ERROR, "out of memory");
			memset(g->origins + g->n, 0, (g->cap - g->n) * sizeof(RecordOrigin));
		}
	}
	g->lines[g->n] = malloc(len + 1);
	if (g->lines[g->n] == NULL)
		fail(EXIT_ERROR, "out of memory");
	memcpy(g->lines[g->n], line, len);
	g->lines[g->n][len] = '\0';
	g->lens[g->n] = len;
	g->linenos[g->n] = lineno;
	g->n++;
}

/*
 * Add a record made here (sources.c): its compact JSON text, and what it
 * was made of (taken), for its errors.
 */
void
group_add_json(Group *g, json_t *record, long lineno, RecordOrigin *origin)
{
	char	   *text = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (text == NULL)
		fail(EXIT_ERROR, "could not encode a record of conversation \"%s\"", g->id);
	group_add(g, text, strlen(text), lineno);
	free(text);
	json_decref(record);
	if (g->origins == NULL && (g->origins = calloc(g->cap, sizeof(RecordOrigin))) == NULL)
		fail(EXIT_ERROR, "out of memory");
	g->origins[g->n - 1] = *origin;
}

static void
group_free(Group *g)
{
	int			i;

	for (i = 0; i < g->n; i++)
	{
		free(g->lines[i]);
		if (g->origins)
		{
			free(g->origins[i].made_of);
			free(g->origins[i].generated);
			free(g->origins[i].generated_as);
		}
	}
	free(g->origins);
	free(g->lines);
	free(g->lens);
	free(g->linenos);
	free(g->id);
	free(g->where);
	free(g);
}

/*
 * Sending batches
 */

static void
show_progress(Importer *imp, bool last)
{
	double		elapsed = now_seconds() - imp->started;

	fprintf(stderr, "\r%s: %lld records, %.0f records/s, %.1f s%s", progname, imp->records_sent,
			elapsed > 0 ? imp->records_sent / elapsed : 0.0, elapsed, last ? "\n" : "");
}

/* Run a statement that must succeed; a lost connection is exit 2. */
static void
exec_ok(Importer *imp, const char *what, const char *sql)
{
	PQclear(run(imp->conn, what, sql, 0, NULL, PGRES_COMMAND_OK));
}

static void
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
	buf = p = malloc(total);
	if (buf == NULL)
		fail(EXIT_ERROR, "out of memory");
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
			if ((imp->skip_reasons[imp->nskip++] = strdup(reason)) == NULL)
				fail(EXIT_ERROR, "out of memory");
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
		int			t;

		for (t = 0; t < RECORD_TYPES && strcmp(record_types[t], type) != 0; t++)
			;
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
	if ((out = malloc(cap)) == NULL)
		fail(EXIT_ERROR, "out of memory");
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

static void stop_import(Importer *imp, int code) __attribute__((noreturn));

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
 * Wait for the batch in flight (send_async). When the server refused it,
 * nothing of it was written: write it again the careful way (flush_groups).
 */
static void
finish_async(Importer *imp)
{
	PGresult   *res;
	PGresult   *counted = NULL;
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
				goto done;
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
				if (!refused)
					keep_error(imp->conn, res, &err);
				refused = true;
				break;
		}
		PQclear(res);
	}
done:
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
		imp->inflight = realloc(imp->inflight, imp->cap_inflight * sizeof(Group *));
		if (imp->inflight == NULL)
			fail(EXIT_ERROR, "out of memory");
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

/* Write every group read so far, and wait until it is written. */
static void
flush_pending(Importer *imp)
{
	send_async(imp);
	finish_async(imp);
	if (imp->o->common.progress && now_seconds() - imp->shown >= 1.0)
	{
		show_progress(imp, false);
		imp->shown = now_seconds();
	}
}

/* A complete group: queue it, and send the queue once it is a batch. */
void
importer_add(Importer *imp, Group *g)
{
	if (imp->npending == imp->cap_pending)
	{
		imp->cap_pending = imp->cap_pending ? imp->cap_pending * 2 : 64;
		imp->pending = realloc(imp->pending, imp->cap_pending * sizeof(Group *));
		if (imp->pending == NULL)
			fail(EXIT_ERROR, "out of memory");
	}
	imp->pending[imp->npending++] = g;
	imp->pending_records += g->n;
	if (imp->pending_records >= imp->o->batch_size)
	{
		send_async(imp);
		if (imp->o->common.progress && now_seconds() - imp->shown >= 1.0)
		{
			show_progress(imp, false);
			imp->shown = now_seconds();
		}
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

/* Print what was done: counts on stderr (unless -q). */
static void
print_summary(Importer *imp)
{
	int			t;
	long long	skipped = 0;

	if (imp->o->common.progress)
		show_progress(imp, true);
	if (imp->o->common.verbosity < 0)
		return;
	fprintf(stderr, "%s: imported", progname);
	for (t = 0; t < RECORD_TYPES; t++)
	{
		fprintf(stderr, "%s %lld %s", t ? "," : "", imp->imported[t],
				imp->imported[t] == 1 ? record_types[t] : record_types_plural[t]);
		skipped += imp->skipped[t];
	}
	fputc('\n', stderr);
	if (skipped > 0)
	{
		fprintf(stderr, "%s: skipped", progname);
		for (t = 0; t < RECORD_TYPES; t++)
			fprintf(stderr, "%s %lld %s", t ? "," : "", imp->skipped[t],
					imp->skipped[t] == 1 ? record_types[t] : record_types_plural[t]);
		for (t = 0; t < imp->nskip; t++)
			fprintf(stderr, "%s%s: %lld", t ? ", " : " (", imp->skip_reasons[t], imp->skip_counts[t]);
		fputs(imp->nskip ? ")\n" : "\n", stderr);
	}
	if (imp->metadata_keys_dropped > 0)
		fprintf(stderr, "%s: dropped %lld metadata keys that convctx.metadata_allowlist does not allow\n",
				progname, imp->metadata_keys_dropped);
	for (t = 0; t < imp->ndropped; t++)
		fprintf(stderr, "%s: not imported: %s: %lld\n", progname, imp->dropped_names[t],
				imp->dropped_counts[t]);
	for (t = 0; t < imp->nwarnings; t++)
		fprintf(stderr, "%s: warning: %s: %lld (the first: %s)\n", progname, imp->warning_names[t],
				imp->warning_counts[t], imp->warning_first[t]);
	if (imp->anonymous_undated > 0)
		fprintf(stderr, "%s: warning: %lld anonymous conversation%s without a time in %s source took the "
				"import's time: the first purge after convctx.session_ttl from now deletes %s\n", progname,
				imp->anonymous_undated, imp->anonymous_undated == 1 ? "" : "s",
				imp->anonymous_undated == 1 ? "its" : "their", imp->anonymous_undated == 1 ? "it" : "them");
	if (imp->rejected > 0)
		fprintf(stderr, "%s: rejected %lld conversation%s (%lld record%s)%s%s\n", progname,
				imp->rejected, imp->rejected == 1 ? "" : "s",
				imp->rejected_records, imp->rejected_records == 1 ? "" : "s",
				imp->reject ? ", written to " : "", imp->reject ? imp->o->reject_file : "");
	/* every record read is imported, skipped or rejected */
	{
		long long	imported = 0;

		for (t = 0; t < RECORD_TYPES; t++)
			imported += imp->imported[t];
		fprintf(stderr, "%s: %lld records read: %lld imported, %lld skipped, %lld rejected",
				progname, imp->records_sent + imp->rejected_records + imp->left_out, imported, skipped,
				imp->rejected_records);
		if (imp->left_out > 0)
			fprintf(stderr, ", %lld left out (the end of a file cut short)", imp->left_out);
		fputc('\n', stderr);
		if (imported + skipped != imp->records_sent)
			fprintf(stderr, "%s: warning: the server counted %lld of the %lld records it was sent\n",
					progname, imported + skipped, imp->records_sent);
	}
}

/* Count something a source holds that convctx has no place for. */
void
importer_count_dropped(Importer *imp, const char *what, long long n)
{
	int			i;

	if (n == 0)
		return;
	for (i = 0; i < imp->ndropped; i++)
		if (strcmp(imp->dropped_names[i], what) == 0)
		{
			imp->dropped_counts[i] += n;
			return;
		}
	if (imp->ndropped == MAX_DROPPED)
		return;
	imp->dropped_names[imp->ndropped] = what;
	imp->dropped_counts[imp->ndropped++] = n;
}

/*
 * Count something of a source changed so that it could be imported (a
 * time moved, an id made distinct); first describes the case (taken).
 */
void
importer_count_warning(Importer *imp, const char *what, char *first)
{
	int			i;

	for (i = 0; i < imp->nwarnings && strcmp(imp->warning_names[i], what) != 0; i++)
		;
	if (i == imp->nwarnings)
	{
		if (imp->nwarnings == MAX_DROPPED)
		{
			free(first);
			return;
		}
		imp->warning_names[imp->nwarnings++] = what;
		imp->warning_first[i] = first;
		first = NULL;
	}
	imp->warning_counts[i]++;
	free(first);
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

void
importer_abort(Importer *imp)
{
	stop_import(imp, EXIT_ERROR);
}

/* Stop because --max-errors was reached (the groups before are written). */
void
importer_stop(Importer *imp)
{
	fprintf(stderr, "%s: error: stopped after %lld rejected conversation%s%s\n", progname,
			imp->rejected, imp->rejected == 1 ? "" : "s",
			imp->o->max_errors == 0 ? " (see --max-errors)" : " (--max-errors)");
	importer_abort(imp);
}

/*
 * Reading convctx.jsonl
 */

/* A line's record: its type (index in record_types) and conversation id. */
typedef struct LineRecord
{
	int			type;			/* -1: header, -2: trailer */
	const char *id;
	json_t	   *value;			/* the header or trailer, parsed */
	ScannedLine scanned;
} LineRecord;

static void
line_record_free(LineRecord *rec)
{
	json_decref(rec->value);
	scanned_line_free(&rec->scanned);
	memset(rec, 0, sizeof(*rec));
}

/* "FILE:LINE:COL: error: ..." and stop or reject. */
static void
line_error(Importer *imp, long lineno, int column, const char *fmt,...)
	__attribute__((format(printf, 4, 5)));

static void
line_error(Importer *imp, long lineno, int column, const char *fmt,...)
{
	va_list		ap;

	if (column > 0)
		fprintf(stderr, "%s:%ld:%d: error: ", imp->input_name, lineno, column);
	else
		fprintf(stderr, "%s:%ld: error: ", imp->input_name, lineno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Check a line of convctx.jsonl (jsonl_scan.c) and find its type and
 * conversation. false (after printing why) when it is not a record of
 * the format.
 */
static bool
parse_line(Importer *imp, const char *line, size_t len, long lineno, LineRecord *rec)
{
	int			column;
	const char *message;
	const char *type_name;
	int			t;

	memset(rec, 0, sizeof(*rec));
	if (!scan_jsonl_line(line, len, &rec->scanned, &column, &message))
	{
		line_error(imp, lineno, column, "%s%s", strncmp(message, "\\u0000", 6) == 0 ||
				   strncmp(message, "duplicate", 9) == 0 || strncmp(message, "invalid input", 13) == 0
				   ? "" : "invalid JSON: ", message);
		return false;
	}
	type_name = rec->scanned.type;
	if (type_name == NULL)
	{
		line_error(imp, lineno, 0, "a record must have a string \"type\"");
		return false;
	}
	if (strcmp(type_name, "header") == 0 || strcmp(type_name, "end") == 0)
	{
		/* two lines of a file: parsed whole, for their values */
		rec->type = type_name[0] == 'h' ? -1 : -2;
		rec->value = json_loadb(line, len, JSON_DECODE_INT_AS_REAL, NULL);
		return true;
	}
	for (t = 0; t < RECORD_TYPES && strcmp(record_types[t], type_name) != 0; t++)
		;
	if (t == RECORD_TYPES)
	{
		line_error(imp, lineno, 0, "unknown record type \"%s\"", type_name);
		return false;
	}
	rec->type = t;
	rec->id = t == 5 ? rec->scanned.conversation_id : rec->scanned.session_id;
	if (rec->id == NULL || rec->id[0] == '\0')
	{
		line_error(imp, lineno, 0, "a %s record must have a non-empty string \"%s\"", type_name,
				   t == 5 ? "conversation_id" : "session_id");
		return false;
	}
	return true;
}

/* The header: convctx.jsonl of a version this tool reads. */
static void
check_header(Importer *imp, LineRecord *rec)
{
	json_t	   *format = json_object_get(rec->value, "format");
	json_t	   *version = json_object_get(rec->value, "format_version");

	if (!json_is_string(format) || strcmp(json_string_value(format), JSONL_FORMAT) != 0)
	{
		line_error(imp, 1, 0, "the header does not name format \"%s\"", JSONL_FORMAT);
		importer_abort(imp);
	}
	if (!json_is_number(version) || json_number_value(version) != JSONL_FORMAT_VERSION)
	{
		line_error(imp, 1, 0, "format_version %g is not one this tool reads (it reads %d)",
				   json_is_number(version) ? json_number_value(version) : 0.0, JSONL_FORMAT_VERSION);
		importer_abort(imp);
	}
}

/*
 * Without --tenant, a role that may act for any tenant (a superuser, a
 * role bound to every tenant) writes into the tenant convctx.tenant names,
 * '' when it names none. A file exported from another tenant is refused
 * then, before anything is written: the tool does not choose a tenant.
 * Found out by trying: use_tenant() of the file's tenant succeeds only for
 * a role that may act for any tenant (undone at once).
 */
static void
check_source_tenant(Importer *imp, LineRecord *rec)
{
	const char *source = json_string_value(json_object_get(rec->value, "source_tenant"));
	const char *params[1] = {source};
	bool		single = imp->o->single_transaction;
	PGresult   *res;
	bool		refuse;

	if (imp->o->common.tenant || source == NULL || source[0] == '\0')
		return;
	exec_ok(imp, "checking the tenant", single ? "SAVEPOINT convctx_tenant" : "BEGIN");
	res = PQexecParams(imp->conn, "SELECT convctx.current_tenant() OPERATOR(pg_catalog.=) ''"
					   " AND convctx.use_tenant($1) OPERATOR(pg_catalog.=) $1", 1, NULL, params, NULL, NULL, 0);
	refuse = PQresultStatus(res) == PGRES_TUPLES_OK && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	exec_ok(imp, "checking the tenant", single ? "ROLLBACK TO SAVEPOINT convctx_tenant" : "ROLLBACK");
	if (refuse)
	{
		fprintf(stderr, "%s: error: %s was exported from tenant \"%s\"; without --tenant this import "
				"would write it into tenant \"\"\n", progname, imp->input_name, source);
		fprintf(stderr, "HINT:  This role acts for any tenant: name the one to write into, "
				"--tenant=\"%s\" for the tenant it came from.\n", source);
		PQfinish(imp->conn);
		exit(EXIT_ERROR);
	}
}

/* The trailer's counts against what was read. */
static void
check_trailer(Importer *imp, LineRecord *rec, long lineno, long long *counts, bool unreadable)
{
	json_t	   *records = json_object_get(rec->value, "records");
	json_t	   *lines = json_object_get(rec->value, "lines");
	int			t;

	/* lines that could not be read have no type to count */
	for (t = 0; t < RECORD_TYPES && !unreadable; t++)
	{
		json_t	   *n = records ? json_object_get(records, record_types[t]) : NULL;

		if (!json_is_number(n) || json_number_value(n) != (double) counts[t])
		{
			line_error(imp, lineno, 0, "the trailer counts %g %s records, the file holds %lld",
					   json_is_number(n) ? json_number_value(n) : 0.0, record_types[t], counts[t]);
			importer_abort(imp);
		}
	}
	if (!json_is_number(lines) || json_number_value(lines) != (double) lineno)
	{
		line_error(imp, lineno, 0, "the trailer counts %g lines, the file has %ld",
				   json_is_number(lines) ? json_number_value(lines) : 0.0, lineno);
		importer_abort(imp);
	}
}

/*
 * A regular file must end with its trailer: checked before anything is
 * written, so that a file cut short writes nothing.
 */
static void
check_file_has_trailer(Importer *imp, FILE *in)
{
	struct stat st;
	long		from;
	char	   *tail;
	size_t		got;
	char	   *last;
	json_t	   *value;
	bool		ok = false;

	if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode))
		return;
	from = st.st_size > 65536 ? st.st_size - 65536 : 0;
	tail = malloc(65537);
	if (tail == NULL || fseek(in, from, SEEK_SET) != 0)
		return;
	got = fread(tail, 1, 65536, in);
	tail[got] = '\0';
	while (got > 0 && (tail[got - 1] == '\n' || tail[got - 1] == '\r'))
		tail[--got] = '\0';
	last = memrchr(tail, '\n', got);
	last = last ? last + 1 : tail;
	value = json_loadb(last, got - (last - tail), JSON_DECODE_INT_AS_REAL, NULL);
	if (value && json_is_string(json_object_get(value, "type")) &&
		strcmp(json_string_value(json_object_get(value, "type")), "end") == 0)
		ok = true;
	json_decref(value);
	/* a NUL byte in the last line is not a cut: the reading names it */
	if (memchr(last, '\0', got - (last - tail)) != NULL)
		ok = true;
	free(tail);
	if (fseek(in, 0, SEEK_SET) != 0)
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	if (!ok)
	{
		fprintf(stderr, "%s: error: %s has no trailer (its last line is not an \"end\" record): "
				"the file was cut short; nothing was imported\n", progname, imp->input_name);
		fprintf(stderr, "HINT:  --allow-truncated imports the complete conversations it holds.\n");
		PQfinish(imp->conn);
		exit(EXIT_ERROR);
	}
}

/*
 * Stray records (records outside their session's group), each with its
 * session's group when that was not sent yet: rejected once the group
 * being read is closed, since that group may go on after them.
 */
static Group **strays;
static int	nstrays;

/*
 * Close the group being read: queue it, or reject it when a line was bad;
 * then reject the strays read in it.
 */
static void
close_group(Importer *imp, Group **group, bool *bad)
{
	int			i;

	if (*group)
		*bad ? importer_reject(imp, *group) : importer_add(imp, *group);
	*group = NULL;
	*bad = false;
	for (i = 0; i < nstrays; i++)
		importer_reject(imp, strays[i]);
	nstrays = 0;
}

/* A stray record of session id: kept with its session's group to be rejected. */
static void
stray_record(Importer *imp, const char *id, const char *line, size_t len, long lineno)
{
	Group	   *g = NULL;
	char		where[WHERE_LEN];
	int			i;

	for (i = 0; i < nstrays && g == NULL; i++)
		if (strcmp(strays[i]->id, id) == 0)
			g = strays[i];
	if (g == NULL)
	{
		if ((g = importer_take_pending(imp, id)) == NULL)
		{
			fprintf(stderr, "%s: warning: if session \"%s\" came earlier in the file, it was written "
					"without the record of line %ld\n", progname, id, lineno);
			snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
			g = group_new(id, where);
		}
		if ((strays = realloc(strays, (nstrays + 1) * sizeof(Group *))) == NULL)
			fail(EXIT_ERROR, "out of memory");
		strays[nstrays++] = g;
	}
	group_add(g, line, len, lineno);
}

/*
 * A bad line: it belongs to the group being read (a new one when there is
 * none), which is rejected whole; by default that stops the import now.
 */
static void
bad_line(Importer *imp, Group **group, bool *bad, const char *id, const char *line,
		 size_t len, long lineno)
{
	char		where[WHERE_LEN];

	if (*group == NULL)
	{
		snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
		*group = group_new(id, where);
	}
	group_add(*group, line, len, lineno);
	*bad = true;
	if (imp->o->max_errors == 0)
		close_group(imp, group, bad);
}

/*
 * A line that starts as a session record does, read or not: it starts a
 * group of its own.
 */
static bool
starts_session(const char *line)
{
	return strncmp(line, "{\"type\": \"session\"", strlen("{\"type\": \"session\"")) == 0 ||
		strncmp(line, "{\"type\":\"session\"", strlen("{\"type\":\"session\"")) == 0;
}

/* Read a convctx.jsonl file: header, conversation groups, trailer. */
static void
import_convctx(Importer *imp, FILE *in)
{
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	long		lineno = 0;
	long long	counts[RECORD_TYPES] = {0};
	Group	   *group = NULL;
	bool		bad = false;
	bool		trailer = false;
	bool		unreadable = false;
	char		where[WHERE_LEN];

	if (!imp->o->allow_truncated)
		check_file_has_trailer(imp, in);

	while ((len = getline(&line, &cap, in)) != -1)
	{
		LineRecord rec;
		bool		last = line[len - 1] != '\n';	/* no newline: the end of the input */

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		/* a UTF-8 byte order mark before the header */
		if (lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
		{
			memmove(line, line + 3, len - 2);
			len -= 3;
		}
		if (trailer)
		{
			if (len == 0)
				continue;		/* an empty line at the end, as the trailer check allows */
			line_error(imp, lineno, 0, "a line after the trailer");
			importer_abort(imp);
		}
		/*
		 * A last line without its newline that is not a record, and holds
		 * no NUL byte (reported as such below), is where the file was cut
		 * (a killed export ends so): the end of the input.
		 */
		if (last && lineno > 1 && memchr(line, '\0', len) == NULL)
		{
			int			column;
			const char *message;

			if (!scan_jsonl_line(line, len, &rec.scanned, &column, &message))
			{
				fprintf(stderr, "%s:%ld:%d: warning: the last line has no newline and is not a complete "
						"record (%s): the file was cut short there\n",
						imp->input_name, lineno, column, message);
				imp->left_out++;
				if (starts_session(line))
					close_group(imp, &group, &bad);
				break;
			}
			scanned_line_free(&rec.scanned);
		}
		memset(&rec, 0, sizeof(rec));
		if (!parse_line(imp, line, len, lineno, &rec))
		{
			line_record_free(&rec);
			if (lineno == 1)
				importer_abort(imp);
			/* the group before a session record is not its */
			if (starts_session(line))
				close_group(imp, &group, &bad);
			bad_line(imp, &group, &bad, "", line, len, lineno);
			unreadable = true;
			continue;
		}
		if (lineno == 1 || rec.type == -1)
		{
			if (lineno != 1 || rec.type != -1)
			{
				line_error(imp, lineno, 0, lineno == 1 ?
						   "the first line must be the header of a convctx.jsonl file" :
						   "a second header");
				importer_abort(imp);
			}
			check_header(imp, &rec);
			check_source_tenant(imp, &rec);
			line_record_free(&rec);
			continue;
		}
		if (rec.type == -2)
		{
			close_group(imp, &group, &bad);
			check_trailer(imp, &rec, lineno, counts, unreadable);
			line_record_free(&rec);
			trailer = true;
			continue;
		}
		counts[rec.type]++;
		if (group != NULL && strcmp(group->id, rec.id) == 0 && rec.type != 0)
			group_add(group, line, len, lineno);	/* the group goes on */
		else if (rec.type == 0 || rec.type == 5)
		{
			/* a session, or a context of another conversation, starts a group */
			close_group(imp, &group, &bad);
			snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
			group = group_new(rec.id, where);
			group_add(group, line, len, lineno);
		}
		else if (bad && group != NULL && group->id[0] == '\0')
			group_add(group, line, len, lineno);	/* after a line that could not be read */
		else
		{
			/* a stray record: the group being read goes on */
			line_error(imp, lineno, 0, "a %s record of session \"%s\" outside that session's group "
					   "(the records of a session follow its session record)",
					   record_types[rec.type], rec.id);
			stray_record(imp, rec.id, line, len, lineno);
		}
		line_record_free(&rec);
	}
	if (ferror(in))
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	free(line);
	if (lineno == 0)
	{
		fprintf(stderr, "%s: error: %s is empty: no header\n", progname, imp->input_name);
		importer_abort(imp);
	}
	if (!trailer)
	{
		/* the last conversation may be the one cut: it is not imported */
		if (group)
			imp->left_out += group->n;
		if (!imp->o->allow_truncated)
		{
			fprintf(stderr, "%s: error: %s ends at line %ld without its trailer: it was cut short; "
					"the conversation it ends in was not imported\n",
					progname, imp->input_name, lineno);
			flush_pending(imp);
			importer_abort(imp);
		}
		if (group)
		{
			fprintf(stderr, "%s: warning: %s has no trailer: the conversation starting at %s, the last, "
					"may be cut short and was not imported\n", progname, imp->input_name, group->where);
			group_free(group);
			group = NULL;
		}
		close_group(imp, &group, &bad);	/* the strays read in it */
	}
}

int
import_main(int argc, char **argv)
{
	ImportOptions o;
	Importer	imp;
	FILE	   *in = stdin;

	parse_import_options(argc, argv, &o);
	memset(&imp, 0, sizeof(imp));
	imp.o = &o;
	imp.input_name = o.common.file && strcmp(o.common.file, "-") != 0 ? o.common.file : "<stdin>";

	if (o.identity_map_file)
	{
		json_error_t jerr;
		json_t	   *map = json_load_file(o.identity_map_file, JSON_REJECT_DUPLICATES, &jerr);
		const char *key;
		json_t	   *value;

		if (map == NULL)
			fail(EXIT_ERROR, "%s:%d:%d: %s", o.identity_map_file, jerr.line, jerr.column, jerr.text);
		if (!json_is_object(map))
			fail(EXIT_ERROR, "%s: an identity map is a JSON object {\"old\": \"new\", ...}",
				 o.identity_map_file);
		json_object_foreach(map, key, value)
			if (key[0] == '\0' || !json_is_string(value) || json_string_length(value) == 0)
				fail(EXIT_ERROR, "%s: an identity map maps identity ids to identity ids (non-empty strings)",
					 o.identity_map_file);
		imp.identity_map = json_dumps(map, JSON_COMPACT);
		json_decref(map);
	}
	if (!o.source_dsn && o.common.file && strcmp(o.common.file, "-") != 0 &&
		(in = fopen(o.common.file, "r")) == NULL)
		fail(EXIT_ERROR, "could not open \"%s\": %s", o.common.file, strerror(errno));
	if (o.reject_file && (imp.reject = fopen(o.reject_file, "w")) == NULL)
		fail(EXIT_ERROR, "could not open \"%s\" for writing: %s", o.reject_file, strerror(errno));

	imp.conn = connect_db(&o.common);
	/* times without a zone (Mastra's) are UTC */
	exec_ok(&imp, "setting the time zone", "SET TimeZone = 'UTC'");
	imp.started = imp.shown = now_seconds();
	if (o.single_transaction)
		begin_transaction(&imp);

	if (strcmp(o.from, "convctx") == 0)
	{
		if (o.source_dsn)
			fail(EXIT_ERROR, "--source-dsn reads another library's tables: use convctx import -f for a convctx.jsonl file");
		import_convctx(&imp, in);
	}
	else
		import_source(&imp, in);

	flush_pending(&imp);
	if (o.single_transaction)
		exec_ok(&imp, "committing", "COMMIT");
	if (imp.reject && fclose(imp.reject) != 0)
		fail(EXIT_ERROR, "could not write to \"%s\": %s", o.reject_file, strerror(errno));
	print_summary(&imp);
	PQfinish(imp.conn);
	return imp.rejected > 0 ? EXIT_REJECTED : EXIT_OK;
}
