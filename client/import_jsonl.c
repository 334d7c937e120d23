/*-------------------------------------------------------------------------
 *
 * import_jsonl.c
 *	  convctx import: reading a convctx.jsonl file.
 *
 * The header, then conversation groups (a session record and the records
 * of its session that follow it, or a context alone), then the trailer,
 * whose counts are checked. Each line is checked (jsonl_scan.c) and sent
 * as read. A bad line rejects its group; a record outside its session's
 * group is rejected with that group. A regular file must end with its
 * trailer unless --allow-truncated.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/import_jsonl.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* memrchr */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "format.h"
#include "import.h"
#include "jsonl_scan.h"
#include "util.h"

/* A line's record: its type (index in record_types) and conversation id. */
typedef struct LineRecord
{
	int			type;			/* -1: header, -2: trailer */
	const char *id;
	json_t	   *value;			/* the header or trailer, parsed */
	ScannedLine scanned;
} LineRecord;

static void
line_record_free(LineRecord *rec)
{
	json_decref(rec->value);
	scanned_line_free(&rec->scanned);
	memset(rec, 0, sizeof(*rec));
}

/* "FILE:LINE:COL: error: ..." and stop or reject. */
static void
line_error(Importer *imp, long lineno, int column, const char *fmt,...)
	__attribute__((format(printf, 4, 5)));

