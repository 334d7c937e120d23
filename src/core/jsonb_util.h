/*-------------------------------------------------------------------------
 *
 * jsonb_util.h
 *	  jsonb helpers (jsonb_util.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/jsonb_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_JSONB_UTIL_H
#define CONVCTX_JSONB_UTIL_H

#include "postgres.h"
#include "utils/jsonb.h"

/* jsonb helpers (jsonb_util.c) */

/* Look a key up by a string literal, its length counted by the compiler. */
#define JSONB_KEY(container, key, out) \
	getKeyJsonValueFromContainer((container), "" key "", sizeof(key) - 1, (out))
extern void JsonbWrongType(const char *got, const char *fmt,...)
			pg_attribute_printf(2, 3) pg_attribute_noreturn();
extern const char *JsonbValueTypeName(JsonbValue *v);
extern const char *JsonbRootTypeName(Jsonb *jb);
extern bool JsonbIsArray(Jsonb *jb);
extern bool JsonbStringIs(JsonbValue *v, const char *str);
extern JsonbValue *JsonbObjectString(JsonbContainer *obj, const char *key,
									 const char *what, JsonbValue *out);
extern void JsonbPushKey(JsonbParseState **state, const char *key);
extern void JsonbPushString(JsonbParseState **state, JsonbIteratorToken tok,
							const char *str, int len);
extern void JsonbPushText(JsonbParseState **state, JsonbIteratorToken tok, text *t);
extern void JsonbPushNull(JsonbParseState **state, JsonbIteratorToken tok);
extern void JsonbPushBool(JsonbParseState **state, JsonbIteratorToken tok, bool b);
extern void JsonbPushInt(JsonbParseState **state, JsonbIteratorToken tok, int64 i);
extern char *JsonbEndObjectText(JsonbParseState **state);
extern void JsonbPushJsonb(JsonbParseState **state, JsonbIteratorToken tok, Jsonb *jb);

#endif							/* CONVCTX_JSONB_UTIL_H */
