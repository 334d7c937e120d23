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
 * A message without a time takes its conversation's, or when that is
 * unknown too, the import's start plus its position in microseconds
 * (docs/import-export.md says which sources hold which times).
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

#include "sources.h"

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

/* Append len bytes of s to the malloc'd string *buf (of length *len, room *cap). */
static void
append_text(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap)
	{
		*cap = (*len + n + 1) * 2;
		*buf = realloc(*buf, *cap);
		if (*buf == NULL)
			fail(EXIT_ERROR, "out of memory");
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
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
 * An ISO 8601 time (YYYY-MM-DD, "T" or a space, hh:mm:ss, a fraction, then
 * "Z", an offset +hh, +hhmm or +hh:mm, or nothing) as microseconds since
 * 1970 into *usec, in UTC when *zoned says it has a zone; false when it has
 * another form.
 */
static bool
iso_time_usec(const char *text, long long *usec, bool *zoned)
{
	struct tm	tm;
	int			n = 0;
	long long	frac = 0;
	int			digits = 0;
	int			oh = 0;
	int			om = 0;
	int			sign;
	const char *p;

	memset(&tm, 0, sizeof(tm));
	if (text == NULL ||
		sscanf(text, "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 || n == 0)
		return false;
	p = text + n;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits++ < 6)
				frac = frac * 10 + (*p - '0');
	for (; digits < 6; digits++)
		frac *= 10;
	*zoned = *p != '\0';
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-')
	{
		sign = *p++ == '-' ? -1 : 1;
		if (sscanf(p, "%2d%n", &oh, &n) != 1)
			return false;
		p += n;
		if (*p == ':')
			p++;
		if (*p >= '0' && *p <= '9' && sscanf(p, "%2d%n", &om, &n) == 1)
			p += n;
		oh *= sign;
		om *= sign;
	}
	if (*p != '\0')
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*usec = ((long long) timegm(&tm) - oh * 3600LL - om * 60LL) * 1000000LL + frac;
	return true;
}

/*
 * The later of two times: b when both are ISO 8601 times, both with a zone
 * or both without, and b is later; else a (or b when a is NULL).
 */
static const char *
later_time(const char *a, const char *b)
{
	long long	ua;
	long long	ub;
	bool		za;
	bool		zb;

	if (a == NULL)
		return b;
	if (b != NULL && iso_time_usec(a, &ua, &za) && iso_time_usec(b, &ub, &zb) && za == zb &&
		ub > ua)
		return b;
	return a;
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
	size_t		answer_len;
	size_t		answer_cap;
	char	   *finalized_at;
	long		lineno;
	int			question_at;	/* the messages it is made of */
	int			answers;
	int			first_answer_at;
	int			last_answer_at;
} TurnBuild;

/* a value in quotes, or "none": three arguments for "%s%s%s" */
#define QUOTED_OR_NONE(s) (s) ? "\"" : "", (s) ? (s) : "none", (s) ? "\"" : ""

/* Message i of c as its source has it: "message 3 (id "m1", time "...")". */
static char *
message_name(Conversation *c, int i, bool with_time)
{
	Message    *m = &c->msgs[i];
	char	   *id = m->id ? xsprintf("id \"%s\"", m->id) : xstrdup("no id");
	char	   *time = !with_time ? xstrdup("") : m->time ? xsprintf(", time \"%s\"", m->time)
		: xstrdup(", no time");
	char	   *name = xsprintf("message %d (%s%s)", i + 1, id, time);

	free(id);
	free(time);
	return name;
}

static void
emit_turn(Group *g, Conversation *c, TurnBuild *t, long turn_no)
{
	json_t	   *r;
	RecordOrigin origin;
	char	   *question;
	char	   *answer = NULL;
	char	   *as_request;

	if (!t->open)
		return;
	/* errors name the messages the turn is made of, not its turn id */
	question = message_name(c, t->question_at, true);
	if (t->answers == 1)
		answer = message_name(c, t->last_answer_at, true);
	else if (t->answers > 1)
	{
		char	   *last_answer = message_name(c, t->last_answer_at, true);

		answer = xsprintf("messages %d to %d, the last %s", t->first_answer_at + 1, t->last_answer_at + 1,
						  last_answer);
		free(last_answer);
	}
	as_request = c->msgs[t->question_at].id && strcmp(c->msgs[t->question_at].id, t->request_id) == 0
		? xstrdup("") : xsprintf(" as request \"%s\"", t->request_id);
	origin.made_of = xsprintf("the turn made of %s of conversation \"%s\"%s, %s%s", question, c->id,
							  as_request, answer ? "answered by " : "not answered", answer ? answer : "");
	free(as_request);
	origin.generated = turn_uuid(c->id, t->request_id);
	free(question);
	question = message_name(c, t->question_at, false);
	origin.generated_as = xsprintf("of %s", question);
	free(question);
	free(answer);

	r = json_object();
	json_object_set_new(r, "type", json_string("turn"));
	json_object_set_new(r, "session_id", json_string(c->id));
	json_object_set_new(r, "turn_id", json_string(origin.generated));
	json_object_set_new(r, "turn_no", json_integer(turn_no));
	json_object_set_new(r, "request_id", json_string(t->request_id));
	json_object_set_new(r, "identity_id", json_str_or_null(c->identity));
	json_object_set_new(r, "created_at", json_string(t->created_at));
	json_object_set_new(r, "finalized_at", json_str_or_null(t->answer ? t->finalized_at : NULL));
	json_object_set_new(r, "question_neutral", json_string(t->question));
	json_object_set_new(r, "answer_neutral", json_str_or_null(t->answer));
	group_add_json(g, r, t->lineno, &origin);
	free(t->request_id);
	free(t->question);
	free(t->created_at);
	free(t->answer);
	free(t->finalized_at);
	memset(t, 0, sizeof(*t));
}

/*
 * The time of each message of c into times[0..n): as written, except
 *	- a time earlier than the one before it in the conversation (its
 *	  created_at, the messages before it), as a clock a millisecond off
 *	  writes: moved up to that time, and counted in a warning;
 *	- no time: the time before it, else the conversation's, else its
 *	  first message's, else the import's start plus its position in
 *	  microseconds.
 * A time this tool cannot read (not ISO 8601) is passed on as written,
 * for the server to read or refuse.
 */
static void
message_times(Importer *imp, Conversation *c, char **times)
{
	const char *before = NULL;	/* the latest time so far, as written */
	long long	before_usec = 0;
	const char *first_time = NULL;
	long long	usec;
	bool		zoned;
	int			i;

	for (i = 0; i < c->n && first_time == NULL; i++)
		first_time = c->msgs[i].time;
	if (c->created_at && iso_time_usec(c->created_at, &before_usec, &zoned))
		before = c->created_at;
	for (i = 0; i < c->n; i++)
	{
		Message    *m = &c->msgs[i];

		if (m->time == NULL)
			times[i] = before ? xstrdup(before) : c->created_at ? xstrdup(c->created_at)
				: first_time ? xstrdup(first_time) : start_time_plus(i);
		else if (before && iso_time_usec(m->time, &usec, &zoned) && usec < before_usec)
		{
			char	   *name = message_name(c, i, false);

			importer_count_warning(imp, "message times earlier than the time before them, moved up to it",
								   xsprintf("%s, %s of conversation \"%s\": \"%s\" after \"%s\"", c->where,
											name, c->id, m->time, before));
			free(name);
			times[i] = xstrdup(before);
		}
		else
		{
			if (iso_time_usec(m->time, &before_usec, &zoned))
				before = m->time;
			times[i] = xstrdup(m->time);
		}
	}
}

/*
 * Make a conversation's records and hand them to the importer: the
 * session record, then a turn per question. A user message without text
 * cannot be a question (convctx refuses an empty one): it is dropped with
 * the assistant messages that answer it, counted. A user message whose id
 * came before in the conversation gets a request id of its own, the id
 * and "#2", "#3"...: the same every time, so that importing the source
 * again finds its turns there. An anonymous conversation whose last
 * activity is the import's time (its source holds none) would look
 * active now and be deleted by the first purge after
 * convctx.session_ttl: refused unless --as-identity links it or
 * --allow-anonymous takes it as it is (counted, and warned about).
 */
static void
emit_conversation(Importer *imp, Conversation *c)
{
	Group	   *g = group_new(c->id, c->where);
	TurnBuild	t;
	long		turn_no = 0;
	json_t	   *s;
	RecordOrigin origin = {0};
	char	  **times = calloc(c->n + 1, sizeof(char *));
	json_t	   *request_ids = json_object();
	bool		unanswerable = false;	/* after a user message without text */
	int			i;
	const char *first = NULL;
	const char *last = NULL;
	bool		undated = c->updated_at == NULL && c->created_at == NULL &&
		(c->n == 0 || c->msgs[c->n - 1].time == NULL);

	if (times == NULL)
		fail(EXIT_ERROR, "out of memory");
	memset(&t, 0, sizeof(t));
	message_times(imp, c, times);
	if (c->n > 0)
	{
		first = times[0];
		last = times[c->n - 1];
	}
	else
		first = last = times[c->n] = start_time_plus(0);

	s = json_object();
	json_object_set_new(s, "type", json_string("session"));
	json_object_set_new(s, "session_id", json_string(c->id));
	json_object_set_new(s, "identity_id", json_str_or_null(c->identity));
	json_object_set_new(s, "linked_at", json_str_or_null(c->identity ? (c->created_at ? c->created_at : first) : NULL));
	json_object_set_new(s, "created_at", json_string(c->created_at ? c->created_at : first));
	/* a source may have updated its conversation before its last message */
	json_object_set_new(s, "last_activity_at", json_string(later_time(c->updated_at, last)));
	/* errors name the times the source holds, not the ones made of them */
	origin.made_of = xsprintf("the session record made of conversation \"%s\" (its created_at %s%s%s, "
							  "its updated_at %s%s%s, the times of its first and last messages %s%s%s and %s%s%s)",
							  c->id, QUOTED_OR_NONE(c->created_at), QUOTED_OR_NONE(c->updated_at),
							  QUOTED_OR_NONE(c->n ? c->msgs[0].time : NULL),
							  QUOTED_OR_NONE(c->n ? c->msgs[c->n - 1].time : NULL));
	group_add_json(g, s, c->n ? c->msgs[0].lineno : 0, &origin);

	for (i = 0; i < c->n; i++)
	{
		Message    *m = &c->msgs[i];

		if (strcmp(m->role, "user") == 0 || strcmp(m->role, "human") == 0)
		{
			char	   *request_id;

			emit_turn(g, c, &t, turn_no);
			unanswerable = m->text == NULL || m->text[0] == '\0';
			if (unanswerable)
			{
				importer_count_dropped(imp, "user messages without text", 1);
				continue;
			}
			request_id = m->id ? xstrdup(m->id) : xsprintf("msg-%d", i + 1);
			if (json_object_get(request_ids, request_id))
			{
				char	   *id = request_id;
				char	   *name = message_name(c, i, false);
				int			k;

				request_id = NULL;
				for (k = 2; request_id == NULL || json_object_get(request_ids, request_id); k++)
				{
					free(request_id);
					request_id = xsprintf("%s#%d", id, k);
				}
				importer_count_warning(imp, "message ids repeated in a conversation, "
									   "each given a request id of its own",
									   xsprintf("%s, %s of conversation \"%s\": request \"%s\"",
												c->where, name, c->id, request_id));
				free(name);
				free(id);
			}
			json_object_set_new(request_ids, request_id, json_true());
			t.open = true;
			turn_no++;
			t.request_id = request_id;
			t.question = xstrdup(m->text);
			t.created_at = xstrdup(times[i]);
			t.lineno = m->lineno;
			t.question_at = i;
		}
		else if (strcmp(m->role, "assistant") == 0 || strcmp(m->role, "ai") == 0)
		{
			if (m->text == NULL || m->text[0] == '\0')
				importer_count_dropped(imp, "assistant messages without text", 1);
			else if (unanswerable)
				importer_count_dropped(imp, "answers to user messages without text", 1);
			else if (!t.open)
				importer_count_dropped(imp, "assistant messages before any question", 1);
			else
			{
				if (t.answer)
					append_text(&t.answer, &t.answer_len, &t.answer_cap, "\n\n", 2);
				append_text(&t.answer, &t.answer_len, &t.answer_cap, m->text, strlen(m->text));
				free(t.finalized_at);
				t.finalized_at = xstrdup(times[i]);
				if (t.answers++ == 0)
					t.first_answer_at = i;
				t.last_answer_at = i;
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
	json_decref(request_ids);
	for (i = 0; i <= c->n; i++)
		free(times[i]);
	free(times);
	if (undated && c->identity == NULL && imp->o->as_identity == NULL)
	{
		if (!imp->o->allow_anonymous)
		{
			fprintf(stderr, "%s: error: anonymous conversation \"%s\" has no time in its source: imported, "
					"it would take the import's time and be deleted by the first purge after "
					"convctx.session_ttl\n", c->where, c->id);
			fprintf(stderr, "HINT:  Link it to an identity with --as-identity=ID, or take it as it is "
					"with --allow-anonymous.\n");
			importer_reject(imp, g);
			conversation_free(c);
			return;
		}
		imp->anonymous_undated++;
	}
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
	size_t		len = 0;
	size_t		cap = 0;

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
		else if (type && (strcmp(type, "tool-invocation") == 0 || strcmp(type, "tool_use") == 0 ||
						  strcmp(type, "tool_result") == 0 || strcmp(type, "function_call") == 0))
		{
			importer_count_dropped(imp, "tool calls", 1);
			continue;
		}
		else if (type && strcmp(type, "step-start") == 0)
			continue;			/* a marker between the steps of a Mastra answer */
		else if (type == NULL || !(strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
									 strcmp(type, "output_text") == 0))
			value = NULL;
		if (!json_is_string(value))
		{
			importer_count_dropped(imp, "content blocks that are not text", 1);
			continue;
		}
		append_text(&text, &len, &cap, json_string_value(value), json_string_length(value));
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
	char		where[WHERE_LEN];
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
		char	   *created_at;
		json_t	   *items;
		json_t	   *item;
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
		created_at = json_object_get(v, "created_at") ? unix_time(json_object_get(v, "created_at")) : NULL;
		if (json_object_get(v, "created_at") && created_at == NULL)
		{
			source_error(imp, r.lineno, id, "created_at must be a time in Unix seconds");
			reject_source(imp, id, r.lineno, r.line);
			json_decref(v);
			continue;
		}
		snprintf(where, sizeof(where), "%s:%ld", imp->input_name, r.lineno);
		c = conversation_new(id, where);
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
							 text, str_field(item, "id"), NULL, r.lineno);
			free(text);
		}
		emit_conversation(imp, c);
		json_decref(v);
	}
	free(r.line);
}

/*
 * Table sources: rows of a library's tables, as JSON objects
 */

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

static void
rows_add(RowList *l, json_t *v, long lineno)
{
	if (l->n == l->cap)
	{
		l->cap = l->cap ? l->cap * 2 : 256;
		l->rows = realloc(l->rows, l->cap * sizeof(Row));
		if (l->rows == NULL)
			fail(EXIT_ERROR, "out of memory");
	}
	l->rows[l->n].v = v;
	l->rows[l->n].lineno = lineno;
	l->rows[l->n].seq = (long) l->n;
	l->n++;
}

static void
rows_free(RowList *l)
{
	size_t		i;

	for (i = 0; i < l->n; i++)
		json_decref(l->rows[i].v);
	free(l->rows);
	memset(l, 0, sizeof(*l));
}

/*
 * Every row of the file: one JSON object a line. A line that is not one
 * stops the import (a file of rows has no conversations to tell apart
 * before it is read).
 */
static void
rows_from_file(Importer *imp, FILE *in, RowList *all)
{
	LineReader	r = {in, NULL, 0, 0};
	json_t	   *v;
	bool		bad;

	for (;;)
	{
		v = next_json(imp, &r, &bad);
		if (bad)
			importer_abort(imp);
		if (v == NULL)
			break;
		if (!json_is_object(v))
		{
			source_error(imp, r.lineno, NULL, "a row must be a JSON object (SELECT row_to_json(t) FROM table t)");
			importer_abort(imp);
		}
		rows_add(all, v, r.lineno);
	}
	free(r.line);
}

/* The rows a query of the source database returns (one json text column). */
static void
rows_from_query(Importer *imp, PGconn *src, const char *what, const char *sql, RowList *all)
{
	PGresult   *res = PQexec(src, sql);
	int			i;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fail(PQstatus(src) == CONNECTION_OK ? EXIT_ERROR : EXIT_CONNECTION,
			 "reading %s from the source database: %s", what, PQerrorMessage(src));
	for (i = 0; i < PQntuples(res); i++)
	{
		json_error_t jerr;
		json_t	   *v = json_loads(PQgetvalue(res, i, 0), JSON_DECODE_INT_AS_REAL, &jerr);

		if (v == NULL)
			fail(EXIT_ERROR, "reading %s: row %d: %s", what, i + 1, jerr.text);
		rows_add(all, v, 0);
	}
	PQclear(res);
}

/* Connect to the library's database (--source-dsn): a connection string; UTF-8. */
static PGconn *
connect_source(Importer *imp)
{
	const char *const keywords[] = {"dbname", "client_encoding", NULL};
	const char *const values[] = {imp->o->source_dsn, "UTF8", NULL};
	PGconn	   *src = PQconnectdbParams(keywords, values, 1);

	if (PQstatus(src) != CONNECTION_OK)
		fail(EXIT_CONNECTION, "could not connect to the source database: %s", PQerrorMessage(src));
	/* one snapshot of the source, and times in UTC */
	PQclear(PQexec(src, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
	PQclear(PQexec(src, "SET LOCAL TimeZone = 'UTC'"));
	return src;
}

/* schema.table, quoted for SQL. */
static char *
qualified_table(PGconn *src, const char *schema, const char *table)
{
	char	   *qs = PQescapeIdentifier(src, schema ? schema : "public", strlen(schema ? schema : "public"));
	char	   *qt = PQescapeIdentifier(src, table, strlen(table));
	char	   *q = xsprintf("%s.%s", qs, qt);

	PQfreemem(qs);
	PQfreemem(qt);
	return q;
}

/* A row's key as text: a string, or a number (a serial id). */
static char *
key_text(json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_number(v))
		return xsprintf("%.0f", json_number_value(v));
	return NULL;
}

static const char *sort_key;	/* the keys rows_sort orders by */
static const char *sort_key2;

/* A key of a row for ordering: a string, or a number printed; "" else. */
static void
row_key(json_t *row, const char *key, char *buf, size_t size, const char **out)
{
	json_t	   *v = key ? json_object_get(row, key) : NULL;

	if (json_is_string(v))
		*out = json_string_value(v);
	else if (json_is_number(v))
	{
		/* serial ids: zero-padded, so that they order as numbers */
		snprintf(buf, size, "%030.0f", json_number_value(v));
		*out = buf;
	}
	else
		*out = "";
}

static int
row_cmp(const void *a, const void *b)
{
	const Row  *ra = a;
	const Row  *rb = b;
	char		ba[40],
				bb[40];
	const char *ka,
			   *kb;
	int			c;

	row_key(ra->v, sort_key, ba, sizeof(ba), &ka);
	row_key(rb->v, sort_key, bb, sizeof(bb), &kb);
	if ((c = strcmp(ka, kb)) != 0)
		return c;
	row_key(ra->v, sort_key2, ba, sizeof(ba), &ka);
	row_key(rb->v, sort_key2, bb, sizeof(bb), &kb);
	if ((c = strcmp(ka, kb)) != 0)
		return c;
	return ra->seq < rb->seq ? -1 : ra->seq > rb->seq;
}

/*
 * Order rows by conversation, then by key2 (the order the library reads
 * them in: a serial id, a time), then as read: a file of rows may hold
 * them in any order (SELECT row_to_json(t) FROM t has none), and a
 * database orders text by its collation, not in the byte order that
 * comparing ids here (the merge of Mastra's threads and messages) needs.
 */
static void
rows_sort(RowList *l, const char *key, const char *key2)
{
	if (l->n == 0)
		return;
	sort_key = key;
	sort_key2 = key2;
	qsort(l->rows, l->n, sizeof(Row), row_cmp);
}

/* A row's JSON text, for the reject file. */
static char *
row_text(Row *r)
{
	char	   *t = json_dumps(r->v, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (t == NULL)
		fail(EXIT_ERROR, "out of memory");
	return t;
}

/* Reject the conversation of rows[from..to): its rows go to the reject file. */
static void
reject_rows(Importer *imp, const char *id, const char *where, Row *rows, size_t n)
{
	Group	   *g = group_new(id ? id : "", where);
	size_t		i;

	for (i = 0; i < n; i++)
	{
		char	   *t = row_text(&rows[i]);

		group_add(g, t, strlen(t), rows[i].lineno);
		free(t);
	}
	importer_reject(imp, g);
}

static char *
where_of(Importer *imp, Row *r, const char *table, const char *id)
{
	return r->lineno > 0 ? xsprintf("%s:%ld", imp->input_name, r->lineno)
		: xsprintf("%s %s", table, id ? id : "?");
}

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

static void
import_langchain(Importer *imp, FILE *in, bool js)
{
	RowList		rows = {0};
	size_t		i = 0;
	const char *table = imp->o->source_table ? imp->o->source_table
		: (js ? "langchain_chat_histories" : "chat_history");

	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);
		char	   *q = qualified_table(src, imp->o->source_schema, table);
		char	   *sql = xsprintf("SELECT pg_catalog.row_to_json(t)::pg_catalog.text FROM %s t", q);

		rows_from_query(imp, src, table, sql, &rows);
		PQfinish(src);
		free(sql);
		free(q);
	}
	else
		rows_from_file(imp, in, &rows);
	rows_sort(&rows, "session_id", "id");

	while (i < rows.n)
	{
		char	   *sid = key_text(json_object_get(rows.rows[i].v, "session_id"));
		char	   *where;
		size_t		first;
		Conversation *c;
		bool		bad = false;

		if (sid == NULL)
		{
			char	   *id = key_text(json_object_get(rows.rows[i].v, "id"));

			source_error(imp, rows.rows[i].lineno, NULL, "a row of %s without a session_id (id %s)",
						 table, id ? id : "?");
			free(id);
			where = where_of(imp, &rows.rows[i], table, NULL);
			reject_rows(imp, NULL, where, &rows.rows[i], 1);
			free(where);
			i++;
			continue;
		}
		where = where_of(imp, &rows.rows[i], table, sid);
		c = conversation_new(sid, where);
		free(where);
		first = i;
		for (; i < rows.n; i++)
		{
			json_t	   *row = rows.rows[i].v;
			char	   *this_sid = key_text(json_object_get(row, "session_id"));
			char	   *row_id = key_text(json_object_get(row, "id"));
			json_t	   *message = json_object_get(row, "message");
			json_t	   *data;
			const char *type;
			char	   *text;
			char	   *request_id;
			const char *msg_id;
			bool		same = this_sid && strcmp(this_sid, sid) == 0;

			free(this_sid);
			if (!same)
			{
				free(row_id);
				break;
			}
			if (bad)
			{
				free(row_id);
				continue;
			}
			/* Python: {"type", "data": {...}}; JS: {"type", "content", ...} */
			data = json_is_object(json_object_get(message, "data")) ? json_object_get(message, "data") : message;
			type = json_string_value(json_object_get(message, "type"));
			if (!json_is_object(message) || type == NULL)
			{
				source_error(imp, rows.rows[i].lineno, NULL,
							 "a message of session \"%s\" without a \"type\" (%s id %s)",
							 sid, table, row_id ? row_id : "?");
				bad = true;
				free(row_id);
				continue;
			}
			if (!json_is_string(json_object_get(data, "content")) && !json_is_array(json_object_get(data, "content")))
			{
				source_error(imp, rows.rows[i].lineno, NULL,
							 "a %s message of session \"%s\" without a string or array \"content\" (%s id %s)",
							 type, sid, table, row_id ? row_id : "?");
				bad = true;
				free(row_id);
				continue;
			}
			text = content_text(imp, json_object_get(data, "content"));
			msg_id = json_string_value(json_object_get(data, "id"));
			request_id = msg_id ? xstrdup(msg_id) : xsprintf("lc:%s", row_id ? row_id : "?");
			if (strcmp(type, "ai") == 0 && json_array_size(json_object_get(data, "tool_calls")) > 0)
				importer_count_dropped(imp, "tool calls", json_array_size(json_object_get(data, "tool_calls")));
			conversation_add(c, langchain_role(type, data), text, request_id,
							 json_string_value(json_object_get(row, "created_at")), rows.rows[i].lineno);
			free(text);
			free(request_id);
			free(row_id);
		}
		if (bad)
		{
			reject_rows(imp, sid, c->where, &rows.rows[first], i - first);
			conversation_free(c);
		}
		else
			emit_conversation(imp, c);
		free(sid);
	}
	rows_free(&rows);
}

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

static void
import_mastra(Importer *imp, FILE *in)
{
	RowList		rows = {0};
	RowList		threads = {0};
	RowList		messages = {0};
	size_t		i;
	size_t		m = 0;

	if (imp->o->source_dsn)
	{
		PGconn	   *src = connect_source(imp);
		char	   *qt = qualified_table(src, imp->o->source_schema, "mastra_threads");
		char	   *qm = qualified_table(src, imp->o->source_schema, "mastra_messages");
		char	   *sql;

		sql = xsprintf("SELECT pg_catalog.row_to_json(t)::pg_catalog.text FROM %s t", qt);
		rows_from_query(imp, src, "mastra_threads", sql, &threads);
		free(sql);
		/* the order of a thread's messages at the same time: the library's */
		sql = xsprintf("SELECT pg_catalog.row_to_json(m)::pg_catalog.text FROM %s m"
					   " ORDER BY m.\"createdAt\", m.id", qm);
		rows_from_query(imp, src, "mastra_messages", sql, &messages);
		free(sql);
		free(qt);
		free(qm);
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
	out = malloc(n + 1);
	if (out == NULL)
		fail(EXIT_ERROR, "out of memory");
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

static void
import_langgraph(Importer *imp, FILE *in)
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
		char	   *qc = qualified_table(src, imp->o->source_schema, "checkpoints");
		char	   *qb = qualified_table(src, imp->o->source_schema, "checkpoint_blobs");
		char	   *sql;

		sql = xsprintf("SELECT pg_catalog.row_to_json(c)::pg_catalog.text FROM %s c", qc);
		rows_from_query(imp, src, "checkpoints", sql, &checkpoints);
		free(sql);
		sql = xsprintf("SELECT pg_catalog.row_to_json(b)::pg_catalog.text FROM %s b"
					   " WHERE b.channel = 'messages' AND b.checkpoint_ns = ''", qb);
		rows_from_query(imp, src, "checkpoint_blobs", sql, &blobs);
		free(sql);
		free(qc);
		free(qb);
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

void
import_source(Importer *imp, FILE *in)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	import_start = ts.tv_sec;
	import_start_usec = ts.tv_nsec / 1000;

	if (imp->o->source_dsn && (strcmp(imp->o->from, "messages") == 0 ||
							   strcmp(imp->o->from, "openai-items") == 0))
		fail(EXIT_ERROR, "--source-dsn reads a library's tables: --from=%s reads a file", imp->o->from);
	if (strcmp(imp->o->from, "messages") == 0)
		import_messages(imp, in);
	else if (strcmp(imp->o->from, "openai-items") == 0)
		import_openai_items(imp, in);
	else if (strcmp(imp->o->from, "langchain") == 0)
		import_langchain(imp, in, false);
	else if (strcmp(imp->o->from, "langchain-js") == 0)
		import_langchain(imp, in, true);
	else if (strcmp(imp->o->from, "mastra") == 0)
		import_mastra(imp, in);
	else if (strcmp(imp->o->from, "langgraph-js") == 0)
		import_langgraph(imp, in);
	else
		fail(EXIT_ERROR, "unknown source \"%s\" (convctx, messages, openai-items, langchain, "
			 "langchain-js, mastra, langgraph-js)", imp->o->from);
}
