/*-------------------------------------------------------------------------
 *
 * source_input.c
 *	  convctx import --from=SOURCE: what the readers read with: JSON
 *	  Lines, the rows of a library's tables, message content, and the
 *	  errors and rejects of what cannot be read.
 *
 * Table sources are read from a file of their rows as JSON objects
 * (SELECT row_to_json(t) FROM table t, one a line) or straight from the
 * library's database with --source-dsn, and ordered here.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_input.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "import.h"
#include "sources.h"
#include "util.h"

/*
 * Content
 */

/*
 * The text of a message's content: a string as it is; an array of
 * blocks or parts, the texts of its text blocks joined (others counted).
 * NULL when there is no text.
 */
char *
content_text(Importer *imp, json_t *content)
{
	size_t		i;
	json_t	   *block;
	char	   *text = NULL;
	size_t		len = 0;
	size_t		cap = 0;

	if (json_is_string(content))
		return xstrdup(json_string_value(content));
	if (!json_is_array(content))
		return NULL;
	json_array_foreach(content, i, block)
	{
		const char *type = json_string_value(json_object_get(block, "type"));
		json_t	   *value = json_object_get(block, "text");

		if (json_is_string(block))
			value = block;
		else if (type && (strcmp(type, "tool-invocation") == 0 || strcmp(type, "tool_use") == 0 ||
						  strcmp(type, "tool_result") == 0 || strcmp(type, "function_call") == 0))
		{
			importer_count_dropped(imp, "tool calls", 1);
			continue;
		}
		else if (type && strcmp(type, "step-start") == 0)
			continue;			/* a marker between the steps of a Mastra answer */
		else if (type == NULL || !(strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
									 strcmp(type, "output_text") == 0))
			value = NULL;
		if (!json_is_string(value))
		{
			importer_count_dropped(imp, "content blocks that are not text", 1);
			continue;
		}
		append_text(&text, &len, &cap, json_string_value(value), json_string_length(value));
	}
	return text;
}

