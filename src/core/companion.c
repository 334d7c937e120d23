/*-------------------------------------------------------------------------
 *
 * companion.c
 *	  The hooks of the companion (companion.h): registered once at load,
 *	  called where the core forgets, exports and imports turns.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/companion.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/companion.h"

/* The registered companion, NULL while there is none. */
static const ConvctxCompanion *companion = NULL;

/* From _PG_init: the one companion of this library. */
void
CompanionRegister(const ConvctxCompanion *c)
{
	if (companion != NULL && companion != c)
		elog(ERROR, "a companion is registered already: %s", companion->name);
	companion = c;
}

void
CompanionForgetTurns(text *tenant, text *session_id, int64 turn_no)
{
	if (companion != NULL && companion->forget_turns != NULL)
		companion->forget_turns(tenant, session_id, turn_no);
}

void
CompanionForgetSessions(text *tenant, Datum sessions)
{
	if (companion != NULL && companion->forget_sessions != NULL)
		companion->forget_sessions(tenant, sessions);
}

void
CompanionForgetVersion(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	if (companion != NULL && companion->forget_version != NULL)
		companion->forget_version(tenant, session_id, turn_id);
}

const char *
CompanionExportSql(void)
{
	if (companion != NULL && companion->export_sql != NULL)
		return companion->export_sql();
	return NULL;
}

CompanionImported
CompanionImportEmbedding(text *tenant, text *session_id, pg_uuid_t *turn_id, int64 turn_no,
						 text *model, char *embedding, TimestampTz stored_at)
{
	if (companion != NULL && companion->import_embedding != NULL)
		return companion->import_embedding(tenant, session_id, turn_id, turn_no, model,
										   embedding, stored_at);
	return COMPANION_NOT_INSTALLED;
}
