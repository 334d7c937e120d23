/*-------------------------------------------------------------------------
 *
 * import.h
 *	  convctx import: its options, the importer that sends conversation
 *	  groups to the server, and the groups (importer.c, below
 *	  import_send.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/import.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_IMPORT_H
#define CONVCTX_IMPORT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "common.h"
#include "format.h"

/* "FILE:LINE" of a record: a path and a number */
#define WHERE_LEN			(4096 + 32)

/* The options of convctx import. */
typedef struct ImportOptions
{
	CommonOptions common;
	const char *from;			/* --from: the source format */
	const char *source_dsn;		/* read a library's tables from this database */
	const char *source_table;
	const char *source_schema;
	const char *session_id;		/* --session: for a messages file without ids */
	const char *on_conflict;	/* skip or error */
	const char *as_identity;
	const char *identity_map_file;
	bool		allow_anonymous;
	bool		allow_truncated;
	bool		single_transaction;
	long		max_errors;		/* -1: no limit */
	long		batch_size;
	const char *reject_file;
} ImportOptions;

/*
 * What a record made from another source (the source_*.c files) was made of, for
 * its errors: they name what the source holds, not the values made here.
 */
typedef struct RecordOrigin
{
	char	   *made_of;		/* "message 3 (id \"m1\", created_at \"...\") ..." */
	char	   *generated;		/* a value made here (a turn id), or NULL */
	char	   *generated_as;	/* what to name it by instead */
} RecordOrigin;

/* A conversation's records, as lines of convctx.jsonl. */
typedef struct Group
{
	char	   *id;				/* its session or conversation id */
	char	   *where;			/* where it starts, for messages */
	int			n;
	int			cap;
	char	  **lines;
	size_t	   *lens;
	long	   *linenos;		/* line of each record in the input, or 0 */
	RecordOrigin *origins;		/* of records made from a source, or NULL */
} Group;

#define MAX_DROPPED 16

typedef struct Importer
{
	const ImportOptions *o;
	PGconn	   *conn;
	const char *input_name;
	char	   *identity_map;	/* the map as JSON text, or NULL */
	FILE	   *reject;
	Group	  **pending;		/* complete groups not sent yet */
	int			npending;
	int			cap_pending;
	long		pending_records;
	Group	  **inflight;		/* the batch sent, its result not read yet */
	int			ninflight;
	int			cap_inflight;
	long long	imported[RECORD_TYPES];
	long long	skipped[RECORD_TYPES];
	long long	metadata_keys_dropped;
	long long	rejected;		/* conversations */
	long long	anonymous_undated;	/* anonymous, given the import's time */
	long long	records_sent;	/* in calls that succeeded */
	long long	rejected_records;	/* of the conversations rejected */
	long long	left_out;		/* the end of a file cut short, not imported */
	char	   *skip_reasons[MAX_DROPPED];	/* why records were skipped, as the server says */
	long long	skip_counts[MAX_DROPPED];
	int			nskip;
	const char *dropped_names[MAX_DROPPED];	/* what a source holds and convctx does not */
	long long	dropped_counts[MAX_DROPPED];
	int			ndropped;
	const char *warning_names[MAX_DROPPED];	/* what was changed to be imported */
	long long	warning_counts[MAX_DROPPED];
	char	   *warning_first[MAX_DROPPED];	/* the first of each, as the source has it */
	int			nwarnings;
	double		started;
	double		shown;
} Importer;

/* importer.c: groups, and what an import counts and shows */
extern Group *group_new(const char *id, const char *where);
extern void group_add(Group *g, const char *line, size_t len, long lineno);
extern void group_add_json(Group *g, json_t *record, long lineno, RecordOrigin *origin);
extern void group_free(Group *g);
extern void importer_count_dropped(Importer *imp, const char *what, long long n);
extern void importer_count_warning(Importer *imp, const char *what, char *first);
extern void importer_progress(Importer *imp);
extern void print_summary(Importer *imp);

/* import_send.c: the queue sent to the server in batches, rejects, and stopping */
extern void importer_add(Importer *imp, Group *g);
extern Group *importer_take_pending(Importer *imp, const char *id);
extern void flush_pending(Importer *imp);
extern void importer_reject(Importer *imp, Group *g);
extern void importer_abort(Importer *imp) __attribute__((noreturn));
extern void exec_ok(Importer *imp, const char *what, const char *sql);
extern void begin_transaction(Importer *imp);

/* import_jsonl.c: a convctx.jsonl file */
extern void import_convctx(Importer *imp, FILE *in);

#endif
