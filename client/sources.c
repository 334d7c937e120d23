/*-------------------------------------------------------------------------
 *
 * sources.c
 *	  convctx import --from=SOURCE: other stores' histories as convctx
 *	  conversation groups.
 *
 * Each reader turns its source into conversations of messages (role,
 * text, id, time), and one function makes the records of every source:
 * a user message and the assistant messages that follow it become one
 * turn (the question, the answer joined from their texts, finalized at
 * the last of them); a user message without an answer becomes a turn
 * that was never finalized. What convctx has no place for is dropped and
 * counted, never silently: system, developer and tool messages, tool
 * calls, assistant messages before any question, content that is not
 * text. Ids are kept where the source has them (the user message's id
 * becomes the request id); turn ids are derived from the conversation
 * and the request id, so the same source always gives the same records.
 * Times the source does not hold are the import's start, one microsecond
 * apart in message order (docs/import-export.md says which).
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
 * Copyright (c) 2026, the convctx authors
 *
 * client/sources.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* vasprintf */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "convctx.h"

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

/* The import's start, the time of what has none. */
static time_t import_start;
static long import_start_usec;

static char *
xstrdup(const char *s)
{
	char	   *d;

	if (s == NULL)
		return NULL;
	d = strdup(s);
	if (d == NULL)
		fail(EXIT_ERROR, "out of memory");
	return d;
}

static char *
xsprintf(const char *fmt,...) __attribute__((format(printf, 1, 2)));

static char *
xsprintf(const char *fmt,...)
{
	va_list		ap;
	char	   *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fail(EXIT_ERROR, "out of memory");
	va_end(ap);
	return s;
}

static Conversation *
conversation_new(const char *id, const char *where)
{
	Conversation *c = calloc(1, sizeof(Conversation));

	if (c == NULL)
		fail(EXIT_ERROR, "out of memory");
	c->id = xstrdup(id);
	c->where = xstrdup(where);
	return c;
}

static void
conversation_add(Conversation *c, const char *role, const char *text, const char *id,
				 const char *time, long lineno)
{
	Message    *m;

	if (c->n == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 16;
		c->msgs = realloc(c->msgs, c->cap * sizeof(Message));
		if (c->msgs == NULL)
			fail(EXIT_ERROR, "out of memory");
	}
	m = &c->msgs[c->n++];
	m->role = xstrdup(role);
	m->text = xstrdup(text);
	m->id = xstrdup(id);
	m->time = xstrdup(time);
	m->lineno = lineno;
}

static void
conversation_free(Conversation *c)
{
	int			i;

	for (i = 0; i < c->n; i++)
	{
		free(c->msgs[i].role);
		free(c->msgs[i].text);
		free(c->msgs[i].id);
		free(c->msgs[i].time);
	}
	free(c->msgs);
	free(c->id);
	free(c->identity);
	free(c->created_at);
	free(c->updated_at);
	free(c->where);
	free(c);
}

