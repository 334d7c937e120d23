/*-------------------------------------------------------------------------
 *
 * convctx.h
 *	  The convctx command-line tool's subcommands, as main.c calls them.
 *
 * The tool in layers, each using only the ones below it: util.h (errors,
 * memory), format.h (the names of convctx.jsonl) and common.h (options,
 * connection, SQL) at the bottom; jsonl_scan.h, import.h and sources.h
 * for the import; the subcommands (export.c, import.c); main.c on top.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/convctx.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CLI_H
#define CONVCTX_CLI_H

/* Each takes the arguments after the subcommand's name, and returns the exit code. */
extern int	export_main(int argc, char **argv);	/* export.c */
extern int	import_main(int argc, char **argv);	/* import.c */

#endif
