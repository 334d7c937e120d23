/*-------------------------------------------------------------------------
 *
 * jsonl_scan.c
 *	  A one-pass check of a line of convctx.jsonl, for convctx import.
 *
 * The server parses every record with jsonb's own parser, so the tool
 * does not need a tree of the line: only to know that it is one JSON
 * object, strict (RFC 8259, UTF-8), with no key twice in any object (jsonb
 * would keep the last silently), no \u0000 (PostgreSQL text cannot hold
 * it) and no NUL byte, and its "type" and conversation id, to group the
 * records. Building that tree with jansson costs about ten times as much
 * as this scan, and the tool reads every line of a file of millions.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/jsonl_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl_scan.h"
#include "util.h"

/* Deepest nesting taken (jansson's limit too). */
#define MAX_DEPTH 2048

/* A key of an object being scanned, decoded. */
typedef struct Key
{
	const char *s;
	size_t		len;
	bool		owned;			/* s was decoded into memory of its own */
} Key;

typedef struct Scanner
{
	const char *p;
	const char *start;
	const char *end;
	const char *error;			/* NULL until something is wrong */
	const char *error_at;
	char		message[160];
	Key		   *keys;			/* the keys of the open objects, stacked */
	size_t		nkeys;
	size_t		cap;
	int			depth;
} Scanner;

static bool
fail_at(Scanner *sc, const char *at, const char *message)
{
	if (sc->error == NULL)
	{
		sc->error = message;
		sc->error_at = at;
	}
	return false;
}

static void
skip_space(Scanner *sc)
{
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
		sc->p++;
}