/* The import's start plus usec microseconds, as RFC 3339 UTC. */
static char *
start_time_plus(long usec)
{
	time_t		secs = import_start + (import_start_usec + usec) / 1000000;
	long		frac = (import_start_usec + usec) % 1000000;
	struct tm	tm;
	char		buf[64];

	gmtime_r(&secs, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return xsprintf("%s.%06ldZ", buf, frac);
}

/*
 * A stable uuid for a turn: two 64-bit FNV-1a hashes of the conversation
 * and request ids, with the version and variant bits of a uuid of version
 * 8 (custom). Unique where it must be: among the turns of one session.
 */
static char *
turn_uuid(const char *conversation, const char *request)
{
	uint64_t	h1 = 0xcbf29ce484222325ULL;
	uint64_t	h2 = 0x84222325cbf29ce4ULL;
	const char *parts[2] = {conversation, request};
	int			p;
	unsigned char b[16];
	int			i;

	for (p = 0; p < 2; p++)
	{
		const unsigned char *s;

		for (s = (const unsigned char *) parts[p]; *s; s++)
		{
			h1 = (h1 ^ *s) * 0x100000001b3ULL;
			h2 = (h2 ^ *s) * 0x100000001b3ULL;
			h2 ^= h2 >> 29;
		}
		h1 = (h1 ^ 0xff) * 0x100000001b3ULL;	/* separator */
		h2 = (h2 ^ 0xfe) * 0x100000001b3ULL;
	}
	for (i = 0; i < 8; i++)
	{
		b[i] = (unsigned char) (h1 >> (56 - 8 * i));
		b[8 + i] = (unsigned char) (h2 >> (56 - 8 * i));
	}
	b[6] = (b[6] & 0x0f) | 0x80;
	b[8] = (b[8] & 0x3f) | 0x80;
	return xsprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
					b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
					b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static json_t *
json_str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* An open turn while a conversation is made into records. */
typedef struct TurnBuild
{
	bool		open;
	char	   *request_id;
	char	   *question;
	char	   *created_at;
	char	   *answer;			/* NULL until an assistant message */
	char	   *finalized_at;
	long		lineno;
} TurnBuild;

static void
emit_turn(Group *g, Conversation *c, TurnBuild *t, long turn_no)
{
	json_t	   *r;
	char	   *turn_id;

	if (!t->open)
		return;
	turn_id = turn_uuid(c->id, t->request_id);
	r = json_object();
	json_object_set_new(r, "type", json_string("turn"));
	json_object_set_new(r, "session_id", json_string(c->id));
	json_object_set_new(r, "turn_id", json_string(turn_id));
	json_object_set_new(r, "turn_no", json_integer(turn_no));
	json_object_set_new(r, "request_id", json_string(t->request_id));
	json_object_set_new(r, "identity_id", json_str_or_null(c->identity));
	json_object_set_new(r, "created_at", json_string(t->created_at));
	json_object_set_new(r, "finalized_at", json_str_or_null(t->answer ? t->finalized_at : NULL));
	json_object_set_new(r, "question_neutral", json_string(t->question));
	json_object_set_new(r, "answer_neutral", json_str_or_null(t->answer));
	group_add_json(g, r, t->lineno);
	free(turn_id);
	free(t->request_id);
	free(t->question);
	free(t->created_at);
	free(t->answer);
	free(t->finalized_at);
	memset(t, 0, sizeof(*t));
}

/*
 * Make a conversation's records and hand them to the importer: the
 * session record, then a turn per question.
 */
static void
emit_conversation(Importer *imp, Conversation *c)
{
	Group	   *g = group_new(c->id, c->where);
	TurnBuild	t;
	long		turn_no = 0;
	json_t	   *s;
	char	  **times = calloc(c->n + 1, sizeof(char *));
	int			i;
	const char *first = NULL;
	const char *last = NULL;

	if (times == NULL)
		fail(EXIT_ERROR, "out of memory");
	memset(&t, 0, sizeof(t));
	/* each message's time, or the import's start plus its position */
	for (i = 0; i < c->n; i++)
	{
		times[i] = c->msgs[i].time ? xstrdup(c->msgs[i].time) : start_time_plus(i);
		if (!first)
			first = times[i];
		last = times[i];
	}
	if (first == NULL)
		first = last = times[c->n] = start_time_plus(0);

	s = json_object();
	json_object_set_new(s, "type", json_string("session"));
	json_object_set_new(s, "session_id", json_string(c->id));
	json_object_set_new(s, "identity_id", json_str_or_null(c->identity));
	json_object_set_new(s, "linked_at", json_str_or_null(c->identity ? (c->created_at ? c->created_at : first) : NULL));
	json_object_set_new(s, "created_at", json_string(c->created_at ? c->created_at : first));
	json_object_set_new(s, "last_activity_at", json_string(c->updated_at ? c->updated_at : last));
	group_add_json(g, s, c->n ? c->msgs[0].lineno : 0);

	for (i = 0; i < c->n; i++)
	{
		Message    *m = &c->msgs[i];

		if (strcmp(m->role, "user") == 0 || strcmp(m->role, "human") == 0)
		{
			if (m->text == NULL)
			{
				importer_count_dropped(imp, "user messages without text", 1);
				continue;
			}
			emit_turn(g, c, &t, turn_no);
			t.open = true;
			turn_no++;
			t.request_id = m->id ? xstrdup(m->id) : xsprintf("msg-%d", i + 1);
			t.question = xstrdup(m->text);
			t.created_at = xstrdup(times[i]);
			t.lineno = m->lineno;
		}
		else if (strcmp(m->role, "assistant") == 0 || strcmp(m->role, "ai") == 0)
		{
			if (m->text == NULL || m->text[0] == '\0')
				importer_count_dropped(imp, "assistant messages without text (tool calls)", 1);
			else if (!t.open)
				importer_count_dropped(imp, "assistant messages before any question", 1);
			else
			{
				if (t.answer)
				{
					char	   *joined = xsprintf("%s\n\n%s", t.answer, m->text);

					free(t.answer);
					t.answer = joined;
				}
				else
					t.answer = xstrdup(m->text);
				free(t.finalized_at);
				t.finalized_at = xstrdup(times[i]);
			}
		}
		else if (strcmp(m->role, "system") == 0 || strcmp(m->role, "developer") == 0)
			importer_count_dropped(imp, "system and developer messages", 1);
		else if (strcmp(m->role, "tool") == 0 || strcmp(m->role, "function") == 0)
			importer_count_dropped(imp, "tool messages", 1);
		else
			importer_count_dropped(imp, "messages of other roles", 1);
	}
	emit_turn(g, c, &t, turn_no);
	for (i = 0; i <= c->n; i++)
		free(times[i]);
	free(times);
	importer_add(imp, g);
	conversation_free(c);
}

/*
 * Content
 */

/*
 * The text of a message's content: a string as it is; an array of
 * blocks or parts, the texts of its text blocks joined (others counted).
 * NULL when there is no text.
 */
static char *
content_text(Importer *imp, json_t *content)
{
	size_t		i;
	json_t	   *block;
	char	   *text = NULL;

	if (json_is_string(content))
		return xstrdup(json_string_value(content));
	if (!json_is_array(content))
		return NULL;
	json_array_foreach(content, i, block)
	{
		const char *type = json_string_value(json_object_get(block, "type"));
		json_t	   *value = json_object_get(block, "text");

		if (json_is_string(block))
			value = block;
		else if (type == NULL || !(strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
									 strcmp(type, "output_text") == 0))
			value = NULL;
		if (!json_is_string(value))
		{
			importer_count_dropped(imp, "content blocks that are not text", 1);
			continue;
		}
		if (text)
		{
			char	   *joined = xsprintf("%s%s", text, json_string_value(value));

			free(text);
			text = joined;
		}
		else
			text = xstrdup(json_string_value(value));
	}
	return text;
}

/* "FILE:LINE: error: ..." for a source record, then stop or reject. */
static void
source_error(Importer *imp, long lineno, const char *key, const char *fmt,...)
	__attribute__((format(printf, 4, 5)));

static void
source_error(Importer *imp, long lineno, const char *key, const char *fmt,...)
{
	va_list		ap;

	if (lineno > 0)
		fprintf(stderr, "%s:%ld: error: ", imp->input_name, lineno);
	else
		fprintf(stderr, "%s: error: ", imp->input_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (key)
		fprintf(stderr, " (source key %s)", key);
	fputc('\n', stderr);
}

/* A source record that cannot be read: its conversation is rejected. */
static void
reject_source(Importer *imp, const char *id, long lineno, const char *line)
{
	char		where[64];
	Group	   *g;

	snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
	g = group_new(id ? id : "", where);
	if (line)
		group_add(g, line, strlen(line), lineno);
	importer_reject(imp, g);
}

/*
 * Reading JSON Lines
 */

typedef struct LineReader
{
	FILE	   *in;
	char	   *line;
	size_t		cap;
	long		lineno;
} LineReader;

/*
 * The next non-empty line as JSON (integers as reals: only texts are
 * taken from foreign sources), or NULL at the end. A line that is not
 * JSON is an error with its line and column.
 */
static json_t *
next_json(Importer *imp, LineReader *r, bool *bad)
{
	ssize_t		len;
	json_error_t jerr;
	json_t	   *v;

	*bad = false;
	while ((len = getline(&r->line, &r->cap, r->in)) != -1)
	{
		r->lineno++;
		while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r'))
			r->line[--len] = '\0';
		if (r->lineno == 1 && len >= 3 && memcmp(r->line, "\xEF\xBB\xBF", 3) == 0)
		{
			memmove(r->line, r->line + 3, len - 2);
			len -= 3;
		}
		if (len == 0)
			continue;
		v = json_loadb(r->line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
		if (v == NULL)
		{
			fprintf(stderr, "%s:%ld:%d: error: %s\n", imp->input_name, r->lineno, jerr.column,
					json_error_code(&jerr) == json_error_null_character ?
					"\\u0000 is not allowed: PostgreSQL text cannot hold the NUL character" : jerr.text);
			*bad = true;
			return NULL;
		}
		return v;
	}
	if (ferror(r->in))
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	return NULL;
}

static const char *
str_field(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/*
 * --from=messages: a conversation a line, {"session_id", "identity_id",
 * "created_at", "messages": [{"role", "content", "created_at", "id"}]}.
 * Without a session_id, --session names the one conversation.
 */
static void
import_messages(Importer *imp, FILE *in)
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
		char		where[64];

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

/* Unix seconds (a JSON number) as RFC 3339 UTC, or NULL. */
static char *
unix_time(json_t *v)
{
	time_t		secs;
	struct tm	tm;
	char		buf[64];

	if (!json_is_number(v))
		return NULL;
	secs = (time_t) json_number_value(v);
	gmtime_r(&secs, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

/*
 * --from=openai-items: a conversation a line, as the Conversations API
 * returns it ({"id": "conv_...", "created_at", "metadata"}) with its
 * items (the item list object, or its data array) under "items". Items
 * that are not messages are counted; items carry no time.
 */
static void
import_openai_items(Importer *imp, FILE *in)
{
	LineReader	r = {in, NULL, 0, 0};
	json_t	   *v;
	bool		bad;

	for (;;)
	{
		Conversation *c;
		json_t	   *items;
		json_t	   *item;
		size_t		i;
		const char *id;
		char		where[64];

		v = next_json(imp, &r, &bad);
		if (bad)
		{
			reject_source(imp, NULL, r.lineno, r.line);
			continue;
		}
		if (v == NULL)
			break;
		id = str_field(v, "id");
		items = json_object_get(v, "items");
		if (json_is_object(items))
			items = json_object_get(items, "data");
		if (id == NULL || !json_is_array(items))
		{
			source_error(imp, r.lineno, id, "a conversation must have an \"id\" and its \"items\"");
			reject_source(imp, id, r.lineno, r.line);
			json_decref(v);
			continue;
		}
		snprintf(where, sizeof(where), "%s:%ld", imp->input_name, r.lineno);
		c = conversation_new(id, where);
		c->created_at = unix_time(json_object_get(v, "created_at"));
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
							 text, str_field(item, "id"), NULL, r.lineno);
			free(text);
		}
		emit_conversation(imp, c);
		json_decref(v);
	}
	free(r.line);
}

void
import_source(Importer *imp, FILE *in)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	import_start = ts.tv_sec;
	import_start_usec = ts.tv_nsec / 1000;

	if (strcmp(imp->o->from, "messages") == 0)
		import_messages(imp, in);
	else if (strcmp(imp->o->from, "openai-items") == 0)
		import_openai_items(imp, in);
	else
		fail(EXIT_ERROR, "unknown source \"%s\" (convctx, messages, openai-items, langchain, "
			 "langchain-js, mastra, langgraph-js)", imp->o->from);
}
