/*-------------------------------------------------------------------------
 *
 * source_conversation.c
 *	  convctx import --from=SOURCE: a source's conversations of messages
 *	  made into convctx.jsonl records.
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
 * Copyright (c) 2026, the convctx authors
 *
 * client/source_conversation.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "import.h"
#include "sources.h"
#include "util.h"

/* The import's start, the time of what has none. */
static time_t import_start;
static long import_start_usec;

Conversation *
conversation_new(const char *id, const char *where)
{
	Conversation *c = xcalloc(1, sizeof(Conversation));

	c->id = xstrdup(id);
	c->where = xstrdup(where);
	return c;
}

void
conversation_add(Conversation *c, const char *role, const char *text, const char *id,
				 const char *time, long lineno)
{
	Message    *m;

	if (c->n == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 16;
		c->msgs = xrealloc(c->msgs, c->cap * sizeof(Message));
	}
	m = &c->msgs[c->n++];
	m->role = xstrdup(role);
	m->text = xstrdup(text);
	m->id = xstrdup(id);
	m->time = xstrdup(time);
	m->lineno = lineno;
}

void
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

/* Take the import's start now. */
void
set_import_start(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	import_start = ts.tv_sec;
	import_start_usec = ts.tv_nsec / 1000;
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

/* The session record of c, its first and last times those of its messages. */
static void
add_session_record(Group *g, Conversation *c, const char *first, const char *last)
{
	json_t	   *s = json_object();
	RecordOrigin origin = {0};

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
}

/*
 * The request id of user message i of c: its id (or "msg-N" without
 * one), and when that came before in the conversation (request_ids), the
 * id and "#2", "#3"...: the same every time, so that importing the source
 * again finds its turns there. Counted in a warning.
 */
static char *
distinct_request_id(Importer *imp, Conversation *c, int i, json_t *request_ids)
{
	Message    *m = &c->msgs[i];
	char	   *request_id = m->id ? xstrdup(m->id) : xsprintf("msg-%d", i + 1);

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
	return request_id;
}

/* Add assistant message i (at time) to the answer of the open turn t. */
static void
add_answer(TurnBuild *t, Message *m, const char *time, int i)
{
	if (t->answer)
		append_text(&t->answer, &t->answer_len, &t->answer_cap, "\n\n", 2);
	append_text(&t->answer, &t->answer_len, &t->answer_cap, m->text, strlen(m->text));
	free(t->finalized_at);
	t->finalized_at = xstrdup(time);
	if (t->answers++ == 0)
		t->first_answer_at = i;
	t->last_answer_at = i;
}

/* Count a message of a role that has no place in convctx. */
static void
count_other_role(Importer *imp, const char *role)
{
	if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0)
		importer_count_dropped(imp, "system and developer messages", 1);
	else if (strcmp(role, "tool") == 0 || strcmp(role, "function") == 0)
		importer_count_dropped(imp, "tool messages", 1);
	else
		importer_count_dropped(imp, "messages of other roles", 1);
}

/*
 * Add c's turns to g: a turn per question, the assistant messages that
 * follow it its answer. A user message without text cannot be a question
 * (convctx refuses an empty one): it is dropped with the assistant
 * messages that answer it, counted.
 */
static void
add_turns(Importer *imp, Group *g, Conversation *c, char **times)
{
	TurnBuild	t;
	long		turn_no = 0;
	json_t	   *request_ids = json_object();
	bool		unanswerable = false;	/* after a user message without text */
	int			i;

	memset(&t, 0, sizeof(t));
	for (i = 0; i < c->n; i++)
	{
		Message    *m = &c->msgs[i];

		if (strcmp(m->role, "user") == 0 || strcmp(m->role, "human") == 0)
		{
			emit_turn(g, c, &t, turn_no);
			unanswerable = m->text == NULL || m->text[0] == '\0';
			if (unanswerable)
			{
				importer_count_dropped(imp, "user messages without text", 1);
				continue;
			}
			t.request_id = distinct_request_id(imp, c, i, request_ids);
			t.open = true;
			turn_no++;
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
				add_answer(&t, m, times[i], i);
		}
		else
			count_other_role(imp, m->role);
	}
	emit_turn(g, c, &t, turn_no);
	json_decref(request_ids);
}

/*
 * Whether anonymous conversation c, whose source holds no time, is
 * refused (after saying why): imported, it would take the import's time
 * and look active now, and the first purge after convctx.session_ttl
 * would delete it. Taken when --as-identity links it, or, counted and
 * warned about, with --allow-anonymous.
 */
static bool
refuse_undated(Importer *imp, Conversation *c)
{
	if (c->identity != NULL || imp->o->as_identity != NULL)
		return false;
	if (imp->o->allow_anonymous)
	{
		imp->anonymous_undated++;
		return false;
	}
	fprintf(stderr, "%s: error: anonymous conversation \"%s\" has no time in its source: imported, "
			"it would take the import's time and be deleted by the first purge after "
			"convctx.session_ttl\n", c->where, c->id);
	fprintf(stderr, "HINT:  Link it to an identity with --as-identity=ID, or take it as it is "
			"with --allow-anonymous.\n");
	return true;
}

/*
 * Make a conversation's records and hand them to the importer: the
 * session record, then its turns. A message without a time takes one
 * (message_times); an anonymous conversation without any may be refused
 * (refuse_undated).
 */
void
emit_conversation(Importer *imp, Conversation *c)
{
	Group	   *g = group_new(c->id, c->where);
	char	  **times = xcalloc(c->n + 1, sizeof(char *));
	int			i;
	bool		undated = c->updated_at == NULL && c->created_at == NULL &&
		(c->n == 0 || c->msgs[c->n - 1].time == NULL);

	message_times(imp, c, times);
	if (c->n == 0)
		times[0] = start_time_plus(0);
	add_session_record(g, c, times[0], times[c->n > 0 ? c->n - 1 : 0]);
	add_turns(imp, g, c, times);
	for (i = 0; i <= c->n; i++)
		free(times[i]);
	free(times);
	if (undated && refuse_undated(imp, c))
		importer_reject(imp, g);
	else
		importer_add(imp, g);
	conversation_free(c);
}
