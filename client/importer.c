/*-------------------------------------------------------------------------
 *
 * importer.c
 *	  convctx import: conversation groups, and what an import counts,
 *	  warns about and shows.
 *
 * Readers (import_jsonl.c, the source_*.c files) make groups of records
 * here and hand each complete one to importer_add (import_send.c), which
 * queues it and sends the queue once it is a batch. What is imported,
 * skipped, rejected, dropped and warned about is counted in the Importer
 * and printed here at the end. This file calls none of the sending: the
 * sending, above it, calls this one.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/importer.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "format.h"
#include "import.h"
#include "util.h"

/* The record types, as the summary counts more than one of them. */
static const char *const record_types_plural[RECORD_TYPES] = {
	"sessions", "turns", "retrievals", "clarifications", "summaries", "contexts", "embeddings"
};

Group *
group_new(const char *id, const char *where)
{
	Group	   *g = xcalloc(1, sizeof(Group));

	g->id = strdup(id);
	g->where = strdup(where);
	return g;
}

/* Add a record (the text of one line, len bytes) found at line lineno. */
void
group_add(Group *g, const char *line, size_t len, long lineno)
{
	if (g->n == g->cap)
	{
		g->cap = g->cap ? g->cap * 2 : 16;
		g->lines = xrealloc(g->lines, g->cap * sizeof(char *));
		g->lens = xrealloc(g->lens, g->cap * sizeof(size_t));
		g->linenos = xrealloc(g->linenos, g->cap * sizeof(long));
		if (g->origins)
		{
			g->origins = xrealloc(g->origins, g->cap * sizeof(RecordOrigin));
			memset(g->origins + g->n, 0, (g->cap - g->n) * sizeof(RecordOrigin));
		}
	}
	g->lines[g->n] = xmalloc(len + 1);
	memcpy(g->lines[g->n], line, len);
	g->lines[g->n][len] = '\0';
	g->lens[g->n] = len;
	g->linenos[g->n] = lineno;
	g->n++;
}

/*
 * Add a record made here (sources.c): its compact JSON text, and what it
 * was made of (taken), for its errors.
 */
void
group_add_json(Group *g, json_t *record, long lineno, RecordOrigin *origin)
{
	char	   *text = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (text == NULL)
		fail(EXIT_ERROR, "could not encode a record of conversation \"%s\"", g->id);
	group_add(g, text, strlen(text), lineno);
	free(text);
	json_decref(record);
	if (g->origins == NULL)
		g->origins = xcalloc(g->cap, sizeof(RecordOrigin));
	g->origins[g->n - 1] = *origin;
}

void
group_free(Group *g)
{
	int			i;

	for (i = 0; i < g->n; i++)
	{
		free(g->lines[i]);
		if (g->origins)
		{
			free(g->origins[i].made_of);
			free(g->origins[i].generated);
			free(g->origins[i].generated_as);
		}
	}
	free(g->origins);
	free(g->lines);
	free(g->lens);
	free(g->linenos);
	free(g->id);
	free(g->where);
	free(g);
}

static void
print_progress(Importer *imp, bool last)
{
	double		elapsed = now_seconds() - imp->started;

	fprintf(stderr, "\r%s: %lld records, %.0f records/s, %.1f s%s", progname, imp->records_sent,
			elapsed > 0 ? imp->records_sent / elapsed : 0.0, elapsed, last ? "\n" : "");
}

/* With -P: the records sent so far, on stderr, at most once a second. */
void
importer_progress(Importer *imp)
{
	if (imp->o->common.progress && now_seconds() - imp->shown >= 1.0)
	{
		print_progress(imp, false);
		imp->shown = now_seconds();
	}
}

/* The last line of the summary: every record read is imported, skipped or rejected. */
static void
print_totals(Importer *imp, long long skipped)
{
	long long	imported = 0;
	int			t;

	for (t = 0; t < RECORD_TYPES; t++)
		imported += imp->imported[t];
	fprintf(stderr, "%s: %lld records read: %lld imported, %lld skipped, %lld rejected",
			progname, imp->records_sent + imp->rejected_records + imp->left_out, imported, skipped,
			imp->rejected_records);
	if (imp->left_out > 0)
		fprintf(stderr, ", %lld left out (the end of a file cut short)", imp->left_out);
	fputc('\n', stderr);
	if (imported + skipped != imp->records_sent)
		fprintf(stderr, "%s: warning: the server counted %lld of the %lld records it was sent\n",
				progname, imported + skipped, imp->records_sent);
}

