/*-------------------------------------------------------------------------
 *
 * source_langgraph.c
 *	  convctx import --from=langgraph-js: the checkpoints of
 *	  @langchain/langgraph-checkpoint-postgres (JS).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_langgraph.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sources.h"

/*
 * --from=langgraph-js: the checkpoints of @langchain/langgraph-checkpoint-
 * postgres (JS), whose blobs are JSON. A thread's conversation is the
 * messages channel of its newest checkpoint (namespace ''); a message's
 * time is the ts of the first checkpoint that holds it. Subgraph
 * namespaces, and messages removed before the newest checkpoint, are not
 * imported (counted).
 */

/* The bytes of a bytea printed in hex ("\\x..."), NUL-terminated. */
static char *
bytea_text(const char *hex)
{
	size_t		n;
	char	   *out;
	size_t		i;

	if (hex == NULL || strncmp(hex, "\\x", 2) != 0)
		return NULL;
	hex += 2;
	n = strlen(hex) / 2;
	out = xmalloc(n + 1);
	for (i = 0; i < n; i++)
	{
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
		{
			free(out);
			return NULL;
		}
		out[i] = (char) b;
	}
	out[n] = '\0';
	return out;
}

/* The role of a serialized LangChain message, by its class. */
static const char *
lc_class_role(json_t *msg)
{
	json_t	   *id = json_object_get(msg, "id");
	const char *cls = json_string_value(json_array_get(id, json_array_size(id) - 1));

	if (cls == NULL)
		return NULL;
	if (strcmp(cls, "HumanMessage") == 0 || strcmp(cls, "HumanMessageChunk") == 0)
		return "user";
	if (strcmp(cls, "AIMessage") == 0 || strcmp(cls, "AIMessageChunk") == 0)
		return "assistant";
	if (strcmp(cls, "SystemMessage") == 0)
		return "system";
	if (strcmp(cls, "ToolMessage") == 0 || strcmp(cls, "FunctionMessage") == 0)
		return "tool";
	return "other";
}

/* The key of a blob in the index of blobs: thread, a unit separator, version. */
static char *
blob_key(const char *thread, const char *version)
{
	return xsprintf("%s\x1f%s", thread, version);
}

/* An index of the messages blobs by thread and version: key -> row number. */
static json_t *
index_blobs(RowList *blobs)
{
	json_t	   *index = json_object();
	size_t		i;

	for (i = 0; i < blobs->n; i++)
	{
		const char *bt = json_string_value(json_object_get(blobs->rows[i].v, "thread_id"));
		char	   *bv = key_text(json_object_get(blobs->rows[i].v, "version"));

		if (bt && bv)
		{
			char	   *key = blob_key(bt, bv);

			json_object_set_new(index, key, json_integer((json_int_t) i));
			free(key);
		}
		free(bv);
	}
	return index;
}

/* The decoded messages blob (a JSON array) of version of thread, or NULL. */
static json_t *
langgraph_blob(RowList *blobs, json_t *index, const char *thread, const char *version, bool *undecodable)
{
	char	   *key = blob_key(thread, version);
	json_t	   *at = json_object_get(index, key);
	json_t	   *b;
	const char *type;
	char	   *text;
	json_t	   *v;

	free(key);
	*undecodable = false;
	if (at == NULL)
		return NULL;
	b = blobs->rows[json_integer_value(at)].v;
	type = json_string_value(json_object_get(b, "type"));
	if (type && strcmp(type, "empty") == 0)
		return json_array();
	if (!type || strcmp(type, "json") != 0)
	{
		*undecodable = true;	/* msgpack, pickle: written by the Python saver */
		return NULL;
	}
	text = bytea_text(json_string_value(json_object_get(b, "blob")));
	v = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	if (!json_is_array(v))
	{
		json_decref(v);
		*undecodable = true;
		return NULL;
	}
	return v;
}

/* The version of the messages channel of a checkpoint, as text, or NULL. */
static char *
messages_version(json_t *checkpoint)
{
	return key_text(json_object_get(json_object_get(json_object_get(checkpoint, "checkpoint"),
													 "channel_versions"), "messages"));
}

