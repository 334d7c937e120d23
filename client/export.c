/*-------------------------------------------------------------------------
 *
 * export.c
 *	  convctx export: a tenant's conversations as convctx.jsonl.
 *
 * The file is a header line, the records convctx.export_records() builds
 * on the server (written as received: no value is parsed or re-encoded
 * here, so numbers and text keep every digit and character), and a
 * trailer with the count of each record type; a file without its trailer
 * was cut short. Everything is read in one repeatable read, read-only
 * transaction (one snapshot), through a cursor a batch at a time, so the
 * tool's memory does not grow with the export. The cursor calls the
 * function in its select list, not in FROM (where the executor would
 * gather every row before the first is sent): the server builds the
 * records as they are fetched. Times are in UTC.
 *
 * --format=messages writes instead a line per conversation with its
 * current, live turns as user and assistant messages
 * (convctx.export_messages()), without header or trailer: the shape chat
 * APIs take, for moving conversations to another system.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/export.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common.h"
#include "convctx.h"
#include "format.h"
#include "util.h"

/* Rows fetched from the server at a time. */
#define FETCH_ROWS "1000"

typedef struct ExportOptions
{
	CommonOptions common;
	const char *session_id;
	const char *identity_id;
	const char *since;
	const char *until;
	bool		messages;		/* --format=messages */
} ExportOptions;

static void
export_usage(FILE *out)
{
	fprintf(out,
			"%s export writes every conversation of a tenant, or those chosen, as convctx.jsonl.\n\n"
			"Usage:\n  %s export [OPTION]...\n\n"
			"Choosing conversations (default: all of the tenant):\n"
			"  --session=ID         one conversation\n"
			"  --identity=ID        the conversations linked to an identity, and the contexts\n"
			"                       saved under it (a data subject's export)\n"
			"  --since=TIME         conversations active at or after TIME\n"
			"  --until=TIME         conversations created before TIME\n\n"
			"Output:\n"
			"  -f, --file=FILE      write to FILE (default: standard output)\n"
			"  --format=FORMAT      convctx (default): every stored row, as convctx.jsonl;\n"
			"                       messages: a line per conversation with its current turns\n"
			"                       as user and assistant messages\n"
			"  -P, --progress       show records, records/s and elapsed time on stderr\n"
			"  -v, --verbose        say what is done\n"
			"  -q, --quiet          no messages but errors\n\n"
			"Connection (as pg_dump):\n"
			"  -d, --dbname=CONNSTR database name or connection string\n"
			"  -h, --host=HOST      -p, --port=PORT      -U, --username=USER\n"
			"  -w, --no-password    -W, --password\n"
			"  --tenant=TENANT      the tenant, for a role bound to every tenant\n\n"
			"The role must be a member of convctx_admin.\n"
			"Exit status: 0 done, 1 error, 2 connection failed or lost, 4 interrupted by the\n"
			"server (a cancel, a timeout, a shutdown, a lack of resources): run it again.\n",
			progname, progname);
}

static void
parse_export_options(int argc, char **argv, ExportOptions *o)
{
	static const struct option longopts[] = {
		COMMON_LONG_OPTIONS,
		{"session", required_argument, NULL, 2},
		{"identity", required_argument, NULL, 3},
		{"since", required_argument, NULL, 4},
		{"until", required_argument, NULL, 5},
		{"format", required_argument, NULL, 6},
		{NULL, 0, NULL, 0}
	};
	int			c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, COMMON_SHORT_OPTIONS "?", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 2: o->session_id = optarg; break;
			case 3: o->identity_id = optarg; break;
			case 4: o->since = optarg; break;
			case 5: o->until = optarg; break;
			case 6:
				if (strcmp(optarg, "messages") == 0)
					o->messages = true;
				else if (strcmp(optarg, "convctx") != 0)
					fail(EXIT_ERROR, "unknown format \"%s\" (convctx or messages)", optarg);
				break;
			default:
				other_option(c, &o->common, argv, "export", export_usage);
				break;
		}
	}
	no_arguments_left(argc, argv);
}

/* A string value for a JSON object: the text, or null. */
static json_t *
json_text_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Write one JSON value made here (header, trailer) as a line. */
static void
write_json_line(FILE *out, json_t *value)
{
	if (json_dumpf(value, out, JSON_PRESERVE_ORDER) != 0 || fputc('\n', out) == EOF)
		fail(EXIT_ERROR, "could not write: %s", strerror(errno));
	json_decref(value);
}

/*
 * The header: what the file is, where and when it came from, and which
 * conversations it holds. Values read from the server in the transaction.
 */
static void
write_header(FILE *out, PGconn *conn, const ExportOptions *o)
{
	PGresult   *res = run(conn, "reading the server's settings",
						  "SELECT pg_catalog.to_json(pg_catalog.transaction_timestamp())::pg_catalog.text,"
						  "       (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'convctx'),"
						  "       convctx.current_tenant()",
						  0, NULL, PGRES_TUPLES_OK);
	json_t	   *exported_at = json_loads(PQgetvalue(res, 0, 0), JSON_DECODE_ANY, NULL);
	json_t	   *filters = json_object();
	json_t	   *header = json_object();

	if (o->session_id)
		json_object_set_new(filters, "session_id", json_string(o->session_id));
	if (o->identity_id)
		json_object_set_new(filters, "identity_id", json_string(o->identity_id));
	if (o->since)
		json_object_set_new(filters, "since", json_string(o->since));
	if (o->until)
		json_object_set_new(filters, "until", json_string(o->until));
	json_object_set_new(header, "type", json_string("header"));
	json_object_set_new(header, "format", json_string(JSONL_FORMAT));
	json_object_set_new(header, "format_version", json_integer(JSONL_FORMAT_VERSION));
	json_object_set_new(header, "exported_at", exported_at);
	json_object_set_new(header, "convctx_version", json_text_or_null(PQgetvalue(res, 0, 1)));
	json_object_set_new(header, "server_version",
						json_text_or_null(PQparameterStatus(conn, "server_version")));
	json_object_set_new(header, "source", json_string("convctx"));
	json_object_set_new(header, "source_tenant", json_string(PQgetvalue(res, 0, 2)));
	json_object_set_new(header, "filters", filters);
	write_json_line(out, header);
	PQclear(res);
}