/* Print what was done: counts on stderr (unless -q). */
void
print_summary(Importer *imp)
{
	int			t;
	long long	skipped = 0;

	if (imp->o->common.progress)
		print_progress(imp, true);
	if (imp->o->common.verbosity < 0)
		return;
	fprintf(stderr, "%s: imported", progname);
	for (t = 0; t < RECORD_TYPES; t++)
	{
		fprintf(stderr, "%s %lld %s", t ? "," : "", imp->imported[t],
				imp->imported[t] == 1 ? record_types[t] : record_types_plural[t]);
		skipped += imp->skipped[t];
	}
	fputc('\n', stderr);
	if (skipped > 0)
	{
		fprintf(stderr, "%s: skipped", progname);
		for (t = 0; t < RECORD_TYPES; t++)
			fprintf(stderr, "%s %lld %s", t ? "," : "", imp->skipped[t],
					imp->skipped[t] == 1 ? record_types[t] : record_types_plural[t]);
		for (t = 0; t < imp->nskip; t++)
			fprintf(stderr, "%s%s: %lld", t ? ", " : " (", imp->skip_reasons[t], imp->skip_counts[t]);
		fputs(imp->nskip ? ")\n" : "\n", stderr);
	}
	if (imp->metadata_keys_dropped > 0)
		fprintf(stderr, "%s: dropped %lld metadata keys that convctx.metadata_allowlist does not allow\n",
				progname, imp->metadata_keys_dropped);
	for (t = 0; t < imp->ndropped; t++)
		fprintf(stderr, "%s: not imported: %s: %lld\n", progname, imp->dropped_names[t],
				imp->dropped_counts[t]);
	for (t = 0; t < imp->nwarnings; t++)
		fprintf(stderr, "%s: warning: %s: %lld (the first: %s)\n", progname, imp->warning_names[t],
				imp->warning_counts[t], imp->warning_first[t]);
	if (imp->anonymous_undated > 0)
		fprintf(stderr, "%s: warning: %lld anonymous conversation%s without a time in %s source took the "
				"import's time: the first purge after convctx.session_ttl from now deletes %s\n", progname,
				imp->anonymous_undated, imp->anonymous_undated == 1 ? "" : "s",
				imp->anonymous_undated == 1 ? "its" : "their", imp->anonymous_undated == 1 ? "it" : "them");
	if (imp->rejected > 0)
		fprintf(stderr, "%s: rejected %lld conversation%s (%lld record%s)%s%s\n", progname,
				imp->rejected, imp->rejected == 1 ? "" : "s",
				imp->rejected_records, imp->rejected_records == 1 ? "" : "s",
				imp->reject ? ", written to " : "", imp->reject ? imp->o->reject_file : "");
	print_totals(imp, skipped);
}

/* Count something a source holds that convctx has no place for. */
void
importer_count_dropped(Importer *imp, const char *what, long long n)
{
	int			i;

	if (n == 0)
		return;
	for (i = 0; i < imp->ndropped; i++)
		if (strcmp(imp->dropped_names[i], what) == 0)
		{
			imp->dropped_counts[i] += n;
			return;
		}
	if (imp->ndropped == MAX_DROPPED)
		return;
	imp->dropped_names[imp->ndropped] = what;
	imp->dropped_counts[imp->ndropped++] = n;
}

/*
 * Count something of a source changed so that it could be imported (a
 * time moved, an id made distinct); first describes the case (taken).
 */
void
importer_count_warning(Importer *imp, const char *what, char *first)
{
	int			i;

	for (i = 0; i < imp->nwarnings && strcmp(imp->warning_names[i], what) != 0; i++)
		;
	if (i == imp->nwarnings)
	{
		if (imp->nwarnings == MAX_DROPPED)
		{
			free(first);
			return;
		}
		imp->warning_names[imp->nwarnings++] = what;
		imp->warning_first[i] = first;
		first = NULL;
	}
	imp->warning_counts[i]++;
	free(first);
}
