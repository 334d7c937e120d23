/*-------------------------------------------------------------------------
 *
 * args.h
 *	  Argument checks of the SQL-callable functions (args.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/args.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_ARGS_H
#define CONVCTX_ARGS_H

#include "postgres.h"
#include "fmgr.h"
#include "utils/jsonb.h"

/* Argument checks (args.c) */
extern void ArgNotNull(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalId(FunctionCallInfo fcinfo, int argno, const char *what);

extern text *ArgRequiredText(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalText(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *ArgOptionalLabel(FunctionCallInfo fcinfo, int argno, const char *what);
extern Jsonb *ArgOptionalObject(FunctionCallInfo fcinfo, int argno, const char *what);
extern int32 ArgLimit(FunctionCallInfo fcinfo, int argno, const char *what);
extern int32 ArgLimitAtMost(FunctionCallInfo fcinfo, int argno, const char *what, int32 max,
							 const char *hint);
extern void CheckMaxTextBytes(Size len, const char *msg, const char *subject_has);
extern void CheckTextSize(text *t, const char *what);
extern void CheckIdLength(int len, const char *what);

#endif							/* CONVCTX_ARGS_H */
