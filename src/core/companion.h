/*-------------------------------------------------------------------------
 *
 * companion.h
 *	  The hooks of a companion: code that keeps records of its own beside
 *	  convctx's turns (such as embeddings of turns) and must
 *	  forget them when turns are forgotten, add them to an export and take
 *	  them from an import.
 *
 * The core calls the hooks where it forgets, exports or imports turns,
 * in the same transaction; a companion fills them in once, at load
 * (CompanionRegister, from _PG_init), so that the core needs no name of
 * its. With no companion registered, nothing is forgotten or exported
 * beside the turns, and an import skips the extra records as not
 * installed.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/companion.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_COMPANION_H
#define CONVCTX_COMPANION_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/uuid.h"

/* What became of an extra record an import brought (import_embedding). */
typedef enum CompanionImported
{
	COMPANION_IMPORTED,
	COMPANION_NOT_INSTALLED,	/* the companion is not installed here */
	COMPANION_NO_MODEL,			/* the record's model is not registered here */
	COMPANION_THERE,			/* the same record is stored here */
	COMPANION_CHANGED,			/* another one is stored here */
	COMPANION_REDACTED,			/* the turn is a tombstone here */
	COMPANION_REMOVED			/* the turn is not here */
} CompanionImported;

typedef struct ConvctxCompanion
{
	const char *name;

	/*
	 * Forget what it keeps of turn turn_no (>= 1, every version) of a
	 * session, or of every turn of it (turn_no 0): redaction. SPI
	 * connected.
	 */
	void		(*forget_turns) (text *tenant, text *session_id, int64 turn_no);

	/* The same for the sessions (a text[]) of an erasure. SPI connected. */
	void		(*forget_sessions) (text *tenant, Datum sessions);

	/*
	 * Forget what it keeps of one version of a turn, which replace_turn
	 * has just replaced by another. SPI connected.
	 */
	void		(*forget_version) (text *tenant, text *session_id, pg_uuid_t *turn_id);

	/*
	 * The records it adds to an export, when it is installed here (else
	 * NULL): a part of export_records' statement, "UNION ALL SELECT ..."
	 * of its rows of the sessions g.k of part 0 of tenant $1, as
	 * (record_type, line, 5, turn_no, record_version, NULL).
	 */
	const char *(*export_sql) (void);

	/*
	 * Store an embedding record an import brought for turn (turn_id,
	 * turn_no) of a session, or say why not. SPI connected.
	 */
	CompanionImported (*import_embedding) (text *tenant, text *session_id, pg_uuid_t *turn_id,
										   int64 turn_no, text *model, char *embedding,
										   TimestampTz stored_at);
} ConvctxCompanion;

extern void CompanionRegister(const ConvctxCompanion *companion);
extern void CompanionForgetTurns(text *tenant, text *session_id, int64 turn_no);
extern void CompanionForgetSessions(text *tenant, Datum sessions);
extern void CompanionForgetVersion(text *tenant, text *session_id, pg_uuid_t *turn_id);
extern const char *CompanionExportSql(void);
extern CompanionImported CompanionImportEmbedding(text *tenant, text *session_id, pg_uuid_t *turn_id,
												  int64 turn_no, text *model, char *embedding,
												  TimestampTz stored_at);

#endif							/* CONVCTX_COMPANION_H */
