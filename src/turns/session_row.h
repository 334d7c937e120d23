/*-------------------------------------------------------------------------
 *
 * session_row.h
 *	  The session row of the turn writers (session_row.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/turns/session_row.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SESSION_ROW_H
#define CONVCTX_SESSION_ROW_H

#include "postgres.h"

/*
 * The session row at the place p where this transaction last put it
 * (session_place below), if it is still there and has the key. The key is
 * wrapped in IS TRUE so that no plan can read it from session_pkey: the
 * statement reads the one tuple p names (a TID scan), whatever the
 * table's statistics say.
 */
#define SESSION_ROW_AT(p) "ctid OPERATOR(pg_catalog.=) " p " AND (" SESSION_KEY ") IS TRUE"

extern bool SessionLock(text *tenant, text *session_id);
extern bool SessionPlaceGet(text *tenant, text *session_id, Datum *tid);
extern void SessionPlaceSet(text *tenant, text *session_id, int col);
extern bool CountAnswer(text *tenant, text *session_id, int64 delta);

#endif							/* CONVCTX_SESSION_ROW_H */
