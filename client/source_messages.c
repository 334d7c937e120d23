/*-------------------------------------------------------------------------
 *
 * source_messages.c
 *	  convctx import --from=messages: JSON Lines of conversations with
 *	  their messages arrays, as chat APIs hold them.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_messages.c
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
 * The conversation of line v (r's last), or NULL when it is rejected
 * (after saying why). *without_id (state) counts those without a
 * session_id.
 */
static Conversation *
messages_conversation(Importer *imp, LineReader *r, json_t *v, void *state)
{
	int		   *without_id = state;
	const char *id = str_field(v, "session_id");
	json_t	   *msgs = json_object_get(v, "messages");
	json_t	   *m;
	size_t		i;
	Conversation *c;

	if (id == NULL)
	{
		id = imp->o->session_id;
		if (id == NULL || ++*without_id > 1)
		{
			source_error(imp, r->lineno, NULL, id ? "a second conversation without a session_id: --session names one"
						 : "a conversation without a session_id: give it one, or --session=ID");
			reject_source(imp, NULL, r->lineno, r->line);
			return NULL;
		}
	}
	if (!json_is_array(msgs))
	{
		source_error(imp, r->lineno, id, "a conversation must have a \"messages\" array");
		reject_source(imp, id, r->lineno, r->line);
		return NULL;
	}
	c = line_conversation(imp, r, id);
	c->identity = xstrdup(str_field(v, "identity_id"));
	c->created_at = xstrdup(str_field(v, "created_at"));
	json_array_foreach(msgs, i, m)
	{
		const char *role = str_field(m, "role");
		char	   *text;

		if (role == NULL)
		{
			source_error(imp, r->lineno, id, "message %zu has no \"role\"", i + 1);
			conversation_free(c);
			reject_source(imp, id, r->lineno, r->line);
			return NULL;
		}
		text = content_text(imp, json_object_get(m, "content"));
		conversation_add(c, role, text, str_field(m, "id"), str_field(m, "created_at"), r->lineno);
		free(text);
	}
	return c;
}

/*
 * --from=messages: a conversation a line, {"session_id", "identity_id",
 * "created_at", "messages": [{"role", "content", "created_at", "id"}]}.
 * Without a session_id, --session names the one conversation.
 */
void
import_messages(Importer *imp, FILE *in, const SourceReader *source)
{
	int			without_id = 0;

	read_line_conversations(imp, in, messages_conversation, &without_id);
}
