/*-------------------------------------------------------------------------
 *
 * convctx.h
 *	  The convctx command-line tool: what its parts share.
 *
 * A client program: libpq for the server, jansson for the JSON it writes
 * itself (headers and trailers). No PostgreSQL server header is included:
 * jansson and utils/builtins.h declare the same names.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/convctx.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CLI_H
#define CONVCTX_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>
#include <libpq-fe.h>

/* Exit codes, as the README documents them. */
#define EXIT_OK				0	/* everything done */
#define EXIT_ERROR			1	/* usage, file, or a server error that stopped the run */
#define EXIT_CONNECTION		2	/* could not connect, or the connection was lost */
#define EXIT_REJECTED		3	/* import done, but conversations were rejected */
#define EXIT_INTERRUPTED	4	/* the server stopped the work: a cancel, a timeout, ... */

/* "FILE:LINE" of a record: a path and a number */
#define WHERE_LEN			(4096 + 32)

/* The format of the files the tool writes and reads. */
#define JSONL_FORMAT		"convctx.jsonl"
#define JSONL_FORMAT_VERSION 1

/* Its record types, in the order its trailer counts them (main.c). */
#define RECORD_TYPES		6
extern const char *const record_types[RECORD_TYPES + 1];	/* NULL-terminated */
extern const char *const record_types_plural[RECORD_TYPES + 1];

/* Options every subcommand takes. */
typedef struct CommonOptions
{
	const char *dbname;			/* -d: a name or a connection string */
	const char *host;
	const char *port;
	const char *user;
	int			prompt_password;	/* -w: -1 never, -W: 1 always, else 0 */
	const char *tenant;			/* --tenant: convctx.use_tenant() first */
	const char *file;			/* -f: NULL or "-" for stdout/stdin */
	bool		progress;		/* -P */
	int			verbosity;		/* -q: -1, default 0, -v: 1 */
} CommonOptions;

extern const char *progname;

/* The options every subcommand takes, for its getopt_long table (main.c). */
#define COMMON_LONG_OPTIONS \
	{"dbname", required_argument, NULL, 'd'}, \
	{"host", required_argument, NULL, 'h'}, \
	{"port", required_argument, NULL, 'p'}, \
	{"username", required_argument, NULL, 'U'}, \
	{"no-password", no_argument, NULL, 'w'}, \
	{"password", no_argument, NULL, 'W'}, \
	{"file", required_argument, NULL, 'f'}, \
	{"progress", no_argument, NULL, 'P'}, \
	{"verbose", no_argument, NULL, 'v'}, \
	{"quiet", no_argument, NULL, 'q'}, \
	{"help", no_argument, NULL, '?'}, \
	{"tenant", required_argument, NULL, OPTION_TENANT}
#define OPTION_TENANT 1
#define COMMON_SHORT_OPTIONS "d:h:p:U:wWf:Pvq"

/* main.c */
extern void fail(int code, const char *fmt,...) __attribute__((format(printf, 2, 3), noreturn));
extern void note(const CommonOptions *o, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern PGconn *connect_db(const CommonOptions *o);
extern PGresult *run(PGconn *conn, const char *what, const char *sql, int nparams,
					 const char *const *params, ExecStatusType expect);
extern double now_seconds(void);
extern bool common_option(int c, CommonOptions *o);
extern void other_option(int c, CommonOptions *o, char **argv, const char *command,
						 void (*usage) (FILE *out));
extern void no_arguments_left(int argc, char **argv);
extern bool interrupted_error(const char *sqlstate);

/* export.c */
extern int	export_main(int argc, char **argv);

/* import.c */
typedef struct ImportOptions
{
	CommonOptions common;
	const char *from;			/* --from: the source format */
	const char *source_dsn;		/* read a library's tables from this database */
	const char *source_table;
	const char *source_schema;
	const char *session_id;		/* --session: for a messages file without ids */
	const char *on_conflict;	/* skip or error */
	const char *as_identity;
	const char *identity_map_file;
	bool		allow_anonymous;
	bool		allow_truncated;
	bool		single_transaction;
	long		max_errors;		/* -1: no limit */
	long		batch_size;
	const char *reject_file;
} ImportOptions;

/*
 * What a record made from another source (sources.c) was made of, for
 * its errors: they name what the source holds, not the values made here.
 */
typedef struct RecordOrigin
{
	char	   *made_of;		/* "message 3 (id \"m1\", created_at \"...\") ..." */
	char	   *generated;		/* a value made here (a turn id), or NULL */
	char	   *generated_as;	/* what to name it by instead */
} RecordOrigin;

/* A conversation's records, as lines of convctx.jsonl. */
typedef struct Group
{
	char	   *id;				/* its session or conversation id */
	char	   *where;			/* where it starts, for messages */
	int			n;
	int			cap;
	char	  **lines;
	size_t	   *lens;
	long	   *linenos;		/* line of each record in the input, or 0 */
	RecordOrigin *origins;		/* of records made from a source, or NULL */
} Group;

#define MAX_DROPPED 16

typedef struct Importer
{
	const ImportOptions *o;
	PGconn	   *conn;
	const char *input_name;
	char	   *identity_map;	/* the map as JSON text, or NULL */
	FILE	   *reject;
	Group	  **pending;		/* complete groups not sent yet */
	int			npending;
	int			cap_pending;
	long		pending_records;
	Group	  **inflight;		/* the batch sent, its result not read yet */
	int			ninflight;
	int			cap_inflight;
	long long	imported[6];
	long long	skipped[6];
	long long	metadata_keys_dropped;
	long long	rejected;		/* conversations */
	long long	anonymous_undated;	/* anonymous, given the import's time */
	long long	records_sent;	/* in calls that succeeded */
	long long	rejected_records;	/* of the conversations rejected */
	long long	left_out;		/* the end of a file cut short, not imported */
	char	   *skip_reasons[MAX_DROPPED];	/* why records were skipped, as the server says */
	long long	skip_counts[MAX_DROPPED];
	int			nskip;
	const char *dropped_names[MAX_DROPPED];	/* what a source holds and convctx does not */
	long long	dropped_counts[MAX_DROPPED];
	int			ndropped;
	const char *warning_names[MAX_DROPPED];	/* what was changed to be imported */
	long long	warning_counts[MAX_DROPPED];
	char	   *warning_first[MAX_DROPPED];	/* the first of each, as the source has it */
	int			nwarnings;
	double		started;
	double		shown;
} Importer;

extern int	import_main(int argc, char **argv);
extern Group *group_new(const char *id, const char *where);
extern void group_add(Group *g, const char *line, size_t len, long lineno);
extern void group_add_json(Group *g, json_t *record, long lineno, RecordOrigin *origin);
extern void importer_add(Importer *imp, Group *g);
extern void importer_reject(Importer *imp, Group *g);
extern Group *importer_take_pending(Importer *imp, const char *id);
extern void importer_count_dropped(Importer *imp, const char *what, long long n);
extern void importer_count_warning(Importer *imp, const char *what, char *first);
extern void importer_abort(Importer *imp) __attribute__((noreturn));
extern void importer_stop(Importer *imp) __attribute__((noreturn));

/* jsonl_scan.c: a line's strict check, and the strings grouping needs */
typedef struct ScannedLine
{
	char	   *type;
	char	   *session_id;
	char	   *conversation_id;
} ScannedLine;

extern bool scan_jsonl_line(const char *line, size_t len, ScannedLine *out, int *column,
							const char **message);
extern void scanned_line_free(ScannedLine *l);

/* sources.c */
extern void import_source(Importer *imp, FILE *in);

#endif
