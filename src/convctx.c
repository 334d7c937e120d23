/*-------------------------------------------------------------------------
 *
 * convctx.c
 *	  Module entry point: settings, tenancy and the argument checks that
 *	  every public function shares.
 *
 * The library does not need shared_preload_libraries: the settings exist
 * once it is loaded (on the first call of any convctx function, or LOAD
 * 'convctx'); a SET issued earlier is a placeholder that is taken over at
 * load time.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/convctx.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "convctx.h"

PG_MODULE_MAGIC;

char	   *convctx_tenant = NULL;
int			convctx_max_active_nodes = 256;

void		_PG_init(void);

/*
 * Define every convctx.* setting and reserve the prefix, so that a
 * misspelt setting is rejected instead of becoming a silent placeholder.
 */
void
_PG_init(void)
{
	DefineCustomStringVariable("convctx.tenant",
							   "Tenant that convctx functions act for in this session.",
							   "Empty means the single-tenant default.",
							   &convctx_tenant,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.max_active_nodes",
							"Most node ids a conversation context keeps; the least recently referenced go first.",
							"Used by context_merge when max_nodes is NULL, and by context_add.",
							&convctx_max_active_nodes,
							256,
							1, 1000000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("convctx");
}

/*
 * The tenant of the calling session, as a text datum: convctx.tenant when
 * set, else the empty string.
 */
text *
CurrentTenant(void)
{
	return cstring_to_text(convctx_tenant ? convctx_tenant : "");
}

PG_FUNCTION_INFO_V1(convctx_current_tenant);

Datum
convctx_current_tenant(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(CurrentTenant());
}

/*
 * An id argument that must be present: NULL is 22004, empty is 22023,
 * longer than CONVCTX_MAX_ID_BYTES is 54000.
 */
text *
ArgRequiredId(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("%s must not be null", what));

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
	if (len > CONVCTX_MAX_ID_BYTES)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("%s is too long", what),
				errdetail("It has %d bytes; at most %d are allowed.",
						  len, CONVCTX_MAX_ID_BYTES));
	return id;
}