void
import_langgraph(Importer *imp, FILE *in, const SourceReader *source)
{
	RowList		rows = {0};
	RowList		checkpoints = {0};
	RowList		blobs = {0};
	json_t	   *blob_index;
	size_t		i;
	size_t		start;

	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);

		rows_from_table(imp, src, "checkpoints", "c", "", &checkpoints);
		rows_from_table(imp, src, "checkpoint_blobs", "b",
						" WHERE b.channel = 'messages' AND b.checkpoint_ns = ''", &blobs);
		PQfinish(src);
	}
	else
	{
		/* a file of both tables' rows: checkpoints have a checkpoint, blobs a blob */
		rows_from_file(imp, in, &rows);
		for (i = 0; i < rows.n; i++)
		{
			json_t	   *v = rows.rows[i].v;

			json_incref(v);
			if (json_object_get(v, "checkpoint"))
				rows_add(&checkpoints, v, rows.rows[i].lineno);
			else if (json_object_get(v, "blob") && json_object_get(v, "task_id") == NULL &&
					 json_is_string(json_object_get(v, "channel")) &&
					 strcmp(json_string_value(json_object_get(v, "channel")), "messages") == 0)
				rows_add(&blobs, v, rows.rows[i].lineno);
			else
				json_decref(v);	/* other channels, pending writes */
		}
		rows_free(&rows);
	}
	rows_sort(&checkpoints, "thread_id", "checkpoint_id");

	blob_index = index_blobs(&blobs);
	for (start = 0; start < checkpoints.n;)
	{
		const char *thread = json_string_value(json_object_get(checkpoints.rows[start].v, "thread_id"));
		size_t		end;
		json_t	   *first_ts = json_object();	/* message id -> ts of its first checkpoint */
		json_t	   *newest = NULL;
		const char *newest_ts = NULL;
		const char *newest_id = NULL;
		long		newest_line = 0;
		bool		undecodable = false;
		char	   *where;
		Conversation *c;

		if (thread == NULL)
		{
			source_error(imp, checkpoints.rows[start].lineno, NULL, "a checkpoint without a string thread_id");
			where = where_of(imp, &checkpoints.rows[start], "checkpoints", NULL);
			reject_rows(imp, NULL, where, &checkpoints.rows[start], 1);
			free(where);
			start++;
			continue;
		}
		for (end = start; end < checkpoints.n; end++)
		{
			json_t	   *cp = checkpoints.rows[end].v;
			const char *t = json_string_value(json_object_get(cp, "thread_id"));
			const char *ns = json_string_value(json_object_get(cp, "checkpoint_ns"));
			const char *cid = json_string_value(json_object_get(cp, "checkpoint_id"));
			const char *ts = json_string_value(json_object_get(json_object_get(cp, "checkpoint"), "ts"));
			char	   *version;
			json_t	   *msgs;
			json_t	   *msg;
			size_t		k;
			bool		bad_blob;

			if (t == NULL || strcmp(t, thread) != 0)
				break;
			if (ns && ns[0] != '\0')
			{
				importer_count_dropped(imp, "checkpoints of subgraphs", 1);
				continue;
			}
			version = messages_version(cp);
			if (version == NULL)
				continue;
			msgs = langgraph_blob(&blobs, blob_index, thread, version, &bad_blob);
			free(version);
			if (bad_blob)
				undecodable = true;
			if (msgs == NULL)
				continue;
			json_array_foreach(msgs, k, msg)
			{
				const char *mid = json_string_value(json_object_get(json_object_get(msg, "kwargs"), "id"));

				if (mid && ts && json_object_get(first_ts, mid) == NULL)
					json_object_set_new(first_ts, mid, json_string(ts));
			}
			/* checkpoint ids are time-ordered (uuid6): the last is the newest */
			if (newest_id == NULL || (cid && strcmp(cid, newest_id) > 0))
			{
				json_decref(newest);
				newest = msgs;
				newest_id = cid;
				newest_ts = ts;
				newest_line = checkpoints.rows[end].lineno;
			}
			else
				json_decref(msgs);
		}
		if (undecodable)
		{
			source_error(imp, checkpoints.rows[start].lineno, thread,
						 "thread \"%s\" has messages blobs that are not JSON (written by the Python saver, "
						 "as msgpack): this tool reads the JS saver's JSON blobs", thread);
			json_decref(newest);
			json_decref(first_ts);
			where = where_of(imp, &checkpoints.rows[start], "checkpoints", thread);
			reject_rows(imp, thread, where, &checkpoints.rows[start], end - start);
			free(where);
			start = end;
			continue;
		}
		where = where_of(imp, &checkpoints.rows[start], "checkpoints", thread);
		c = conversation_new(thread, where);
		free(where);
		if (newest)
		{
			size_t		k;
			json_t	   *msg;

			json_array_foreach(newest, k, msg)
			{
				json_t	   *kwargs = json_object_get(msg, "kwargs");
				const char *mid = json_string_value(json_object_get(kwargs, "id"));
				const char *role = lc_class_role(msg);
				const char *ts = mid ? json_string_value(json_object_get(first_ts, mid)) : NULL;
				char	   *text;

				if (role == NULL)
				{
					source_error(imp, newest_line, thread,
								 "message %zu of thread \"%s\" is not a serialized LangChain message", k + 1, thread);
					importer_count_dropped(imp, "messages that are not LangChain messages", 1);
					continue;
				}
				if (strcmp(role, "assistant") == 0 && json_array_size(json_object_get(kwargs, "tool_calls")) > 0)
					importer_count_dropped(imp, "tool calls", json_array_size(json_object_get(kwargs, "tool_calls")));
				text = content_text(imp, json_object_get(kwargs, "content"));
				conversation_add(c, role, text, mid, ts ? ts : newest_ts, newest_line);
				free(text);
			}
		}
		json_decref(newest);
		json_decref(first_ts);
		emit_conversation(imp, c);
		start = end;
	}
	json_decref(blob_index);
	rows_free(&checkpoints);
	rows_free(&blobs);
}