static void
show_progress(long long records, double started, bool last)
{
	double		elapsed = now_seconds() - started;

	fprintf(stderr, "\r%s: %lld records, %.0f records/s, %.1f s%s", progname, records,
			elapsed > 0 ? records / elapsed : 0.0, elapsed, last ? "\n" : "");
}

/*
 * Write the records of the cursor "records" (record_type, line) and count
 * them per type into counts (indexed as record_types).
 */
static long long
write_records(FILE *out, PGconn *conn, const ExportOptions *o, long long *counts)
{
	double		started = now_seconds();
	double		shown = started;
	long long	total = 0;

	for (;;)
	{
		PGresult   *res = run(conn, "reading the records", "FETCH " FETCH_ROWS " FROM records",
							  0, NULL, PGRES_TUPLES_OK);
		int			n = PQntuples(res);
		int			i;

		for (i = 0; i < n; i++)
		{
			const char *type = PQgetvalue(res, i, 0);
			int			t = record_type(type);

			if (t == RECORD_TYPES && !o->messages)
				fail(EXIT_ERROR, "the server sent a record of unknown type \"%s\"", type);
			if (t < RECORD_TYPES)
				counts[t]++;
			if (fwrite(PQgetvalue(res, i, 1), 1, PQgetlength(res, i, 1), out) != (size_t) PQgetlength(res, i, 1) ||
				fputc('\n', out) == EOF)
				fail(EXIT_ERROR, "could not write: %s", strerror(errno));
		}
		total += n;
		PQclear(res);
		if (o->common.progress && now_seconds() - shown >= 1.0)
		{
			show_progress(total, started, false);
			shown = now_seconds();
		}
		if (n == 0)
			break;
	}
	if (o->common.progress)
		show_progress(total, started, true);
	return total;
}

static void
write_trailer(FILE *out, long long *counts, long long total)
{
	json_t	   *records = json_object();
	json_t	   *trailer = json_object();
	int			t;

	for (t = 0; record_types[t]; t++)
		json_object_set_new(records, record_types[t], json_integer(counts[t]));
	json_object_set_new(trailer, "type", json_string("end"));
	json_object_set_new(trailer, "records", records);
	/* every line of the file: header, records, this one */
	json_object_set_new(trailer, "lines", json_integer(total + 2));
	write_json_line(out, trailer);
}

int
export_main(int argc, char **argv)
{
	ExportOptions o;
	PGconn	   *conn;
	FILE	   *out = stdout;
	long long	counts[RECORD_TYPES] = {0};
	long long	total;
	const char *params[4];

	parse_export_options(argc, argv, &o);
	conn = connect_db(&o.common);
	if (o.common.file && strcmp(o.common.file, "-") != 0 &&
		(out = fopen(o.common.file, "w")) == NULL)
		fail(EXIT_ERROR, "could not open \"%s\" for writing: %s", o.common.file, strerror(errno));

	PQclear(run(conn, "starting the transaction",
				"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, PGRES_COMMAND_OK));
	PQclear(run(conn, "setting the time zone", "SET LOCAL TimeZone = 'UTC'", 0, NULL,
				PGRES_COMMAND_OK));
	if (o.common.tenant)
	{
		params[0] = o.common.tenant;
		PQclear(run(conn, "choosing the tenant", "SELECT convctx.use_tenant($1)", 1, params,
					PGRES_TUPLES_OK));
	}
	if (!o.messages)
		write_header(out, conn, &o);
	params[0] = o.session_id;
	params[1] = o.identity_id;
	params[2] = o.since;
	params[3] = o.until;
	PQclear(run(conn, "starting the export",
				o.messages ?
				"DECLARE records NO SCROLL CURSOR FOR"
				" SELECT (e.r).record_type, (e.r).line FROM (SELECT convctx.export_messages($1, $2,"
				" $3::pg_catalog.timestamptz, $4::pg_catalog.timestamptz) AS r) e" :
				"DECLARE records NO SCROLL CURSOR FOR"
				" SELECT (e.r).record_type, (e.r).line FROM (SELECT convctx.export_records($1, $2,"
				" $3::pg_catalog.timestamptz, $4::pg_catalog.timestamptz) AS r) e",
				4, params, PGRES_COMMAND_OK));
	total = write_records(out, conn, &o, counts);
	if (!o.messages)
		write_trailer(out, counts, total);
	PQclear(run(conn, "ending the transaction", "COMMIT", 0, NULL, PGRES_COMMAND_OK));
	PQfinish(conn);

	if (fflush(out) != 0 || (out != stdout && fclose(out) != 0))
		fail(EXIT_ERROR, "could not write: %s", strerror(errno));
	if (o.common.verbosity > 0)
		note(&o.common, "exported %lld records", total);
	return EXIT_OK;
}
