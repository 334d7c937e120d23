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

#include "sources.h"

/*
 * --from=messages: a conversation a line, {"session_id", "identity_id",
 * "created_at", "messages": [{"role", "content", "created_at", "id"}]}.
 * Without a session_id, --session names the one conversation.
 */
void
import_messages(Importer *imp, FILE *in, const SourceReader *source)
{
	LineReader	r = {in, NULL, 0, 0};
	json_t	   *v;
	bool		bad;
	int			without_id = 0;

	for (;;)
	{
		Conversation *c;
		json_t	   *msgs;
		json_t	   *m;
		size_t		i;
		const char *id;
		char		where[WHERE_LEN];

		v = next_json(imp, &r, &bad);
		if (bad)
		{
			reject_source(imp, NULL, r.lineno, r.line);
			continue;
		}
		if (v == NULL)
			break;
		id = str_field(v, "session_id");
		if (id == NULL)
		{
			id = imp->o->session_id;
			if (id == NULL || ++without_id > 1)
			{
				source_error(imp, r.lineno, NULL, id ? "a second conversation without a session_id: --session names one"
							 : "a conversation without a session_id: give it one, or --session=ID");
				reject_source(imp, NULL, r.lineno, r.line);
				json_decref(v);
				continue;
			}
		}
		msgs = json_object_get(v, "messages");
		if (!json_is_array(msgs))
		{
			source_error(imp, r.lineno, id, "a conversation must have a \"messages\" array");
			reject_source(imp, id, r.lineno, r.line);
			json_decref(v);
			continue;
		}
		snprintf(where, sizeof(where), "%s:%ld", imp->input_name, r.lineno);
		c = conversation_new(id, where);
		c->identity = xstrdup(str_field(v, "identity_id"));
		c->created_at = xstrdup(str_field(v, "created_at"));
		bad = false;
		json_array_foreach(msgs, i, m)
		{
			const char *role = str_field(m, "role");
			char	   *text;

			if (role == NULL)
			{
				source_error(imp, r.lineno, id, "message %zu has no \"role\"", i + 1);
				bad = true;
				break;
			}
			text = content_text(imp, json_object_get(m, "content"));
			conversation_add(c, role, text, str_field(m, "id"), str_field(m, "created_at"), r.lineno);
			free(text);
		}
		if (bad)
		{
			conversation_free(c);
			reject_source(imp, id, r.lineno, r.line);
		}
		else
			emit_conversation(imp, c);
		json_decref(v);
	}
	free(r.line);
}
