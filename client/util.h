/*-------------------------------------------------------------------------
 *
 * util.h
 *	  The convctx command-line tool's base (util.c): its name, its exit
 *	  codes, errors that end it, and memory that ends it when there is none.
 *
 * Every other file of client/ stands on this one; it uses only the C
 * library. A client program: no PostgreSQL server header is included
 * anywhere in client/ (jansson and utils/builtins.h declare the same
 * names).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_UTIL_H
#define CONVCTX_UTIL_H

#include <stddef.h>

/* Exit codes, as the README documents them. */
#define EXIT_OK				0	/* everything done */
#define EXIT_ERROR			1	/* usage, file, or a server error that stopped the run */
#define EXIT_CONNECTION		2	/* could not connect, or the connection was lost */
#define EXIT_REJECTED		3	/* import done, but conversations were rejected */
#define EXIT_INTERRUPTED	4	/* the server stopped the work: a cancel, a timeout, ... */

/* How the tool names itself in its messages. */
extern const char *progname;

extern void fail(int code, const char *fmt,...) __attribute__((format(printf, 2, 3), noreturn));
extern void *xmalloc(size_t size);
extern void *xcalloc(size_t n, size_t size);
extern void *xrealloc(void *p, size_t size);
extern char *xstrdup(const char *s);
extern char *xsprintf(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern void append_text(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
extern double now_seconds(void);

#endif
