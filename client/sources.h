/*-------------------------------------------------------------------------
 *
 * sources.h
 *	  convctx import --from=SOURCE: the readers of other stores' histories,
 *	  and what they share.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/sources.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SOURCES_H
#define CONVCTX_SOURCES_H

#include <jansson.h>

#include "import.h"

/* A source --from names, and how it is read (sources.c). */
typedef struct SourceReader SourceReader;
typedef void (*SourceReadFunc) (Importer *imp, FILE *in, const SourceReader *source);

struct SourceReader
{
	const char *name;			/* what --from calls it */
	SourceReadFunc read;		/* reads in, or the tables of --source-dsn */
	bool		reads_tables;	/* a library's tables: --source-dsn may name them */
	const char *table;			/* the table --source-table names by default */
};

/* Read the source --from names into imp's groups. */
extern void import_source(Importer *imp, FILE *in);

/* The readers: source_messages.c, source_openai.c, ... */
extern void import_messages(Importer *imp, FILE *in, const SourceReader *source);
extern void import_openai_items(Importer *imp, FILE *in, const SourceReader *source);
extern void import_langchain(Importer *imp, FILE *in, const SourceReader *source);
extern void import_mastra(Importer *imp, FILE *in, const SourceReader *source);
extern void import_langgraph(Importer *imp, FILE *in, const SourceReader *source);

/* source_conversation.c: conversations of messages, made into records */

/* One message of a conversation, as a source holds it. */
typedef struct Message
{
	char	   *role;			/* user, assistant, system, tool, ... */
	char	   *text;			/* its text, NULL when it has none */
	char	   *id;				/* the source's id, or NULL */
	char	   *time;			/* timestamptz input, or NULL */
	long		lineno;			/* where it was read, or 0 */
} Message;

typedef struct Conversation
{
	char	   *id;
	char	   *identity;		/* or NULL: anonymous */
	char	   *created_at;		/* or NULL: its first message's time */
	char	   *updated_at;		/* or NULL: its last message's time */
	char	   *where;			/* the source key, for messages */
	Message    *msgs;
	int			n;
	int			cap;
} Conversation;

extern void set_import_start(void);
extern Conversation *conversation_new(const char *id, const char *where);
extern void conversation_add(Conversation *c, const char *role, const char *text, const char *id,
							 const char *time, long lineno);
extern void conversation_free(Conversation *c);
extern void emit_conversation(Importer *imp, Conversation *c);

/* source_input.c: reading JSON Lines and tables' rows; errors */

/* A file of JSON Lines being read. */
typedef struct LineReader
{
	FILE	   *in;
	char	   *line;
	size_t		cap;
	long		lineno;
} LineReader;

/* The conversation of line v of r, or NULL when it rejected the line. */
typedef Conversation *(*LineConversationFunc) (Importer *imp, LineReader *r, json_t *v, void *state);

/* A row of a library's table, as a JSON object. */
typedef struct Row
{
	json_t	   *v;
	long		lineno;			/* line in the file, or row number of the query */
	long		seq;			/* order read */
} Row;

typedef struct RowList
{
	Row		   *rows;
	size_t		n;
	size_t		cap;
} RowList;

extern char *content_text(Importer *imp, json_t *content);
extern void source_error(Importer *imp, long lineno, const char *key, const char *fmt,...)
			__attribute__((format(printf, 4, 5)));
extern void reject_source(Importer *imp, const char *id, long lineno, const char *line);
extern void read_line_conversations(Importer *imp, FILE *in, LineConversationFunc convert,
									void *state);
extern Conversation *line_conversation(Importer *imp, LineReader *r, const char *id);
extern const char *str_field(json_t *obj, const char *key);
extern void rows_free(RowList *l);
extern void rows_from_file(Importer *imp, FILE *in, RowList *all);
extern void rows_from_file_split(Importer *imp, FILE *in, int (*which) (json_t *row),
								 RowList *first, RowList *second);
extern PGconn *connect_source(Importer *imp);
extern void rows_from_table(Importer *imp, PGconn *src, const char *table, const char *alias,
							const char *rest, RowList *rows);
extern char *key_text(json_t *v);
extern void rows_sort(RowList *l, const char *key, const char *key2);
extern void group_add_row(Group *g, Row *r);
extern Conversation *row_conversation(Importer *imp, Row *r, const char *table, const char *id);
extern void reject_rows(Importer *imp, const char *table, const char *id, Row *rows, size_t n);

#endif
