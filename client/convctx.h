/*-------------------------------------------------------------------------
 *
 * convctx.h
 *	  The convctx command-line tool: what every part shares (main.c's
 *	  errors, options and connection, the format's names).
 *
 * A client program: libpq for the server, jansson for the JSON it writes
 * itself (headers and trailers). No PostgreSQL server header is included:
 * jansson and utils/builtins.h declare the same names. Each part has a
 * header of its own: import.h, jsonl_scan.h, sources.h.
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
#define RECORD_TYPES		7
extern const char *const record_types[RECORD_TYPES + 1];	/* NULL-terminated */
extern int	record_type(const char *name);

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
extern void *xmalloc(size_t size);
extern void *xcalloc(size_t n, size_t size);
extern void *xrealloc(void *p, size_t size);
extern char *xstrdup(const char *s);
extern char *xsprintf(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern void append_text(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
extern void other_option(int c, CommonOptions *o, char **argv, const char *command,
						 void (*usage) (FILE *out));
extern void no_arguments_left(int argc, char **argv);
extern bool interrupted_error(const char *sqlstate);

/* the subcommands: export.c, import.c */
extern int	export_main(int argc, char **argv);
extern int	import_main(int argc, char **argv);

#endif