static void
line_error(Importer *imp, long lineno, int column, const char *fmt,...)
{
	va_list		ap;

	if (column > 0)
		fprintf(stderr, "%s:%ld:%d: error: ", imp->input_name, lineno, column);
	else
		fprintf(stderr, "%s:%ld: error: ", imp->input_name, lineno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * Check a line of convctx.jsonl (jsonl_scan.c) and find its type and
 * conversation. false (after printing why) when it is not a record of
 * the format.
 */
static bool
parse_line(Importer *imp, const char *line, size_t len, long lineno, LineRecord *rec)
{
	int			column;
	const char *message;
	const char *type_name;
	int			t;

	memset(rec, 0, sizeof(*rec));
	if (!scan_jsonl_line(line, len, &rec->scanned, &column, &message))
	{
		line_error(imp, lineno, column, "%s%s", strncmp(message, "\\u0000", 6) == 0 ||
				   strncmp(message, "duplicate", 9) == 0 || strncmp(message, "invalid input", 13) == 0
				   ? "" : "invalid JSON: ", message);
		return false;
	}
	type_name = rec->scanned.type;
	if (type_name == NULL)
	{
		line_error(imp, lineno, 0, "a record must have a string \"type\"");
		return false;
	}
	if (strcmp(type_name, "header") == 0 || strcmp(type_name, "end") == 0)
	{
		/* two lines of a file: parsed whole, for their values */
		rec->type = type_name[0] == 'h' ? -1 : -2;
		rec->value = json_loadb(line, len, JSON_DECODE_INT_AS_REAL, NULL);
		return true;
	}
	t = record_type(type_name);
	if (t == RECORD_TYPES)
	{
		line_error(imp, lineno, 0, "unknown record type \"%s\"", type_name);
		return false;
	}
	rec->type = t;
	rec->id = t == 5 ? rec->scanned.conversation_id : rec->scanned.session_id;
	if (rec->id == NULL || rec->id[0] == '\0')
	{
		line_error(imp, lineno, 0, "a %s record must have a non-empty string \"%s\"", type_name,
				   t == 5 ? "conversation_id" : "session_id");
		return false;
	}
	return true;
}

/* The header: convctx.jsonl of a version this tool reads. */
static void
check_header(Importer *imp, LineRecord *rec)
{
	json_t	   *format = json_object_get(rec->value, "format");
	json_t	   *version = json_object_get(rec->value, "format_version");

	if (!json_is_string(format) || strcmp(json_string_value(format), JSONL_FORMAT) != 0)
	{
		line_error(imp, 1, 0, "the header does not name format \"%s\"", JSONL_FORMAT);
		importer_abort(imp);
	}
	if (!json_is_number(version) || json_number_value(version) != JSONL_FORMAT_VERSION)
	{
		line_error(imp, 1, 0, "format_version %g is not one this tool reads (it reads %d)",
				   json_is_number(version) ? json_number_value(version) : 0.0, JSONL_FORMAT_VERSION);
		importer_abort(imp);
	}
}

/*
 * Without --tenant, a role that may act for any tenant (a superuser, a
 * role bound to every tenant) writes into the tenant convctx.tenant names,
 * '' when it names none. A file exported from another tenant is refused
 * then, before anything is written: the tool does not choose a tenant.
 * Found out by trying: use_tenant() of the file's tenant succeeds only for
 * a role that may act for any tenant (undone at once).
 */
static void
check_source_tenant(Importer *imp, LineRecord *rec)
{
	const char *source = json_string_value(json_object_get(rec->value, "source_tenant"));
	const char *params[1] = {source};
	bool		single = imp->o->single_transaction;
	PGresult   *res;
	bool		refuse;

	if (imp->o->common.tenant || source == NULL || source[0] == '\0')
		return;
	exec_ok(imp, "checking the tenant", single ? "SAVEPOINT convctx_tenant" : "BEGIN");
	res = PQexecParams(imp->conn, "SELECT convctx.current_tenant() OPERATOR(pg_catalog.=) ''"
					   " AND convctx.use_tenant($1) OPERATOR(pg_catalog.=) $1", 1, NULL, params, NULL, NULL, 0);
	refuse = PQresultStatus(res) == PGRES_TUPLES_OK && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	exec_ok(imp, "checking the tenant", single ? "ROLLBACK TO SAVEPOINT convctx_tenant" : "ROLLBACK");
	if (refuse)
	{
		fprintf(stderr, "%s: error: %s was exported from tenant \"%s\"; without --tenant this import "
				"would write it into tenant \"\"\n", progname, imp->input_name, source);
		fprintf(stderr, "HINT:  This role acts for any tenant: name the one to write into, "
				"--tenant=\"%s\" for the tenant it came from.\n", source);
		PQfinish(imp->conn);
		exit(EXIT_ERROR);
	}
}

/* The trailer's counts against what was read. */
static void
check_trailer(Importer *imp, LineRecord *rec, long lineno, long long *counts, bool unreadable)
{
	json_t	   *records = json_object_get(rec->value, "records");
	json_t	   *lines = json_object_get(rec->value, "lines");
	int			t;

	/* lines that could not be read have no type to count */
	for (t = 0; t < RECORD_TYPES && !unreadable; t++)
	{
		json_t	   *n = records ? json_object_get(records, record_types[t]) : NULL;

		/* a trailer without an embedding count: a file with none */
		if (n == NULL && counts[t] == 0 && strcmp(record_types[t], "embedding") == 0)
			continue;
		if (!json_is_number(n) || json_number_value(n) != (double) counts[t])
		{
			line_error(imp, lineno, 0, "the trailer counts %g %s records, the file holds %lld",
					   json_is_number(n) ? json_number_value(n) : 0.0, record_types[t], counts[t]);
			importer_abort(imp);
		}
	}
	if (!json_is_number(lines) || json_number_value(lines) != (double) lineno)
	{
		line_error(imp, lineno, 0, "the trailer counts %g lines, the file has %ld",
				   json_is_number(lines) ? json_number_value(lines) : 0.0, lineno);
		importer_abort(imp);
	}
}

/*
 * A regular file must end with its trailer: checked before anything is
 * written, so that a file cut short writes nothing.
 */
static void
check_file_has_trailer(Importer *imp, FILE *in)
{
	struct stat st;
	long		from;
	char	   *tail;
	size_t		got;
	char	   *last;
	json_t	   *value;
	bool		ok = false;

	if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode))
		return;
	from = st.st_size > 65536 ? st.st_size - 65536 : 0;
	tail = malloc(65537);
	if (tail == NULL || fseek(in, from, SEEK_SET) != 0)
		return;
	got = fread(tail, 1, 65536, in);
	tail[got] = '\0';
	while (got > 0 && (tail[got - 1] == '\n' || tail[got - 1] == '\r'))
		tail[--got] = '\0';
	last = memrchr(tail, '\n', got);
	last = last ? last + 1 : tail;
	value = json_loadb(last, got - (last - tail), JSON_DECODE_INT_AS_REAL, NULL);
	if (value && json_is_string(json_object_get(value, "type")) &&
		strcmp(json_string_value(json_object_get(value, "type")), "end") == 0)
		ok = true;
	json_decref(value);
	/* a NUL byte in the last line is not a cut: the reading names it */
	if (memchr(last, '\0', got - (last - tail)) != NULL)
		ok = true;
	free(tail);
	if (fseek(in, 0, SEEK_SET) != 0)
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	if (!ok)
	{
		fprintf(stderr, "%s: error: %s has no trailer (its last line is not an \"end\" record): "
				"the file was cut short; nothing was imported\n", progname, imp->input_name);
		fprintf(stderr, "HINT:  --allow-truncated imports the complete conversations it holds.\n");
		PQfinish(imp->conn);
		exit(EXIT_ERROR);
	}
}

