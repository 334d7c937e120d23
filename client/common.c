/*-------------------------------------------------------------------------
 *
 * common.c
 *	  What every subcommand of the convctx tool shares: its common
 *	  options, the connection, running SQL, messages unless -q.
 *
 * Connection options are pg_dump's: -d takes a database name or a
 * connection string, -h -p -U, -w never prompts for a password, -W always
 * does, and the PG* environment variables and ~/.pgpass work as usual.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/common.c
 *
 *-------------------------------------------------------------------------
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "util.h"

/* A message on stderr unless -q. */
void
note(const CommonOptions *o, const char *fmt,...)
{
	va_list		ap;

	if (o->verbosity < 0)
		return;
	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Take getopt_long's option c when it is one of COMMON_LONG_OPTIONS (its
 * argument in optarg); false for any other.
 */
static bool
common_option(int c, CommonOptions *o)
{
	switch (c)
	{
		case 'd': o->dbname = optarg; return true;
		case 'h': o->host = optarg; return true;
		case 'p': o->port = optarg; return true;
		case 'U': o->user = optarg; return true;
		case 'w': o->prompt_password = -1; return true;
		case 'W': o->prompt_password = 1; return true;
		case 'f': o->file = optarg; return true;
		case 'P': o->progress = true; return true;
		case 'v': o->verbosity = 1; return true;
		case 'q': o->verbosity = -1; return true;
		case OPTION_TENANT: o->tenant = optarg; return true;
	}
	return false;
}

/*
 * An option c of a subcommand's getopt_long loop that the subcommand does
 * not take itself: one of COMMON_LONG_OPTIONS, else --help (its usage on
 * stdout, exit 0) or a wrong option (exit 1).
 */
void
other_option(int c, CommonOptions *o, char **argv, const char *command, void (*usage) (FILE *out))
{
	if (common_option(c, o))
		return;
	if (optopt == 0 && strcmp(argv[optind - 1], "--help") == 0)
	{
		usage(stdout);
		exit(EXIT_OK);
	}
	fprintf(stderr, "Try \"%s %s --help\" for more information.\n", progname, command);
	exit(EXIT_ERROR);
}

/* After getopt_long's loop: an argument that is not an option is an error. */
void
no_arguments_left(int argc, char **argv)
{
	if (optind < argc)
		fail(EXIT_ERROR, "unexpected argument \"%s\"", argv[optind]);
}

/* The password typed at the terminal; exit 1 when there is none to ask. */
static char *
read_password(void)
{
	char	   *typed = getpass("Password: ");

	if (typed == NULL)
		fail(EXIT_ERROR, "could not read a password from the terminal");
	return strdup(typed);
}

/*
 * Connect as pg_dump does, in client_encoding UTF8 whatever PGCLIENTENCODING
 * or the connection string say (the format is UTF-8; the server converts
 * to and from the database's encoding); exit 2 when that fails.
 */
PGconn *
connect_db(const CommonOptions *o)
{
	const char *keywords[8];
	const char *values[8];
	char	   *password = NULL;
	PGconn	   *conn;

	for (;;)
	{
		int			n = 0;

		keywords[n] = "host", values[n++] = o->host;
		keywords[n] = "port", values[n++] = o->port;
		keywords[n] = "user", values[n++] = o->user;
		keywords[n] = "password", values[n++] = password;
		keywords[n] = "dbname", values[n++] = o->dbname;
		keywords[n] = "fallback_application_name", values[n++] = progname;
		/* the format is UTF-8: after dbname, so that a connection string cannot change it */
		keywords[n] = "client_encoding", values[n++] = "UTF8";
		keywords[n] = NULL, values[n] = NULL;

		if (o->prompt_password > 0 && password == NULL)
			password = read_password();
		conn = PQconnectdbParams(keywords, values, 1);
		if (PQstatus(conn) == CONNECTION_OK)
			break;
		if (PQconnectionNeedsPassword(conn) && password == NULL && o->prompt_password >= 0 &&
			isatty(fileno(stdin)))
		{
			PQfinish(conn);
			password = read_password();
			continue;
		}
		fail(EXIT_CONNECTION, "%s", PQerrorMessage(conn));
	}
	free(password);
	return conn;
}

/*
 * Whether a server error stopped the work for a reason that is not in what
 * was sent: a cancel or statement timeout (57014), a shutdown (57P*), a lock
 * timeout (55P03), a deadlock or serialization failure (class 40), a lack
 * of resources (class 53), a system error (class 58). Running again may
 * succeed.
 */
bool
interrupted_error(const char *sqlstate)
{
	return sqlstate && (strncmp(sqlstate, "57", 2) == 0 || strncmp(sqlstate, "40", 2) == 0 ||
						strncmp(sqlstate, "53", 2) == 0 || strncmp(sqlstate, "58", 2) == 0 ||
						strcmp(sqlstate, "55P03") == 0);
}

/*
 * Run sql with text parameters; anything but the expected status ends the
 * tool: 2 when the connection is gone, 4 when the server was interrupted
 * (interrupted_error), 1 for any other error of the server (its message,
 * detail and hint, as psql prints them).
 */
PGresult *
run(PGconn *conn, const char *what, const char *sql, int nparams,
	const char *const *params, ExecStatusType expect)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	const char *detail;
	const char *hint;
	const char *sqlstate;

	if (PQresultStatus(res) == expect)
		return res;
	if (PQstatus(conn) != CONNECTION_OK)
		fail(EXIT_CONNECTION, "connection lost while %s: %s", what, PQerrorMessage(conn));
	detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	fprintf(stderr, "%s: error: %s: %s %s\n", progname, what, sqlstate ? sqlstate : "",
			PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
			: PQerrorMessage(conn));
	if (detail)
		fprintf(stderr, "DETAIL:  %s\n", detail);
	if (hint)
		fprintf(stderr, "HINT:  %s\n", hint);
	exit(interrupted_error(sqlstate) ? EXIT_INTERRUPTED : EXIT_ERROR);
}