void
source_error(Importer *imp, long lineno, const char *key, const char *fmt,...)
{
	va_list		ap;

	if (lineno > 0)
		fprintf(stderr, "%s:%ld: error: ", imp->input_name, lineno);
	else
		fprintf(stderr, "%s: error: ", imp->input_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (key)
		fprintf(stderr, " (source key %s)", key);
	fputc('\n', stderr);
}

/* A source record that cannot be read: its conversation is rejected. */
void
reject_source(Importer *imp, const char *id, long lineno, const char *line)
{
	char		where[WHERE_LEN];
	Group	   *g;

	snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
	g = group_new(id ? id : "", where);
	if (line)
		group_add(g, line, strlen(line), lineno);
	importer_reject(imp, g);
}

/*
 * Reading JSON Lines
 */

/*
 * The next non-empty line as JSON (integers as reals: only texts are
 * taken from foreign sources), or NULL at the end. A line that is not
 * JSON is an error with its line and column.
 */
static json_t *
next_json(Importer *imp, LineReader *r, bool *bad)
{
	ssize_t		len;
	json_error_t jerr;
	json_t	   *v;

	*bad = false;
	while ((len = getline(&r->line, &r->cap, r->in)) != -1)
	{
		r->lineno++;
		while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r'))
			r->line[--len] = '\0';
		if (r->lineno == 1 && len >= 3 && memcmp(r->line, "\xEF\xBB\xBF", 3) == 0)
		{
			memmove(r->line, r->line + 3, len - 2);
			len -= 3;
		}
		if (len == 0)
			continue;
		v = json_loadb(r->line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
		if (v == NULL)
		{
			fprintf(stderr, "%s:%ld:%d: error: %s\n", imp->input_name, r->lineno, jerr.column,
					json_error_code(&jerr) == json_error_null_character ?
					"\\u0000 is not allowed: PostgreSQL text cannot hold the NUL character" : jerr.text);
			*bad = true;
			return NULL;
		}
		return v;
	}
	if (ferror(r->in))
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	return NULL;
}

/*
 * The next line of a file of a conversation a line, as JSON, or NULL at
 * its end. A line that is not JSON is reported, and rejected as a
 * conversation of its own.
 */
static json_t *
next_conversation(Importer *imp, LineReader *r)
{
	json_t	   *v;
	bool		bad;

	while ((v = next_json(imp, r, &bad)) == NULL && bad)
		reject_source(imp, NULL, r->lineno, r->line);
	return v;
}

/* A conversation id read at r's last line: its place is "FILE:LINE". */
Conversation *
line_conversation(Importer *imp, LineReader *r, const char *id)
{
	char		where[WHERE_LEN];

	snprintf(where, sizeof(where), "%s:%ld", imp->input_name, r->lineno);
	return conversation_new(id, where);
}

/*
 * Read a file of a conversation a line: convert makes each line's
 * conversation (NULL when it rejected the line), which is then made into
 * records. state is convert's.
 */
void
read_line_conversations(Importer *imp, FILE *in, LineConversationFunc convert, void *state)
{
	LineReader	r = {in, NULL, 0, 0};
	json_t	   *v;

	while ((v = next_conversation(imp, &r)) != NULL)
	{
		Conversation *c = convert(imp, &r, v, state);

		if (c)
			emit_conversation(imp, c);
		json_decref(v);
	}
	free(r.line);
}

const char *
str_field(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/*
 * Table sources: rows of a library's tables, as JSON objects
 */

static void
rows_add(RowList *l, json_t *v, long lineno)
{
	if (l->n == l->cap)
	{
		l->cap = l->cap ? l->cap * 2 : 256;
		l->rows = xrealloc(l->rows, l->cap * sizeof(Row));
	}
	l->rows[l->n].v = v;
	l->rows[l->n].lineno = lineno;
	l->rows[l->n].seq = (long) l->n;
	l->n++;
}

void
rows_free(RowList *l)
{
	size_t		i;

	for (i = 0; i < l->n; i++)
		json_decref(l->rows[i].v);
	free(l->rows);
	memset(l, 0, sizeof(*l));
}

/*
 * Every row of the file: one JSON object a line. A line that is not one
 * stops the import (a file of rows has no conversations to tell apart
 * before it is read).
 */
void
rows_from_file(Importer *imp, FILE *in, RowList *all)
{
	LineReader	r = {in, NULL, 0, 0};
	json_t	   *v;
	bool		bad;

	for (;;)
	{
		v = next_json(imp, &r, &bad);
		if (bad)
			importer_abort(imp);
		if (v == NULL)
			break;
		if (!json_is_object(v))
		{
			source_error(imp, r.lineno, NULL, "a row must be a JSON object (SELECT row_to_json(t) FROM table t)");
			importer_abort(imp);
		}
		rows_add(all, v, r.lineno);
	}
	free(r.line);
}

/*
 * Every row of a file of two tables' rows, into the list of its table:
 * which(row) says which, 0 for first, 1 for second, -1 for neither (the
 * row is not read).
 */
void
rows_from_file_split(Importer *imp, FILE *in, int (*which) (json_t *row), RowList *first,
					 RowList *second)
{
	RowList		rows = {0};
	size_t		i;

	rows_from_file(imp, in, &rows);
	for (i = 0; i < rows.n; i++)
	{
		json_t	   *v = rows.rows[i].v;
		int			w = which(v);

		if (w < 0)
			continue;
		json_incref(v);
		rows_add(w == 0 ? first : second, v, rows.rows[i].lineno);
	}
	rows_free(&rows);
}

/* The rows a query of the source database returns (one json text column). */
static void
rows_from_query(Importer *imp, PGconn *src, const char *what, const char *sql, RowList *all)
{
	PGresult   *res = PQexec(src, sql);
	int			i;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fail(PQstatus(src) == CONNECTION_OK ? EXIT_ERROR : EXIT_CONNECTION,
			 "reading %s from the source database: %s", what, PQerrorMessage(src));
	for (i = 0; i < PQntuples(res); i++)
	{
		json_error_t jerr;
		json_t	   *v = json_loads(PQgetvalue(res, i, 0), JSON_DECODE_INT_AS_REAL, &jerr);

		if (v == NULL)
			fail(EXIT_ERROR, "reading %s: row %d: %s", what, i + 1, jerr.text);
		rows_add(all, v, 0);
	}
	PQclear(res);
}

/* Connect to the library's database (--source-dsn): a connection string; UTF-8. */
PGconn *
connect_source(Importer *imp)
{
	const char *const keywords[] = {"dbname", "client_encoding", NULL};
	const char *const values[] = {imp->o->source_dsn, "UTF8", NULL};
	PGconn	   *src = PQconnectdbParams(keywords, values, 1);

	if (PQstatus(src) != CONNECTION_OK)
		fail(EXIT_CONNECTION, "could not connect to the source database: %s", PQerrorMessage(src));
	/* one snapshot of the source, and times in UTC */
	PQclear(PQexec(src, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
	PQclear(PQexec(src, "SET LOCAL TimeZone = 'UTC'"));
	return src;
}

/* schema.table, quoted for SQL. */
static char *
qualified_table(PGconn *src, const char *schema, const char *table)
{
	char	   *qs = PQescapeIdentifier(src, schema ? schema : "public", strlen(schema ? schema : "public"));
	char	   *qt = PQescapeIdentifier(src, table, strlen(table));
	char	   *q = xsprintf("%s.%s", qs, qt);

	PQfreemem(qs);
	PQfreemem(qt);
	return q;
}

/*
 * The rows of table of the source database, in the schema --source-schema
 * names: SELECT row_to_json(alias) FROM schema.table alias, then rest (a
 * WHERE or an ORDER BY of alias, or "").
 */
void
rows_from_table(Importer *imp, PGconn *src, const char *table, const char *alias, const char *rest,
				RowList *rows)
{
	char	   *q = qualified_table(src, imp->o->source_schema, table);
	char	   *sql = xsprintf("SELECT pg_catalog.row_to_json(%s)::pg_catalog.text FROM %s %s%s",
							   alias, q, alias, rest);

	rows_from_query(imp, src, table, sql, rows);
	free(sql);
	free(q);
}

/* A row's key as text: a string, or a number (a serial id). */
char *
key_text(json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_number(v))
		return xsprintf("%.0f", json_number_value(v));
	return NULL;
}

static const char *sort_key;	/* the keys rows_sort orders by */
static const char *sort_key2;

/* A key of a row for ordering: a string, or a number printed; "" else. */
static void
row_key(json_t *row, const char *key, char *buf, size_t size, const char **out)
{
	json_t	   *v = key ? json_object_get(row, key) : NULL;

	if (json_is_string(v))
		*out = json_string_value(v);
	else if (json_is_number(v))
	{
		/* serial ids: zero-padded, so that they order as numbers */
		snprintf(buf, size, "%030.0f", json_number_value(v));
		*out = buf;
	}
	else
		*out = "";
}

static int
row_cmp(const void *a, const void *b)
{
	const Row  *ra = a;
	const Row  *rb = b;
	char		ba[40],
				bb[40];
	const char *ka,
			   *kb;
	int			c;

	row_key(ra->v, sort_key, ba, sizeof(ba), &ka);
	row_key(rb->v, sort_key, bb, sizeof(bb), &kb);
	if ((c = strcmp(ka, kb)) != 0)
		return c;
	row_key(ra->v, sort_key2, ba, sizeof(ba), &ka);
	row_key(rb->v, sort_key2, bb, sizeof(bb), &kb);
	if ((c = strcmp(ka, kb)) != 0)
		return c;
	return ra->seq < rb->seq ? -1 : ra->seq > rb->seq;
}

/*
 * Order rows by conversation, then by key2 (the order the library reads
 * them in: a serial id, a time), then as read: a file of rows may hold
 * them in any order (SELECT row_to_json(t) FROM t has none), and a
 * database orders text by its collation, not in the byte order that
 * comparing ids here (the merge of Mastra's threads and messages) needs.
 */
void
rows_sort(RowList *l, const char *key, const char *key2)
{
	if (l->n == 0)
		return;
	sort_key = key;
	sort_key2 = key2;
	qsort(l->rows, l->n, sizeof(Row), row_cmp);
}

/* Add a row's JSON text to g, for the reject file. */
void
group_add_row(Group *g, Row *r)
{
	char	   *t = json_dumps(r->v, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (t == NULL)
		fail(EXIT_ERROR, "out of memory");
	group_add(g, t, strlen(t), r->lineno);
	free(t);
}

/* Where a row of table is: "FILE:LINE", or "table id" for a row of a query. */
static char *
where_of(Importer *imp, Row *r, const char *table, const char *id)
{
	return r->lineno > 0 ? xsprintf("%s:%ld", imp->input_name, r->lineno)
		: xsprintf("%s %s", table, id ? id : "?");
}

/* The conversation id of table, found at its row r. */
Conversation *
row_conversation(Importer *imp, Row *r, const char *table, const char *id)
{
	char	   *where = where_of(imp, r, table, id);
	Conversation *c = conversation_new(id, where);

	free(where);
	return c;
}

/*
 * Reject the conversation id (NULL: a row that has none) of rows[0..n)
 * of table: its rows go to the reject file.
 */
void
reject_rows(Importer *imp, const char *table, const char *id, Row *rows, size_t n)
{
	char	   *where = where_of(imp, &rows[0], table, id);
	Group	   *g = group_new(id ? id : "", where);
	size_t		i;

	free(where);
	for (i = 0; i < n; i++)
		group_add_row(g, &rows[i]);
	importer_reject(imp, g);
}
