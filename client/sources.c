/*-------------------------------------------------------------------------
 *
 * sources.c
 *	  convctx import --from=SOURCE: the reader of each source, chosen by
 *	  its name.
 *
 * Sources:
 *	  messages		JSON Lines of {"session_id", "identity_id", "created_at",
 *					"messages": [{"role", "content", "created_at", "id"}]}
 *					(what convctx export --format=messages writes, and the
 *					messages arrays of chat APIs)
 *	  openai-items	JSON Lines of OpenAI conversations with their items
 *	  langchain		rows of langchain-postgres' PostgresChatMessageHistory
 *	  langchain-js	rows of @langchain/community's PostgresChatMessageHistory
 *	  mastra		rows of @mastra/pg's mastra_threads and mastra_messages
 *	  langgraph-js	rows of @langchain/langgraph-checkpoint-postgres'
 *					checkpoints and checkpoint_blobs (JSON blobs)
 * Table sources are read from a file of their rows as JSON objects
 * (SELECT row_to_json(t) FROM table t, one a line) or straight from the
 * library's database with --source-dsn.
 *
 * Each reader (source_*.c) turns its source into conversations of
 * messages and hands them to emit_conversation (source_conversation.c),
 * which makes their records.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/sources.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "import.h"
#include "sources.h"
#include "util.h"

/* The readers, by the name --from gives them. */
static const SourceReader readers[] = {
	{"messages", import_messages, false, NULL},
	{"openai-items", import_openai_items, false, NULL},
	{"langchain", import_langchain, true, "chat_history"},
	{"langchain-js", import_langchain, true, "langchain_chat_histories"},
	{"mastra", import_mastra, true, NULL},
	{"langgraph-js", import_langgraph, true, NULL},
};

#define NREADERS (sizeof(readers) / sizeof(readers[0]))

void
import_source(Importer *imp, FILE *in)
{
	const SourceReader *source = NULL;
	size_t		i;

	set_import_start();
	for (i = 0; i < NREADERS && source == NULL; i++)
		if (strcmp(readers[i].name, imp->o->from) == 0)
			source = &readers[i];
	if (source == NULL)
	{
		char	   *names = NULL;
		size_t		len = 0;
		size_t		cap = 0;

		append_text(&names, &len, &cap, "convctx", strlen("convctx"));
		for (i = 0; i < NREADERS; i++)
		{
			append_text(&names, &len, &cap, ", ", 2);
			append_text(&names, &len, &cap, readers[i].name, strlen(readers[i].name));
		}
		fail(EXIT_ERROR, "unknown source \"%s\" (%s)", imp->o->from, names);
	}
	if (imp->o->source_dsn && !source->reads_tables)
		fail(EXIT_ERROR, "--source-dsn reads a library's tables: --from=%s reads a file", imp->o->from);
	source->read(imp, in, source);
}
