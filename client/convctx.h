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

#include <libpq-fe.h>

/* Exit codes, as the README documents them. */
#define EXIT_OK				0	/* everything done */
#define EXIT_ERROR			1	/* usage, file, or a server error that stopped the run */
#define EXIT_CONNECTION		2	/* could not connect, or the connection was lost */

/* The format of the files the tool writes and reads. */
#define JSONL_FORMAT		"convctx.jsonl"
#define JSONL_FORMAT_VERSION 1

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

/* main.c */
extern void fail(int code, const char *fmt,...) __attribute__((format(printf, 2, 3), noreturn));
extern void note(const CommonOptions *o, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern PGconn *connect_db(const CommonOptions *o);
extern PGresult *run(PGconn *conn, const char *what, const char *sql, int nparams,
					 const char *const *params, ExecStatusType expect);
extern double now_seconds(void);

/* export.c */
extern int	export_main(int argc, char **argv);

#endif
