/*-------------------------------------------------------------------------
 *
 * source_langchain.c
 *	  convctx import --from=langchain, --from=langchain-js: the rows of
 *	  PostgresChatMessageHistory's table.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_langchain.c
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
 * --from=langchain: the rows of PostgresChatMessageHistory's table, in
 * either shape: langchain-postgres (Python) {"type", "data": {"content",
 * "id", ...}} with created_at, or @langchain/community (JS)
 * {"type", "content", ...} without a time. Rows of a session in id order.
 */
static const char *
langchain_role(const char *type, json_t *data)
{
	if (strcmp(type, "human") == 0)
		return "user";
	if (strcmp(type, "ai") == 0 || strcmp(type, "AIMessageChunk") == 0)
		return "assistant";
	if (strcmp(type, "chat") == 0 && json_is_string(json_object_get(data, "role")))
		return json_string_value(json_object_get(data, "role"));
	return type;				/* system, tool, function, ... */
}

/*
 * Add the message of a row of session sid to c; false (after saying why)
 * when the row holds none.
 */
static bool
langchain_message(Importer *imp, Conversation *c, Row *r, const char *sid, const char *table)
{
	json_t	   *message = json_object_get(r->v, "message");
	char	   *row_id = key_text(json_object_get(r->v, "id"));
	json_t	   *data;
	const char *type;
	char	   *text;
	char	   *request_id;
	const char *msg_id;

	/* Python: {"type", "data": {...}}; JS: {"type", "content", ...} */
	data = json_is_object(json_object_get(message, "data")) ? json_object_get(message, "data") : message;
	type = json_string_value(json_object_get(message, "type"));
	if (!json_is_object(message) || type == NULL)
	{
		source_error(imp, r->lineno, NULL, "a message of session \"%s\" without a \"type\" (%s id %s)",
					 sid, table, row_id ? row_id : "?");
		free(row_id);
		return false;
	}
	if (!json_is_string(json_object_get(data, "content")) && !json_is_array(json_object_get(data, "content")))
	{
		source_error(imp, r->lineno, NULL,
					 "a %s message of session \"%s\" without a string or array \"content\" (%s id %s)",
					 type, sid, table, row_id ? row_id : "?");
		free(row_id);
		return false;
	}
	text = content_text(imp, json_object_get(data, "content"));
	msg_id = json_string_value(json_object_get(data, "id"));
	request_id = msg_id ? xstrdup(msg_id) : xsprintf("lc:%s", row_id ? row_id : "?");
	if (strcmp(type, "ai") == 0 && json_array_size(json_object_get(data, "tool_calls")) > 0)
		importer_count_dropped(imp, "tool calls", json_array_size(json_object_get(data, "tool_calls")));
	conversation_add(c, langchain_role(type, data), text, request_id,
					 json_string_value(json_object_get(r->v, "created_at")), r->lineno);
	free(text);
	free(request_id);
	free(row_id);
	return true;
}

/* Whether row r belongs to session sid. */
static bool
same_session(Row *r, const char *sid)
{
	char	   *this_sid = key_text(json_object_get(r->v, "session_id"));
	bool		same = this_sid && strcmp(this_sid, sid) == 0;

	free(this_sid);
	return same;
}

/*
 * The session of rows[first] (sorted): made into records, or rejected
 * whole when a row of it holds no message. The row after it.
 */
static size_t
langchain_session(Importer *imp, RowList *rows, size_t first, const char *table)
{
	char	   *sid = key_text(json_object_get(rows->rows[first].v, "session_id"));
	Conversation *c;
	bool		bad = false;
	size_t		i;

	if (sid == NULL)
	{
		char	   *id = key_text(json_object_get(rows->rows[first].v, "id"));

		source_error(imp, rows->rows[first].lineno, NULL, "a row of %s without a session_id (id %s)",
					 table, id ? id : "?");
		free(id);
		reject_rows(imp, table, NULL, &rows->rows[first], 1);
		return first + 1;
	}
	c = row_conversation(imp, &rows->rows[first], table, sid);
	for (i = first; i < rows->n && same_session(&rows->rows[i], sid); i++)
		if (!bad && !langchain_message(imp, c, &rows->rows[i], sid, table))
			bad = true;
	if (bad)
	{
		reject_rows(imp, table, sid, &rows->rows[first], i - first);
		conversation_free(c);
	}
	else
		emit_conversation(imp, c);
	free(sid);
	return i;
}

void
import_langchain(Importer *imp, FILE *in, const SourceReader *source)
{
	RowList		rows = {0};
	size_t		i = 0;
	const char *table = imp->o->source_table ? imp->o->source_table : source->table;

	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);

		rows_from_table(imp, src, table, "t", "", &rows);
		PQfinish(src);
	}
	else
		rows_from_file(imp, in, &rows);
	rows_sort(&rows, "session_id", "id");
	while (i < rows.n)
		i = langchain_session(imp, &rows, i, table);
	rows_free(&rows);
}
