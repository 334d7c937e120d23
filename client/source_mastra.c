/*-------------------------------------------------------------------------
 *
 * source_mastra.c
 *	  convctx import --from=mastra: the threads and messages of @mastra/pg.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_mastra.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "import.h"
#include "sources.h"
#include "util.h"

/*
 * --from=mastra: @mastra/pg's mastra_threads (a conversation each, its
 * resourceId the identity) and mastra_messages. Content is read by the
 * message's type: v2 {"format": 2, "parts": [...]} (text parts joined),
 * text (a plain string), and older tool-call / tool-result rows (counted).
 * Times: "createdAt", a timestamp without time zone that Mastra writes in
 * UTC ("createdAtZ" holds the time of an upgrade on older rows).
 */
static char *
mastra_text(Importer *imp, const char *type, const char *content, bool *bad)
{
	json_t	   *v;
	json_t	   *parts;
	char	   *text;

	*bad = false;
	if (type == NULL || strcmp(type, "text") == 0)
		return xstrdup(content);
	if (strcmp(type, "tool-call") == 0 || strcmp(type, "tool-result") == 0)
	{
		importer_count_dropped(imp, "tool calls", 1);
		return NULL;
	}
	if (strcmp(type, "v2") != 0)
	{
		*bad = true;
		return NULL;
	}
	v = json_loads(content, JSON_DECODE_INT_AS_REAL, NULL);
	parts = json_object_get(v, "parts");
	if (!json_is_object(v) || json_number_value(json_object_get(v, "format")) != 2 || !json_is_array(parts))
	{
		json_decref(v);
		*bad = true;
		return NULL;
	}
	text = content_text(imp, parts);
	json_decref(v);
	return text;
}

/* Of which table a row of a file of both is: threads have a title, messages a thread_id. */
static int
mastra_table(json_t *row)
{
	return json_object_get(row, "thread_id") ? 1 : 0;
}

/*
 * The rows of both tables, each sorted by thread: from the source
 * database, or from a file of both tables' rows.
 */
static void
mastra_rows(Importer *imp, FILE *in, RowList *threads, RowList *messages)
{
	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);

		rows_from_table(imp, src, "mastra_threads", "t", "", threads);
		/* the order of a thread's messages at the same time: the library's */
		rows_from_table(imp, src, "mastra_messages", "m", " ORDER BY m.\"createdAt\", m.id", messages);
		PQfinish(src);
	}
	else
		rows_from_file_split(imp, in, mastra_table, threads, messages);
	/* in byte order, whatever the source database's collation: merged below */
	rows_sort(threads, "id", NULL);
	rows_sort(messages, "thread_id", "createdAt");
}

/*
 * Skip the messages from m on that come before thread tid: those without
 * a thread are rejected, those of threads that do not exist counted. The
 * first message of tid or of a thread after it.
 */
static size_t
mastra_skip_orphans(Importer *imp, RowList *messages, size_t m, const char *tid)
{
	for (; m < messages->n; m++)
	{
		json_t	   *row = messages->rows[m].v;
		const char *mt = json_string_value(json_object_get(row, "thread_id"));

		if (mt == NULL)
		{
			/* no thread to belong to: refused on its own */
			source_error(imp, messages->rows[m].lineno, NULL,
						 "a row of mastra_messages without a string thread_id (id %s)",
						 json_string_value(json_object_get(row, "id"))
						 ? json_string_value(json_object_get(row, "id")) : "?");
			reject_rows(imp, "mastra_messages", NULL, &messages->rows[m], 1);
			continue;
		}
		if (strcmp(mt, tid) >= 0)
			break;
		importer_count_dropped(imp, "messages of threads that do not exist", 1);
	}
	return m;
}

/* Add the message of row r of thread tid to c; false (after saying why) when it cannot. */
static bool
mastra_message(Importer *imp, Conversation *c, Row *r, const char *tid)
{
	const char *role = json_string_value(json_object_get(r->v, "role"));
	const char *type = json_string_value(json_object_get(r->v, "type"));
	const char *content = json_string_value(json_object_get(r->v, "content"));
	const char *mid = json_string_value(json_object_get(r->v, "id"));
	char	   *text;
	bool		unknown;

	if (role == NULL || content == NULL)
	{
		source_error(imp, r->lineno, NULL,
					 "a message of thread \"%s\" without a role or content (mastra_messages id %s)",
					 tid, mid ? mid : "?");
		return false;
	}
	text = mastra_text(imp, type, content, &unknown);
	if (unknown)
	{
		source_error(imp, r->lineno, NULL,
					 "a message of thread \"%s\" in a content format this tool does not read: type \"%s\" (mastra_messages id %s)",
					 tid, type ? type : "", mid ? mid : "?");
		return false;
	}
	conversation_add(c, role, text, mid, json_string_value(json_object_get(r->v, "createdAt")), r->lineno);
	free(text);
	return true;
}

/*
 * The thread of row t, with its messages from m on: made into records,
 * or rejected with them (its row and theirs to the reject file) when one
 * cannot be read. The first message after them.
 */
static size_t
mastra_thread(Importer *imp, Row *t, RowList *messages, size_t m)
{
	const char *tid = json_string_value(json_object_get(t->v, "id"));
	Conversation *c;
	bool		bad = false;
	size_t		first_m;

	if (tid == NULL)
	{
		source_error(imp, t->lineno, NULL, "a row of mastra_threads without a string id");
		reject_rows(imp, "mastra_threads", NULL, t, 1);
		return m;
	}
	c = row_conversation(imp, t, "mastra_threads", tid);
	c->identity = xstrdup(json_string_value(json_object_get(t->v, "resourceId")));
	c->created_at = xstrdup(json_string_value(json_object_get(t->v, "createdAt")));
	c->updated_at = xstrdup(json_string_value(json_object_get(t->v, "updatedAt")));
	if (json_string_length(json_object_get(t->v, "title")) > 0)
		importer_count_dropped(imp, "thread titles", 1);
	/* messages of threads that come before this one have no thread */
	m = first_m = mastra_skip_orphans(imp, messages, m, tid);
	for (; m < messages->n; m++)
	{
		const char *mt = json_string_value(json_object_get(messages->rows[m].v, "thread_id"));

		if (mt == NULL || strcmp(mt, tid) != 0)
			break;
		if (!bad && !mastra_message(imp, c, &messages->rows[m], tid))
			bad = true;
	}
	if (bad)
	{
		Group	   *g = group_new(tid, c->where);

		group_add_row(g, t);
		for (; first_m < m; first_m++)
			group_add_row(g, &messages->rows[first_m]);
		conversation_free(c);
		importer_reject(imp, g);
	}
	else
		emit_conversation(imp, c);
	return m;
}

void
import_mastra(Importer *imp, FILE *in, const SourceReader *source)
{
	RowList		threads = {0};
	RowList		messages = {0};
	size_t		i;
	size_t		m = 0;

	mastra_rows(imp, in, &threads, &messages);
	for (i = 0; i < threads.n; i++)
		m = mastra_thread(imp, &threads.rows[i], &messages, m);
	if (m < messages.n)
		importer_count_dropped(imp, "messages of threads that do not exist", (long long) (messages.n - m));
	rows_free(&threads);
	rows_free(&messages);
}