/* Length of the UTF-8 sequence at p (valid, shortest form, no surrogate), or 0. */
static int
utf8_length(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	int			n;
	uint32_t	cp;
	int			i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if (end - p < n)
		return 0;
	for (i = 1; i < n; i++)
	{
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		(cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

static int
hex4(const char *p)
{
	int			v = 0;
	int			i;

	for (i = 0; i < 4; i++)
	{
		char		c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* Append code point cp to buf as UTF-8. */
static size_t
put_utf8(char *buf, uint32_t cp)
{
	if (cp < 0x80)
		return buf[0] = (char) cp, 1;
	if (cp < 0x800)
		return buf[0] = (char) (0xC0 | (cp >> 6)), buf[1] = (char) (0x80 | (cp & 0x3F)), 2;
	if (cp < 0x10000)
		return buf[0] = (char) (0xE0 | (cp >> 12)), buf[1] = (char) (0x80 | ((cp >> 6) & 0x3F)),
			buf[2] = (char) (0x80 | (cp & 0x3F)), 3;
	buf[0] = (char) (0xF0 | (cp >> 18));
	buf[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	buf[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	buf[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

/* The escape at sc->p (a backslash in a string) checked, and stepped over. */
static bool
scan_escape(Scanner *sc)
{
	int			u;
	int			lo;

	if (sc->p + 1 >= sc->end)
		return fail_at(sc, sc->p, "unfinished string");
	switch (sc->p[1])
	{
		case '"':
		case '\\':
		case '/':
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't':
			sc->p += 2;
			return true;
		case 'u':
			break;
		default:
			return fail_at(sc, sc->p, "invalid escape in a string");
	}
	if (sc->end - sc->p < 6 || (u = hex4(sc->p + 2)) < 0)
		return fail_at(sc, sc->p, "invalid \\u escape");
	if (u == 0)
		return fail_at(sc, sc->p, "\\u0000 is not allowed: PostgreSQL text cannot hold the NUL character");
	if (u >= 0xDC00 && u <= 0xDFFF)
		return fail_at(sc, sc->p, "a low surrogate \\u escape without a high one");
	if (u >= 0xD800 && u <= 0xDBFF)
	{
		if (sc->end - sc->p < 12 || sc->p[6] != '\\' || sc->p[7] != 'u' ||
			(lo = hex4(sc->p + 8)) < 0xDC00 || lo > 0xDFFF)
			return fail_at(sc, sc->p, "a high surrogate \\u escape without a low one");
		sc->p += 6;
	}
	sc->p += 6;
	return true;
}

/* The value of the string s..end (checked, with escapes), malloc'd; its length in *len. */
static char *
decode_string(const char *s, const char *end, size_t *len)
{
	char	   *buf = xmalloc(end - s + 1);
	const char *q = s;
	size_t		n = 0;

	while (q < end)
	{
		if (*q != '\\')
		{
			buf[n++] = *q++;
			continue;
		}
		switch (q[1])
		{
			case 'b': buf[n++] = '\b'; q += 2; break;
			case 'f': buf[n++] = '\f'; q += 2; break;
			case 'n': buf[n++] = '\n'; q += 2; break;
			case 'r': buf[n++] = '\r'; q += 2; break;
			case 't': buf[n++] = '\t'; q += 2; break;
			case 'u':
				{
					uint32_t	cp = (uint32_t) hex4(q + 2);

					q += 6;
					if (cp >= 0xD800 && cp <= 0xDBFF)
					{
						cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t) hex4(q + 2) - 0xDC00);
						q += 6;
					}
					n += put_utf8(buf + n, cp);
					break;
				}
			default: buf[n++] = q[1]; q += 2; break;
		}
	}
	*len = n;
	return buf;
}

/*
 * A string, sc->p at its opening quote. With out, its decoded value: a
 * pointer into the line when it has no escape, else malloc'd (*owned).
 */
static bool
scan_string(Scanner *sc, const char **out, size_t *outlen, bool *owned)
{
	const char *s = ++sc->p;
	bool		escaped = false;

	while (sc->p < sc->end && *sc->p != '"')
	{
		unsigned char c = (unsigned char) *sc->p;

		if (c == '\\')
		{
			escaped = true;
			if (!scan_escape(sc))
				return false;
		}
		else if (c < 0x20)
			return fail_at(sc, sc->p, "a control character in a string");
		else
		{
			int			n = utf8_length((const unsigned char *) sc->p, (const unsigned char *) sc->end);

			if (n == 0)
				return fail_at(sc, sc->p, "invalid UTF-8");
			sc->p += n;
		}
	}
	if (sc->p >= sc->end)
		return fail_at(sc, s - 1, "unfinished string");
	if (out)
	{
		*owned = escaped;
		if (!escaped)
		{
			*out = s;
			*outlen = sc->p - s;
		}
		else
			*out = decode_string(s, sc->p, outlen);
	}
	sc->p++;
	return true;
}

static bool
scan_number(Scanner *sc)
{
	const char *s = sc->p;

	if (sc->p < sc->end && *sc->p == '-')
		sc->p++;
	if (sc->p >= sc->end)
		return fail_at(sc, s, "invalid number");
	if (*sc->p == '0')
		sc->p++;
	else if (*sc->p >= '1' && *sc->p <= '9')
		while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
			sc->p++;
	else
		return fail_at(sc, s, "invalid number");
	if (sc->p < sc->end && *sc->p == '.')
	{
		sc->p++;
		if (sc->p >= sc->end || *sc->p < '0' || *sc->p > '9')
			return fail_at(sc, s, "invalid number");
		while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
			sc->p++;
	}
	if (sc->p < sc->end && (*sc->p == 'e' || *sc->p == 'E'))
	{
		sc->p++;
		if (sc->p < sc->end && (*sc->p == '+' || *sc->p == '-'))
			sc->p++;
		if (sc->p >= sc->end || *sc->p < '0' || *sc->p > '9')
			return fail_at(sc, s, "invalid number");
		while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
			sc->p++;
	}
	return true;
}

static bool scan_value(Scanner *sc, ScannedLine *top, bool is_top);

static int
key_cmp(const void *a, const void *b)
{
	const Key  *x = a;
	const Key  *y = b;
	int			c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* 1 when the keys from first on hold one twice; *dup is one of them. */
static bool
has_duplicate(Scanner *sc, size_t first, Key *dup)
{
	size_t		n = sc->nkeys - first;
	size_t		i,
				j;
	Key		   *k = sc->keys + first;

	if (n <= 16)
	{
		for (i = 1; i < n; i++)
			for (j = 0; j < i; j++)
				if (k[i].len == k[j].len && memcmp(k[i].s, k[j].s, k[i].len) == 0)
					return *dup = k[i], true;
		return false;
	}
	qsort(k, n, sizeof(Key), key_cmp);
	for (i = 1; i < n; i++)
		if (key_cmp(&k[i - 1], &k[i]) == 0)
			return *dup = k[i], true;
	return false;
}

/* Push key k of the object being scanned onto the key stack. */
static void
push_key(Scanner *sc, Key k)
{
	if (sc->nkeys == sc->cap)
	{
		sc->cap = sc->cap ? sc->cap * 2 : 64;
		sc->keys = xrealloc(sc->keys, sc->cap * sizeof(Key));
	}
	sc->keys[sc->nkeys++] = k;
}

/* Whether k is a key whose string value, at the top level, the tool reads. */
static bool
read_key(Key k)
{
	return (k.len == 4 && memcmp(k.s, "type", 4) == 0) ||
		(k.len == 10 && memcmp(k.s, "session_id", 10) == 0) ||
		(k.len == 15 && memcmp(k.s, "conversation_id", 15) == 0);
}

/* The string at sc->p, the value of read_key k: into its place in *top. */
static bool
scan_read_value(Scanner *sc, ScannedLine *top, Key k)
{
	const char *v;
	size_t		vlen;
	bool		owned;
	char	   *copy;
	char	  **to;

	if (!scan_string(sc, &v, &vlen, &owned))
		return false;
	copy = xmalloc(vlen + 1);
	memcpy(copy, v, vlen);
	copy[vlen] = '\0';
	if (owned)
		free((char *) v);
	to = k.s[0] == 't' ? &top->type : k.s[0] == 's' ? &top->session_id : &top->conversation_id;
	free(*to);
	*to = copy;
	return true;
}

/* The object's closing brace, sc->p after it: no key of it (from first on) twice. */
static bool
check_keys(Scanner *sc, size_t first)
{
	Key			dup;

	if (!has_duplicate(sc, first, &dup))
		return true;
	snprintf(sc->message, sizeof(sc->message),
			 "duplicate key \"%.*s\" (a key may appear once in an object)",
			 (int) (dup.len > 60 ? 60 : dup.len), dup.s);
	return fail_at(sc, sc->p - 1, sc->message);
}

/*
 * Step into an object or array, sc->p at its opening brace or bracket:
 * true when it is empty (its close stepped over too).
 */
static bool
open_empty(Scanner *sc, char close)
{
	sc->p++;
	skip_space(sc);
	if (sc->p < sc->end && *sc->p == close)
	{
		sc->p++;
		return true;
	}
	return false;
}

/*
 * After a member of an object or array: a comma (*closed false) or its
 * close (*closed true), stepped over; false when neither.
 */
static bool
after_member(Scanner *sc, char close, bool *closed)
{
	skip_space(sc);
	*closed = sc->p < sc->end && *sc->p == close;
	if (sc->p < sc->end && (*sc->p == ',' || *closed))
	{
		sc->p++;
		return true;
	}
	return fail_at(sc, sc->p, close == '}' ? "',' or '}' expected" : "',' or ']' expected");
}

static bool
scan_object(Scanner *sc, ScannedLine *top, bool is_top)
{
	size_t		first = sc->nkeys;
	bool		ok = true;
	bool		closed = false;
	size_t		i;

	if (open_empty(sc, '}'))
		return true;
	while (!closed)
	{
		Key			k;

		skip_space(sc);
		if (sc->p >= sc->end || *sc->p != '"')
		{
			ok = fail_at(sc, sc->p, "a key (a string) expected");
			break;
		}
		if (!scan_string(sc, &k.s, &k.len, &k.owned))
		{
			ok = false;
			break;
		}
		push_key(sc, k);
		skip_space(sc);
		if (sc->p >= sc->end || *sc->p != ':')
		{
			ok = fail_at(sc, sc->p, "':' expected after a key");
			break;
		}
		sc->p++;
		skip_space(sc);
		/* the values the tool reads: "type" and the conversation id, top level */
		if (is_top && sc->p < sc->end && *sc->p == '"' && read_key(k))
			ok = scan_read_value(sc, top, k);
		else
			ok = scan_value(sc, top, false);
		if (!ok || !after_member(sc, '}', &closed))
		{
			ok = false;
			break;
		}
	}
	if (ok)
		ok = check_keys(sc, first);
	for (i = first; i < sc->nkeys; i++)
		if (sc->keys[i].owned)
			free((char *) sc->keys[i].s);
	sc->nkeys = first;
	return ok;
}

static bool
scan_array(Scanner *sc, ScannedLine *top)
{
	bool		closed = false;

	if (open_empty(sc, ']'))
		return true;
	while (!closed)
		if (!scan_value(sc, top, false) || !after_member(sc, ']', &closed))
			return false;
	return true;
}

static bool
scan_value(Scanner *sc, ScannedLine *top, bool is_top)
{
	bool		ok;

	skip_space(sc);
	if (sc->p >= sc->end)
		return fail_at(sc, sc->p, "a value expected, the line ended");
	switch (*sc->p)
	{
		case '{':
			if (++sc->depth > MAX_DEPTH)
				return fail_at(sc, sc->p, "nested too deep");
			ok = scan_object(sc, top, is_top);
			sc->depth--;
			return ok;
		case '[':
			if (++sc->depth > MAX_DEPTH)
				return fail_at(sc, sc->p, "nested too deep");
			ok = scan_array(sc, top);
			sc->depth--;
			return ok;
		case '"':
			return scan_string(sc, NULL, NULL, NULL);
		case 't':
			if (sc->end - sc->p >= 4 && memcmp(sc->p, "true", 4) == 0)
				return sc->p += 4, true;
			break;
		case 'f':
			if (sc->end - sc->p >= 5 && memcmp(sc->p, "false", 5) == 0)
				return sc->p += 5, true;
			break;
		case 'n':
			if (sc->end - sc->p >= 4 && memcmp(sc->p, "null", 4) == 0)
				return sc->p += 4, true;
			break;
		default:
			if (*sc->p == '-' || (*sc->p >= '0' && *sc->p <= '9'))
				return scan_number(sc);
	}
	return fail_at(sc, sc->p, "invalid JSON value");
}

/*
 * Scan line (len bytes). true when it is one strict JSON object; its
 * "type", "session_id" and "conversation_id" strings (when it has them,
 * at its top level) are put into *out, to be freed with
 * scanned_line_free. false with *column (in characters, from 1) and
 * *message otherwise.
 */
bool
scan_jsonl_line(const char *line, size_t len, ScannedLine *out, int *column, const char **message)
{
	static Scanner sc;			/* its key stack is kept from line to line */
	bool		ok;
	const char *q;

	memset(out, 0, sizeof(*out));
	sc.p = sc.start = line;
	sc.end = line + len;
	sc.error = NULL;
	sc.error_at = NULL;
	sc.nkeys = 0;
	sc.depth = 0;
	skip_space(&sc);
	if ((q = memchr(line, '\0', len)) != NULL)
		ok = fail_at(&sc, q, "invalid input: a NUL byte (a file of text holds none)");
	else if (sc.p >= sc.end || *sc.p != '{')
		ok = fail_at(&sc, sc.p, "a record must be a JSON object");
	else
	{
		ok = scan_value(&sc, out, true);
		skip_space(&sc);
		if (ok && sc.p < sc.end)
			ok = fail_at(&sc, sc.p, "the line goes on after its JSON object");
	}
	if (ok)
		return true;
	scanned_line_free(out);
	*message = sc.error;
	*column = 1;
	for (q = line; q < sc.error_at && q < sc.end; q++)
		if ((*q & 0xC0) != 0x80)
			(*column)++;
	return false;
}

void
scanned_line_free(ScannedLine *l)
{
	free(l->type);
	free(l->session_id);
	free(l->conversation_id);
	memset(l, 0, sizeof(*l));
}
