/*-------------------------------------------------------------------------
 *
 * main.c
 *	  The convctx command-line tool: which subcommand runs.
 *
 *	  convctx export [OPTION]...	write a tenant's conversations as
 *									convctx.jsonl (export.c)
 *	  convctx import [OPTION]...	write conversations into a tenant
 *									(import.c, sources.c)
 *
 * What the subcommands share is below them: common.c (options,
 * connection, SQL), util.c (errors, memory), format.c (the record types).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/main.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <string.h>

#include "convctx.h"
#include "util.h"

static void
usage(FILE *out)
{
	fprintf(out,
			"%s moves conversations stored by the convctx extension in and out of PostgreSQL.\n\n"
			"Usage:\n"
			"  %s export [OPTION]...   write a tenant's conversations as convctx.jsonl\n"
			"  %s import [OPTION]...   write conversations into a tenant: convctx.jsonl, or\n"
			"                          another library's history\n"
			"  %s --help | --version\n\n"
			"\"%s export --help\" and \"%s import --help\" list the options.\n"
			"Exit status: 0 done, 1 error (usage, file, server), 2 connection failed or lost,\n"
			"3 import done but conversations were rejected, 4 interrupted by the server (a\n"
			"cancel, a timeout, a deadlock, a shutdown, a lack of resources): run it again.\n",
			progname, progname, progname, progname, progname, progname);
}

int
main(int argc, char **argv)
{
	if (argc < 2)
	{
		usage(stderr);
		return EXIT_ERROR;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0)
	{
		usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
	{
		printf("%s (convctx) %s\n", progname, CONVCTX_VERSION);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "import") == 0)
	{
		argv[1] = "convctx import";
		return import_main(argc - 1, argv + 1);
	}
	if (strcmp(argv[1], "export") == 0)
	{
		argv[1] = "convctx export";	/* how getopt names the tool in its messages */
		return export_main(argc - 1, argv + 1);
	}
	fprintf(stderr, "%s: error: unknown command \"%s\"\n", progname, argv[1]);
	usage(stderr);
	return EXIT_ERROR;
}
