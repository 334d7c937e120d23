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

#include "sources.h"

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

void
import_mastra(Importer *imp, FILE *in, const SourceReader *source)
{
	RowList		rows = {0};
	RowList		threads = {0};
	RowList		messages = {0};
	size_t		i;
	size_t		m = 0;

	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);

		rows_from_table(imp, src, "mastra_threads", "t", "", &threads);
		/* the order of a thread's messages at the same time: the library's */
		rows_from_table(imp, src, "mastra_messages", "m", " ORDER BY m.\"createdAt\", m.id", &messages);
		PQfinish(src);
	}
	else
	{
		/* a file of both tables' rows: threads have a title, messages a thread_id */
		rows_from_file(imp, in, &rows);
		for (i = 0; i < rows.n; i++)
		{
			json_incref(rows.rows[i].v);
			if (json_object_get(rows.rows[i].v, "thread_id"))
				rows_add(&messages, rows.rows[i].v, rows.rows[i].lineno);
			else
				rows_add(&threads, rows.rows[i].v, rows.rows[i].lineno);
		}
		rows_free(&rows);
	}
	/* in byte order, whatever the source database's collation: merged below */
	rows_sort(&threads, "id", NULL);
	rows_sort(&messages, "thread_id", "createdAt");

	for (i = 0; i < threads.n; i++)
	{
		json_t	   *t = threads.rows[i].v;
		const char *tid = json_string_value(json_object_get(t, "id"));
		char	   *where;
		Conversation *c;
		bool		bad = false;
		size_t		first_m;

		if (tid == NULL)
		{
			source_error(imp, threads.rows[i].lineno, NULL, "a row of mastra_threads without a string id");
			where = where_of(imp, &threads.rows[i], "mastra_threads", NULL);
			reject_rows(imp, NULL, where, &threads.rows[i], 1);
			free(where);
			continue;
		}
		where = where_of(imp, &threads.rows[i], "mastra_threads", tid);
		c = conversation_new(tid, where);
		free(where);
		c->identity = xstrdup(json_string_value(json_object_get(t, "resourceId")));
		c->created_at = xstrdup(json_string_value(json_object_get(t, "createdAt")));
		c->updated_at = xstrdup(json_string_value(json_object_get(t, "updatedAt")));
		if (json_string_length(json_object_get(t, "title")) > 0)
			importer_count_dropped(imp, "thread titles", 1);
		/* messages of threads that come before this one have no thread */
		while (m < messages.n)
		{
			const char *mt = json_string_value(json_object_get(messages.rows[m].v, "thread_id"));

			if (mt == NULL)
			{
				/* no thread to belong to: refused on its own */
				source_error(imp, messages.rows[m].lineno, NULL,
							 "a row of mastra_messages without a string thread_id (id %s)",
							 json_string_value(json_object_get(messages.rows[m].v, "id"))
							 ? json_string_value(json_object_get(messages.rows[m].v, "id")) : "?");
				where = where_of(imp, &messages.rows[m], "mastra_messages", NULL);
				reject_rows(imp, NULL, where, &messages.rows[m], 1);
				free(where);
				m++;
				continue;
			}
			if (strcmp(mt, tid) >= 0)
				break;
			importer_count_dropped(imp, "messages of threads that do not exist", 1);
			m++;
		}
		first_m = m;
		for (; m < messages.n; m++)
		{
			json_t	   *row = messages.rows[m].v;
			const char *mt = json_string_value(json_object_get(row, "thread_id"));
			const char *role = json_string_value(json_object_get(row, "role"));
			const char *type = json_string_value(json_object_get(row, "type"));
			const char *content = json_string_value(json_object_get(row, "content"));
			const char *mid = json_string_value(json_object_get(row, "id"));
			char	   *text;
			bool		unknown;

			if (mt == NULL || strcmp(mt, tid) != 0)
				break;
			if (bad)
				continue;
			if (role == NULL || content == NULL)
			{
				source_error(imp, messages.rows[m].lineno, NULL,
							 "a message of thread \"%s\" without a role or content (mastra_messages id %s)",
							 tid, mid ? mid : "?");
				bad = true;
				continue;
			}
			text = mastra_text(imp, type, content, &unknown);
			if (unknown)
			{
				source_error(imp, messages.rows[m].lineno, NULL,
							 "a message of thread \"%s\" in a content format this tool does not read: type \"%s\" (mastra_messages id %s)",
							 tid, type ? type : "", mid ? mid : "?");
				bad = true;
				continue;
			}
			conversation_add(c, role, text, mid, json_string_value(json_object_get(row, "createdAt")),
							 messages.rows[m].lineno);
			free(text);
		}
		if (bad)
		{
			/* the thread's row and its messages' rows, to the reject file */
			Group	   *g = group_new(tid, c->where);
			size_t		k;

			for (k = 0; k <= m - first_m; k++)
			{
				Row		   *r = k == 0 ? &threads.rows[i] : &messages.rows[first_m + k - 1];
				char	   *t = row_text(r);

				group_add(g, t, strlen(t), r->lineno);
				free(t);
			}
			conversation_free(c);
			importer_reject(imp, g);
		}
		else
			emit_conversation(imp, c);
	}
	if (m < messages.n)
		importer_count_dropped(imp, "messages of threads that do not exist", (long long) (messages.n - m));
	rows_free(&threads);
	rows_free(&messages);
}
