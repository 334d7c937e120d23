/*-------------------------------------------------------------------------
 *
 * source_openai.c
 *	  convctx import --from=openai-items: OpenAI conversations with their
 *	  items, as the Conversations API returns them.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_openai.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "import.h"
#include "sources.h"
#include "util.h"

/* Unix seconds (a JSON number) as RFC 3339 UTC, or NULL. */
static char *
unix_time(json_t *v)
{
	time_t		secs;
	struct tm	tm;
	char		buf[64];

	/* from 1970 to 9999: a time a conversation can have */
	if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) < 253402300800.0))
		return NULL;
	secs = (time_t) json_number_value(v);
	if (gmtime_r(&secs, &tm) == NULL)
		return NULL;
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

/* The conversation of line v (r's last), or NULL when it is rejected. */
static Conversation *
openai_conversation(Importer *imp, LineReader *r, json_t *v, void *state)
{
	const char *id = str_field(v, "id");
	json_t	   *items = json_object_get(v, "items");
	json_t	   *item;
	size_t		i;
	char	   *created_at;
	Conversation *c;

	if (json_is_object(items))
		items = json_object_get(items, "data");
	if (id == NULL || !json_is_array(items))
	{
		source_error(imp, r->lineno, id, "a conversation must have an \"id\" and its \"items\"");
		reject_source(imp, id, r->lineno, r->line);
		return NULL;
	}
	created_at = json_object_get(v, "created_at") ? unix_time(json_object_get(v, "created_at")) : NULL;
	if (json_object_get(v, "created_at") && created_at == NULL)
	{
		source_error(imp, r->lineno, id, "created_at must be a time in Unix seconds");
		reject_source(imp, id, r->lineno, r->line);
		return NULL;
	}
	c = line_conversation(imp, r, id);
	c->created_at = created_at;
	json_array_foreach(items, i, item)
	{
		const char *type = str_field(item, "type");
		char	   *text;

		if (type == NULL || strcmp(type, "message") != 0)
		{
			importer_count_dropped(imp, "conversation items that are not messages", 1);
			continue;
		}
		text = content_text(imp, json_object_get(item, "content"));
		conversation_add(c, str_field(item, "role") ? str_field(item, "role") : "unknown",
						 text, str_field(item, "id"), NULL, r->lineno);
		free(text);
	}
	return c;
}

/*
 * --from=openai-items: a conversation a line, as the Conversations API
 * returns it ({"id": "conv_...", "created_at", "metadata"}) with its
 * items (the item list object, or its data array) under "items". Items
 * that are not messages are counted; items carry no time.
 */
void
import_openai_items(Importer *imp, FILE *in, const SourceReader *source)
{
	read_line_conversations(imp, in, openai_conversation, NULL);
}
