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

#include "import.h"
#include "sources.h"
#include "util.h"

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

/*
 * Of which table a row of a file of both is: checkpoints have a
 * checkpoint, blobs a blob; -1 for the blobs of other channels and
 * pending writes, which are not read.
 */
static int
langgraph_table(json_t *row)
{
	if (json_object_get(row, "checkpoint"))
		return 0;
	if (json_object_get(row, "blob") && json_object_get(row, "task_id") == NULL &&
		json_is_string(json_object_get(row, "channel")) &&
		strcmp(json_string_value(json_object_get(row, "channel")), "messages") == 0)
		return 1;
	return -1;
}

/*
 * The checkpoints, sorted by thread, and the messages blobs: from the
 * source database, or from a file of both tables' rows.
 */
static void
langgraph_rows(Importer *imp, FILE *in, RowList *checkpoints, RowList *blobs)
{
	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);

		rows_from_table(imp, src, "checkpoints", "c", "", checkpoints);
		rows_from_table(imp, src, "checkpoint_blobs", "b",
						" WHERE b.channel = 'messages' AND b.checkpoint_ns = ''", blobs);
		PQfinish(src);
	}
	else
		rows_from_file_split(imp, in, langgraph_table, checkpoints, blobs);
	rows_sort(checkpoints, "thread_id", "checkpoint_id");
}

/* What the checkpoints of a thread hold. */
typedef struct ThreadHistory
{
	json_t	   *first_ts;		/* message id -> ts of its first checkpoint */
	json_t	   *newest;			/* the messages of the newest checkpoint */
	const char *newest_ts;
	const char *newest_id;
	long		newest_line;
	bool		undecodable;	/* a messages blob is not JSON */
} ThreadHistory;

/* Add checkpoint row r of thread to h: its messages, and whether it is the newest. */
static void
history_add(Importer *imp, ThreadHistory *h, Row *r, const char *thread, RowList *blobs,
			json_t *blob_index)
{
	json_t	   *cp = r->v;
	const char *ns = json_string_value(json_object_get(cp, "checkpoint_ns"));
	const char *cid = json_string_value(json_object_get(cp, "checkpoint_id"));
	const char *ts = json_string_value(json_object_get(json_object_get(cp, "checkpoint"), "ts"));
	char	   *version;
	json_t	   *msgs;
	json_t	   *msg;
	size_t		k;
	bool		bad_blob;

	if (ns && ns[0] != '\0')
	{
		importer_count_dropped(imp, "checkpoints of subgraphs", 1);
		return;
	}
	version = messages_version(cp);
	if (version == NULL)
		return;
	msgs = langgraph_blob(blobs, blob_index, thread, version, &bad_blob);
	free(version);
	if (bad_blob)
		h->undecodable = true;
	if (msgs == NULL)
		return;
	json_array_foreach(msgs, k, msg)
	{
		const char *mid = json_string_value(json_object_get(json_object_get(msg, "kwargs"), "id"));

		if (mid && ts && json_object_get(h->first_ts, mid) == NULL)
			json_object_set_new(h->first_ts, mid, json_string(ts));
	}
	/* checkpoint ids are time-ordered (uuid6): the last is the newest */
	if (h->newest_id == NULL || (cid && strcmp(cid, h->newest_id) > 0))
	{
		json_decref(h->newest);
		h->newest = msgs;
		h->newest_id = cid;
		h->newest_ts = ts;
		h->newest_line = r->lineno;
	}
	else
		json_decref(msgs);
}

/* Add the messages of the newest checkpoint of thread to c. */
static void
history_messages(Importer *imp, Conversation *c, ThreadHistory *h, const char *thread)
{
	size_t		k;
	json_t	   *msg;

	json_array_foreach(h->newest, k, msg)
	{
		json_t	   *kwargs = json_object_get(msg, "kwargs");
		const char *mid = json_string_value(json_object_get(kwargs, "id"));
		const char *role = lc_class_role(msg);
		const char *ts = mid ? json_string_value(json_object_get(h->first_ts, mid)) : NULL;
		char	   *text;

		if (role == NULL)
		{
			source_error(imp, h->newest_line, thread,
						 "message %zu of thread \"%s\" is not a serialized LangChain message", k + 1, thread);
			importer_count_dropped(imp, "messages that are not LangChain messages", 1);
			continue;
		}
		if (strcmp(role, "assistant") == 0 && json_array_size(json_object_get(kwargs, "tool_calls")) > 0)
			importer_count_dropped(imp, "tool calls", json_array_size(json_object_get(kwargs, "tool_calls")));
		text = content_text(imp, json_object_get(kwargs, "content"));
		conversation_add(c, role, text, mid, ts ? ts : h->newest_ts, h->newest_line);
		free(text);
	}
}

/*
 * The thread of checkpoints->rows[start] (sorted): made into records, or
 * rejected with its checkpoints when a messages blob is not JSON. The
 * checkpoint after it.
 */
static size_t
langgraph_thread(Importer *imp, RowList *checkpoints, size_t start, RowList *blobs, json_t *blob_index)
{
	Row		   *first = &checkpoints->rows[start];
	const char *thread = json_string_value(json_object_get(first->v, "thread_id"));
	ThreadHistory h = {0};
	size_t		end;
	Conversation *c;

	if (thread == NULL)
	{
		source_error(imp, first->lineno, NULL, "a checkpoint without a string thread_id");
		reject_rows(imp, "checkpoints", NULL, first, 1);
		return start + 1;
	}
	h.first_ts = json_object();
	for (end = start; end < checkpoints->n; end++)
	{
		const char *t = json_string_value(json_object_get(checkpoints->rows[end].v, "thread_id"));

		if (t == NULL || strcmp(t, thread) != 0)
			break;
		history_add(imp, &h, &checkpoints->rows[end], thread, blobs, blob_index);
	}
	if (h.undecodable)
	{
		source_error(imp, first->lineno, thread,
					 "thread \"%s\" has messages blobs that are not JSON (written by the Python saver, "
					 "as msgpack): this tool reads the JS saver's JSON blobs", thread);
		reject_rows(imp, "checkpoints", thread, first, end - start);
	}
	else
	{
		c = row_conversation(imp, first, "checkpoints", thread);
		if (h.newest)
			history_messages(imp, c, &h, thread);
		emit_conversation(imp, c);
	}
	json_decref(h.newest);
	json_decref(h.first_ts);
	return end;
}

void
import_langgraph(Importer *imp, FILE *in, const SourceReader *source)
{
	RowList		checkpoints = {0};
	RowList		blobs = {0};
	json_t	   *blob_index;
	size_t		start = 0;

	langgraph_rows(imp, in, &checkpoints, &blobs);
	blob_index = index_blobs(&blobs);
	while (start < checkpoints.n)
		start = langgraph_thread(imp, &checkpoints, start, &blobs, blob_index);
	json_decref(blob_index);
	rows_free(&checkpoints);
	rows_free(&blobs);
}
