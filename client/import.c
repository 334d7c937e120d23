/*-------------------------------------------------------------------------
 *
 * import.c
 *	  convctx import: conversations into a tenant, from a convctx.jsonl
 *	  file or from another store's history (sources.c): the command line,
 *	  and the run.
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
 * The parts, from the bottom: importer.c the groups, the counts and the
 * summary; import_send.c their queue, the batches sent to the server,
 * what it refuses, rejected conversations and stopping; import_jsonl.c the
 * reading of convctx.jsonl; sources.c and the source_*.c files the
 * histories of other stores; import.c, on top, the command line and the
 * run.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/import.c
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
#include "import.h"
#include "sources.h"
#include "util.h"

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

/* The identity map of --identity-map=file, checked, as compact JSON text. */
static char *
read_identity_map(const char *file)
{
	json_error_t jerr;
	json_t	   *map = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	const char *key;
	json_t	   *value;
	char	   *text;

	if (map == NULL)
		fail(EXIT_ERROR, "%s:%d:%d: %s", file, jerr.line, jerr.column, jerr.text);
	if (!json_is_object(map))
		fail(EXIT_ERROR, "%s: an identity map is a JSON object {\"old\": \"new\", ...}", file);
	json_object_foreach(map, key, value)
		if (key[0] == '\0' || !json_is_string(value) || json_string_length(value) == 0)
			fail(EXIT_ERROR, "%s: an identity map maps identity ids to identity ids (non-empty strings)",
				 file);
	text = json_dumps(map, JSON_COMPACT);
	json_decref(map);
	return text;
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
		imp.identity_map = read_identity_map(o.identity_map_file);
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
