/*-------------------------------------------------------------------------
 *
 * common.h
 *	  What every subcommand of the convctx tool shares (common.c): the
 *	  options it takes, the connection they make, running SQL on it, and
 *	  the messages -q silences.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/common.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_COMMON_H
#define CONVCTX_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include <libpq-fe.h>

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

/* The options every subcommand takes, for its getopt_long table. */
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

extern void other_option(int c, CommonOptions *o, char **argv, const char *command,
						 void (*usage) (FILE *out));
extern void no_arguments_left(int argc, char **argv);
extern void note(const CommonOptions *o, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern PGconn *connect_db(const CommonOptions *o);
extern PGresult *run(PGconn *conn, const char *what, const char *sql, int nparams,
					 const char *const *params, ExecStatusType expect);
extern bool interrupted_error(const char *sqlstate);

#endif
