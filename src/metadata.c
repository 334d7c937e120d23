/*-------------------------------------------------------------------------
 *
 * metadata.c
 *	  The request metadata a turn may keep: allowlisted keys only, and a raw
 *	  ip never, only its salted SHA-256 as ip_hash.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/metadata.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/varlena.h"

#include "convctx.h"

static bool
KeyAllowed(List *allowed, const char *key, int len)
{
	ListCell   *lc;

	foreach(lc, allowed)
	{
		const char *a = lfirst(lc);

		if ((int) strlen(a) == len && memcmp(a, key, len) == 0)
			return true;
	}
	return false;
}

static bool
KeyIs(JsonbValue *k, const char *name)
{
	return k->val.string.len == (int) strlen(name) &&
		memcmp(k->val.string.val, name, k->val.string.len) == 0;
}

/* Lower-case hex SHA-256 of convctx.ip_hash_salt || ip. */
static char *
HashIp(const char *ip, int len)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	const char *salt = convctx_ip_hash_salt ? convctx_ip_hash_salt : "";
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);
	int			i;

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) salt, strlen(salt)) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) ip, len) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_cryptohash_free(ctx);
		elog(ERROR, "could not compute SHA-256 of the ip");
	}
	pg_cryptohash_free(ctx);

	for (i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		sprintf(hex + 2 * i, "%02x", digest[i]);
	return hex;
}

/*
 * The metadata object a turn stores for meta (an object, or NULL): its
 * allowlisted keys, a raw "ip" replaced by "ip_hash" (when ip_hash is
 * allowed), and question_neutral_is_fallback when asked. NULL when nothing
 * is left. A non-string ip is 22023; a result over convctx.max_text_bytes
 * is 54000.
 */
Jsonb *
MetadataFilter(Jsonb *meta, bool question_neutral_is_fallback)
{
	JsonbParseState *state = NULL;
	JsonbValue *result;
	List	   *allowed = NIL;
	char	   *raw;
	int			pairs = 0;
	char	   *ip_hash = NULL;
	Jsonb	   *out;

	/* Most turns carry no metadata: nothing to parse or build. */
	if (meta == NULL && !question_neutral_is_fallback)
		return NULL;

	raw = pstrdup(convctx_metadata_allowlist ? convctx_metadata_allowlist : "");
	if (!SplitGUCList(raw, ',', &allowed))
		allowed = NIL;			/* the check hook keeps this from happening */

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);

	if (meta != NULL)
	{
		JsonbValue	ip;

		Assert(JB_ROOT_IS_OBJECT(meta));
		if (getKeyJsonValueFromContainer(&meta->root, "ip", 2, &ip) != NULL &&
			ip.type != jbvNull)
		{
			if (ip.type != jbvString)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("meta key \"ip\" must be a string"));
			if (KeyAllowed(allowed, "ip_hash", 7))
				ip_hash = HashIp(ip.val.string.val, ip.val.string.len);
		}
	}

	if (meta != NULL)
	{
		JsonbIterator *it = JsonbIteratorInit(&meta->root);
		JsonbValue	k;
		JsonbValue	v;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			if (tok != WJB_KEY)
				continue;
			tok = JsonbIteratorNext(&it, &v, true);
			Assert(tok == WJB_VALUE);
			/* never the raw ip, never a client-supplied hash beside it */
			if (KeyIs(&k, "ip") || (ip_hash != NULL && KeyIs(&k, "ip_hash")) ||
				KeyIs(&k, "question_neutral_is_fallback"))
				continue;
			if (!KeyAllowed(allowed, k.val.string.val, k.val.string.len))
				continue;
			pushJsonbValue(&state, WJB_KEY, &k);
			pushJsonbValue(&state, WJB_VALUE, &v);
			pairs++;
		}
	}

	if (ip_hash != NULL)
	{
		JsonbValue	k;
		JsonbValue	v;

		k.type = jbvString;
		k.val.string.val = "ip_hash";
		k.val.string.len = 7;
		v.type = jbvString;
		v.val.string.val = ip_hash;
		v.val.string.len = strlen(ip_hash);
		pushJsonbValue(&state, WJB_KEY, &k);
		pushJsonbValue(&state, WJB_VALUE, &v);
		pairs++;
	}

	if (question_neutral_is_fallback)
	{
		JsonbValue	k;
		JsonbValue	v;

		k.type = jbvString;
		k.val.string.val = "question_neutral_is_fallback";
		k.val.string.len = strlen(k.val.string.val);
		v.type = jbvBool;
		v.val.boolean = true;
		pushJsonbValue(&state, WJB_KEY, &k);
		pushJsonbValue(&state, WJB_VALUE, &v);
		pairs++;
	}

	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	if (pairs == 0)
		return NULL;

	out = JsonbValueToJsonb(result);
	if (VARSIZE(out) - VARHDRSZ > (Size) convctx_max_text_bytes)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("metadata is too long"),
				errdetail("The allowlisted metadata has %zu bytes; convctx.max_text_bytes allows %d.",
						  (Size) (VARSIZE(out) - VARHDRSZ), convctx_max_text_bytes));
	return out;
}