/*
 * Stray records (records outside their session's group), each with its
 * session's group when that was not sent yet: rejected once the group
 * being read is closed, since that group may go on after them.
 */
static Group **strays;
static int	nstrays;

/*
 * Close the group being read: queue it, or reject it when a line was bad;
 * then reject the strays read in it.
 */
static void
close_group(Importer *imp, Group **group, bool *bad)
{
	int			i;

	if (*group)
		*bad ? importer_reject(imp, *group) : importer_add(imp, *group);
	*group = NULL;
	*bad = false;
	for (i = 0; i < nstrays; i++)
		importer_reject(imp, strays[i]);
	nstrays = 0;
}

/* A group of conversation id that starts at line lineno of the input. */
static Group *
line_group(Importer *imp, const char *id, long lineno)
{
	char		where[WHERE_LEN];

	snprintf(where, sizeof(where), "%s:%ld", imp->input_name, lineno);
	return group_new(id, where);
}

/* A stray record of session id: kept with its session's group to be rejected. */
static void
stray_record(Importer *imp, const char *id, const char *line, size_t len, long lineno)
{
	Group	   *g = NULL;
	int			i;

	for (i = 0; i < nstrays && g == NULL; i++)
		if (strcmp(strays[i]->id, id) == 0)
			g = strays[i];
	if (g == NULL)
	{
		if ((g = importer_take_pending(imp, id)) == NULL)
		{
			fprintf(stderr, "%s: warning: if session \"%s\" came earlier in the file, it was written "
					"without the record of line %ld\n", progname, id, lineno);
			g = line_group(imp, id, lineno);
		}
		strays = xrealloc(strays, (nstrays + 1) * sizeof(Group *));
		strays[nstrays++] = g;
	}
	group_add(g, line, len, lineno);
}

/*
 * A bad line: it belongs to the group being read (a new one when there is
 * none), which is rejected whole; by default that stops the import now.
 */
static void
bad_line(Importer *imp, Group **group, bool *bad, const char *id, const char *line,
		 size_t len, long lineno)
{
	if (*group == NULL)
		*group = line_group(imp, id, lineno);
	group_add(*group, line, len, lineno);
	*bad = true;
	if (imp->o->max_errors == 0)
		close_group(imp, group, bad);
}

/*
 * A line that starts as a session record does, read or not: it starts a
 * group of its own.
 */
static bool
starts_session(const char *line)
{
	return strncmp(line, "{\"type\": \"session\"", strlen("{\"type\": \"session\"")) == 0 ||
		strncmp(line, "{\"type\":\"session\"", strlen("{\"type\":\"session\"")) == 0;
}

/* A convctx.jsonl file being read. */
typedef struct JsonlFile
{
	long		lineno;			/* of the line read last */
	long long	counts[RECORD_TYPES];	/* records read, by type */
	Group	   *group;			/* the group being read, or NULL */
	bool		bad;			/* a line of it was bad */
	bool		trailer;		/* the trailer was read */
	bool		unreadable;		/* a line could not be read at all */
} JsonlFile;

/*
 * Line lineno (len bytes, its newline taken off) without the CR before
 * the newline, and on the first line the UTF-8 byte order mark before
 * the header. Its new length.
 */
