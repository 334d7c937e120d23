/*-------------------------------------------------------------------------
 *
 * jsonb_util.c
 *	  Small helpers over PostgreSQL's jsonb API shared by the C files that
 *	  read the app's JSON (contexts, chunks, clarifications, states) and
 *	  build JSON results.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/jsonb_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "core/jsonb_util.h"

const char *
JsonbValueTypeName(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "string";
		case jbvNumeric:
			return "number";
		case jbvBool:
			return "boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "array" : "object";
		default:
			return "value";
	}
}

const char *
JsonbRootTypeName(Jsonb *jb)
{
	if (JB_ROOT_IS_SCALAR(jb))
		return "scalar";
	return JB_ROOT_IS_ARRAY(jb) ? "array" : "object";
}

/* True for a non-scalar array root. */
bool
JsonbIsArray(Jsonb *jb)
{
	return JB_ROOT_IS_ARRAY(jb) && !JB_ROOT_IS_SCALAR(jb);
}

/*
 * Look up key in an object container and return it when it is a string;
 * NULL when absent or JSON null. Any other type is 22023, naming what.
 */
JsonbValue *
JsonbObjectString(JsonbContainer *obj, const char *key, const char *what, JsonbValue *out)
{
	if (getKeyJsonValueFromContainer(obj, key, strlen(key), out) == NULL ||
		out->type == jbvNull)
		return NULL;
	if (out->type != jbvString)
		JsonbWrongType(JsonbValueTypeName(out), "key \"%s\" of %s must be a string", key, what);
	return out;
}

/*
 * ERROR 22023 for a JSON value of the wrong type: the message from fmt,
 * the detail naming the type it has (got).
 */
void
JsonbWrongType(const char *got, const char *fmt,...)
{
	StringInfoData msg;

	initStringInfo(&msg);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&msg, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&msg, needed);
	}
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("%s", msg.data),
			errdetail("Got a JSON %s.", got));
}

void
JsonbPushKey(JsonbParseState **state, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(state, WJB_KEY, &k);
}

void
JsonbPushString(JsonbParseState **state, JsonbIteratorToken tok, const char *str, int len)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) str;
	v.val.string.len = len;
	pushJsonbValue(state, tok, &v);
}

/* A text value as a JSON string; the parse state keeps the pointer. */
void
JsonbPushText(JsonbParseState **state, JsonbIteratorToken tok, text *t)
{
	JsonbPushString(state, tok, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

void
JsonbPushNull(JsonbParseState **state, JsonbIteratorToken tok)
{
	JsonbValue	v;

	v.type = jbvNull;
	pushJsonbValue(state, tok, &v);
}

void
JsonbPushBool(JsonbParseState **state, JsonbIteratorToken tok, bool b)
{
	JsonbValue	v;

	v.type = jbvBool;
	v.val.boolean = b;
	pushJsonbValue(state, tok, &v);
}

void
JsonbPushInt(JsonbParseState **state, JsonbIteratorToken tok, int64 i)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(i);
	pushJsonbValue(state, tok, &v);
}

/* Push a whole jsonb document as a value or element. */
void
JsonbPushJsonb(JsonbParseState **state, JsonbIteratorToken tok, Jsonb *jb)
{
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		(void) JsonbExtractScalar(&jb->root, &v);
		pushJsonbValue(state, tok, &v);
		return;
	}
	v.type = jbvBinary;
	v.val.binary.data = &jb->root;
	v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	pushJsonbValue(state, tok, &v);
}

/* Whether a JSON string value is exactly str. */
bool
JsonbStringIs(JsonbValue *v, const char *str)
{
	return v->type == jbvString && v->val.string.len == (int) strlen(str) &&
		memcmp(v->val.string.val, str, v->val.string.len) == 0;
}

/*
 * Close the object being built in *state and return it as JSON text: the
 * one way the details of audit rows are written.
 */
char *
JsonbEndObjectText(JsonbParseState **state)
{
	JsonbValue *v = pushJsonbValue(state, WJB_END_OBJECT, NULL);

	return JsonbToCString(NULL, &JsonbValueToJsonb(v)->root, 64);
}
