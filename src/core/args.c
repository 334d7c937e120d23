/*-------------------------------------------------------------------------
 *
 * args.c
 *	  The argument checks that every public function shares: NULLs, ids,
 *	  sizes and limits, each refused with its SQLSTATE.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "core/common.h"
#include "core/args.h"
#include "core/jsonb_util.h"
#include "core/settings.h"

/* 22004 when argument argno, named what in the message, is NULL. */
void
ArgNotNull(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("%s must not be null", what));
}

/*
 * An id argument that must be present: NULL is 22004, empty is 22023,
 * longer than CONVCTX_MAX_ID_BYTES is 54000.
 */
text *
ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what)
{
	ArgNotNull(fcinfo, argno, what);

	return ArgOptionalId(fcinfo, argno, what);
}

/*
 * An id argument that may be NULL (returned as NULL) but, when given, must
 * be non-empty and not too long.
 */
text *
ArgOptionalId(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *id;
	int			len;

	if (PG_ARGISNULL(argno))
		return NULL;

	id = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(id);
	if (len == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must not be empty", what));
	CheckIdLength(len, what);
	return id;
}

/* 54000 when an id (or a name: node id, label, tenant) of len bytes is too long. */
void
CheckIdLength(int len, const char *what)
{
	if (len > CONVCTX_MAX_ID_BYTES)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("%s is too long", what),
				errdetail("It has %d bytes; at most %d are allowed.",
						  len, CONVCTX_MAX_ID_BYTES));
}

/*
 * An optional text argument: NULL stays NULL; a longer text than
 * convctx.max_text_bytes is 54000.
 */
text *
ArgOptionalText(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		return NULL;
	t = PG_GETARG_TEXT_PP(argno);
	CheckTextSize(t, what);
	return t;
}

/*
 * An optional routing label (pipeline_name, consultant, repository): a
 * name, so at most CONVCTX_MAX_ID_BYTES like an id (and never more than
 * convctx.max_text_bytes), 54000 beyond. NULL stays NULL.
 */
text *
ArgOptionalLabel(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (!PG_ARGISNULL(argno))
		CheckIdLength(VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(argno)), what);
	return ArgOptionalText(fcinfo, argno, what);
}

/*
 * 54000 when len bytes (a text, a context, a turn's merged metadata, a
 * clarification, chunks) exceed convctx.max_text_bytes: the one place that
 * compares with the limit. msg is the whole errmsg; subject_has starts the
 * detail ("It has", "They have", or what was measured with its verb).
 */
void
CheckMaxTextBytes(Size len, const char *msg, const char *subject_has)
{
	if (len > (Size) convctx_max_text_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("%s", msg),
				errdetail("%s %zu bytes; convctx.max_text_bytes allows %d.",
						  subject_has, len, convctx_max_text_bytes));
}

void
CheckTextSize(text *t, const char *what)
{
	Size		len = VARSIZE_ANY_EXHDR(t);

	if (len > (Size) convctx_max_text_bytes)
		CheckMaxTextBytes(len, psprintf("%s is too long", what), "It has");
}

/*
 * An optional jsonb argument that must be an object when given (22023).
 */
Jsonb *
ArgOptionalObject(FunctionCallInfo fcinfo, int argno, const char *what)
{
	Jsonb	   *jb;

	if (PG_ARGISNULL(argno))
		return NULL;
	jb = PG_GETARG_JSONB_P(argno);
	if (!JB_ROOT_IS_OBJECT(jb))
		JsonbWrongType(JB_ROOT_IS_SCALAR(jb) ? "scalar" : "array",
					   "%s must be a JSON object", what);
	return jb;
}

/*
 * A row-count argument: NULL is 22004, below 1 is 22023.
 */
int32
ArgLimit(FunctionCallInfo fcinfo, int argno, const char *what)
{
	int32		limit;

	ArgNotNull(fcinfo, argno, what);
	limit = PG_GETARG_INT32(argno);
	if (limit < 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be at least 1", what),
				errdetail("Got %d.", limit));
	return limit;
}

/* ArgLimit, and at most max (22023, with hint when given). */
int32
ArgLimitAtMost(FunctionCallInfo fcinfo, int argno, const char *what, int32 max, const char *hint)
{
	int32		limit = ArgLimit(fcinfo, argno, what);

	if (limit > max)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be at most %d", what, max),
				errdetail("Got %d.", limit),
				hint ? errhint("%s", hint) : 0);
	return limit;
}

/* A text argument that must be present (22004), sized as ArgOptionalText. */
text *
ArgRequiredText(FunctionCallInfo fcinfo, int argno, const char *what)
{
	ArgNotNull(fcinfo, argno, what);
	return ArgOptionalText(fcinfo, argno, what);
}