static ssize_t
trim_line(char *line, ssize_t len, long lineno)
{
	if (len > 0 && line[len - 1] == '\r')
		line[--len] = '\0';
	if (lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
	{
		memmove(line, line + 3, len - 2);
		len -= 3;
	}
	return len;
}

/*
 * Whether the last line, without its newline, is where the file was cut
 * (a killed export ends so): it is not a record, and holds no NUL byte
 * (reported as such when it is read). Then it is left out, with a
 * warning, and ends the input.
 */
static bool
cut_here(Importer *imp, JsonlFile *f, const char *line, size_t len)
{
	ScannedLine scanned;
	int			column;
	const char *message;

	if (f->lineno == 1 || memchr(line, '\0', len) != NULL)
		return false;
	if (scan_jsonl_line(line, len, &scanned, &column, &message))
	{
		scanned_line_free(&scanned);
		return false;
	}
	fprintf(stderr, "%s:%ld:%d: warning: the last line has no newline and is not a complete "
			"record (%s): the file was cut short there\n",
			imp->input_name, f->lineno, column, message);
	imp->left_out++;
	if (starts_session(line))
		close_group(imp, &f->group, &f->bad);
	return true;
}

/*
 * A record of a conversation: it goes on the group being read, starts a
 * group (a session, or a context of another conversation), or is a stray.
 */
static void
place_record(Importer *imp, JsonlFile *f, LineRecord *rec, const char *line, size_t len)
{
	Group	   *group = f->group;

	f->counts[rec->type]++;
	if (group != NULL && strcmp(group->id, rec->id) == 0 && rec->type != 0)
		group_add(group, line, len, f->lineno);	/* the group goes on */
	else if (rec->type == 0 || rec->type == 5)
	{
		close_group(imp, &f->group, &f->bad);
		f->group = line_group(imp, rec->id, f->lineno);
		group_add(f->group, line, len, f->lineno);
	}
	else if (f->bad && group != NULL && group->id[0] == '\0')
		group_add(group, line, len, f->lineno);	/* after a line that could not be read */
	else
	{
		/* a stray record: the group being read goes on */
		line_error(imp, f->lineno, 0, "a %s record of session \"%s\" outside that session's group "
				   "(the records of a session follow its session record)",
				   record_types[rec->type], rec->id);
		stray_record(imp, rec->id, line, len, f->lineno);
	}
}

/* Read a line (len bytes, trimmed): the header, a record, or the trailer. */
static void
read_line(Importer *imp, JsonlFile *f, const char *line, size_t len)
{
	LineRecord	rec;

	if (!parse_line(imp, line, len, f->lineno, &rec))
	{
		line_record_free(&rec);
		if (f->lineno == 1)
			importer_abort(imp);
		/* the group before a session record is not its */
		if (starts_session(line))
			close_group(imp, &f->group, &f->bad);
		bad_line(imp, &f->group, &f->bad, "", line, len, f->lineno);
		f->unreadable = true;
		return;
	}
	if (f->lineno == 1 || rec.type == -1)
	{
		if (f->lineno != 1 || rec.type != -1)
		{
			line_error(imp, f->lineno, 0, f->lineno == 1 ?
					   "the first line must be the header of a convctx.jsonl file" :
					   "a second header");
			importer_abort(imp);
		}
		check_header(imp, &rec);
		check_source_tenant(imp, &rec);
	}
	else if (rec.type == -2)
	{
		close_group(imp, &f->group, &f->bad);
		check_trailer(imp, &rec, f->lineno, f->counts, f->unreadable);
		f->trailer = true;
	}
	else
		place_record(imp, f, &rec, line, len);
	line_record_free(&rec);
}

/*
 * The end of a file without its trailer: cut short. Refused unless
 * --allow-truncated, which imports all but its last conversation (which
 * may be the one cut).
 */
static void
end_without_trailer(Importer *imp, JsonlFile *f)
{
	if (f->group)
		imp->left_out += f->group->n;
	if (!imp->o->allow_truncated)
	{
		fprintf(stderr, "%s: error: %s ends at line %ld without its trailer: it was cut short; "
				"the conversation it ends in was not imported\n",
				progname, imp->input_name, f->lineno);
		flush_pending(imp);
		importer_abort(imp);
	}
	if (f->group)
	{
		fprintf(stderr, "%s: warning: %s has no trailer: the conversation starting at %s, the last, "
				"may be cut short and was not imported\n", progname, imp->input_name, f->group->where);
		group_free(f->group);
		f->group = NULL;
	}
	close_group(imp, &f->group, &f->bad);	/* the strays read in it */
}

/* Read a convctx.jsonl file: header, conversation groups, trailer. */
void
import_convctx(Importer *imp, FILE *in)
{
	JsonlFile	f = {0};
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;

	if (!imp->o->allow_truncated)
		check_file_has_trailer(imp, in);
	while ((len = getline(&line, &cap, in)) != -1)
	{
		bool		last = line[len - 1] != '\n';	/* no newline: the end of the input */

		f.lineno++;
		if (!last)
			line[--len] = '\0';
		len = trim_line(line, len, f.lineno);
		if (f.trailer)
		{
			if (len == 0)
				continue;		/* an empty line at the end, as the trailer check allows */
			line_error(imp, f.lineno, 0, "a line after the trailer");
			importer_abort(imp);
		}
		if (last && cut_here(imp, &f, line, len))
			break;
		read_line(imp, &f, line, len);
	}
	if (ferror(in))
		fail(EXIT_ERROR, "could not read \"%s\": %s", imp->input_name, strerror(errno));
	free(line);
	if (f.lineno == 0)
	{
		fprintf(stderr, "%s: error: %s is empty: no header\n", progname, imp->input_name);
		importer_abort(imp);
	}
	if (!f.trailer)
		end_without_trailer(imp, &f);
}
