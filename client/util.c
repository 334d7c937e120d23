/*-------------------------------------------------------------------------
 *
 * util.c
 *	  The convctx command-line tool's base: errors that end it, memory
 *	  that ends it when there is none, the time.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/util.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* vasprintf */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

const char *progname = "convctx";

/* Print "convctx: message" on stderr and exit with code. */
void
fail(int code, const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: error: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* malloc, calloc, realloc and strdup that end the tool when out of memory */
void *
xmalloc(size_t size)
{
	void	   *p = malloc(size);

	if (p == NULL)
		fail(EXIT_ERROR, "out of memory");
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void	   *p = calloc(n, size);

	if (p == NULL)
		fail(EXIT_ERROR, "out of memory");
	return p;
}

void *
xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (p == NULL)
		fail(EXIT_ERROR, "out of memory");
	return p;
}

/* s copied; NULL stays NULL. */
char *
xstrdup(const char *s)
{
	char	   *d;

	if (s == NULL)
		return NULL;
	d = strdup(s);
	if (d == NULL)
		fail(EXIT_ERROR, "out of memory");
	return d;
}

/* fmt formatted, malloc'd. */
char *
xsprintf(const char *fmt,...)
{
	va_list		ap;
	char	   *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fail(EXIT_ERROR, "out of memory");
	va_end(ap);
	return s;
}

/* Append len bytes of s to the malloc'd string *buf (of length *len, room *cap). */
void
append_text(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap)
	{
		*cap = (*len + n + 1) * 2;
		*buf = xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Seconds on a clock that only goes forward. */
double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
