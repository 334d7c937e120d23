/*-------------------------------------------------------------------------
 *
 * metadata.c
 *	  The request metadata a turn may keep: allowlisted keys only, and a raw
 *	  ip never, only its HMAC-SHA256 under convctx.ip_hash_key as ip_hash
 *	  (no key: the ip is dropped). A plain or salted hash of an IPv4
 *	  address is reversed by hashing all 2^32 of them; a keyed one is not
 *	  without the key.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/metadata.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/varlena.h"

#include "core/args.h"
#include "core/jsonb_util.h"
#include "core/metadata.h"
#include "core/settings.h"

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

/*
 * Lower-case hex HMAC-SHA256 of data under key (64 characters), as
 * pgcrypto's encode(hmac(data, key, 'sha256'), 'hex') computes it.
 */
char *
KeyedHashHex(const char *key, const char *data, int len)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);
	int			i;

	if (ctx == NULL)
		ereport(ERROR,
				errcode(ERRCODE_OUT_OF_MEMORY),
				errmsg("out of memory"));
	if (pg_hmac_init(ctx, (const uint8 *) key, strlen(key)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "could not compute HMAC-SHA256");
	}
	pg_hmac_free(ctx);

	for (i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		sprintf(hex + 2 * i, "%02x", digest[i]);
	return hex;
}

/*
 * The key ip_hash is computed with: convctx.ip_hash_key, else the
 * deprecated convctx.ip_hash_salt (a secret an operator set for the old
 * scheme keeps ip_hash coming, now as a keyed hash), else NULL.
 */
static const char *
IpHashKey(void)
{
	if (convctx_ip_hash_key != NULL && convctx_ip_hash_key[0] != '\0')
		return convctx_ip_hash_key;
	if (convctx_ip_hash_salt != NULL && convctx_ip_hash_salt[0] != '\0')
		return convctx_ip_hash_salt;
	return NULL;
}

/*
 * 54000 when a turn's metadata (a jsonb datum, maybe toasted), after the
 * answer's metadata was merged into it, is larger than
 * convctx.max_text_bytes. Raised after the statement that merged it: the
 * error rolls the write back.
 */
void
CheckMetadataSize(Datum merged)
{
	CheckMaxTextBytes(toast_raw_datum_size(merged) - VARHDRSZ, "metadata is too long",
					  "The turn's metadata merged with the new one has");
}

/*
 * The keyed hash of meta's "ip" (22023 unless a string), when ip_hash is
 * allowlisted and a key is set; else NULL. *ip_given says whether meta
 * has an ip at all.
 */
static char *
MetadataIpHash(Jsonb *meta, List *allowed, bool *ip_given)
{
	JsonbValue	ip;

	*ip_given = false;
	Assert(JB_ROOT_IS_OBJECT(meta));
	if (JSONB_KEY(&meta->root, "ip", &ip) == NULL || ip.type == jbvNull)
		return NULL;
	if (ip.type != jbvString)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("meta key \"ip\" must be a string"));
	*ip_given = true;
	if (!KeyAllowed(allowed, "ip_hash", strlen("ip_hash")) || IpHashKey() == NULL)
		return NULL;
	return KeyedHashHex(IpHashKey(), ip.val.string.val, ip.val.string.len);
}

/*
 * Push the allowlisted pairs of meta; never the raw ip, never a
 * client-supplied hash beside it (ours replaces it; with no key, the ip's
 * hash is not kept at all), never a client's question_neutral_is_fallback.
 * Returns how many were pushed.
 */
static int
PushAllowedPairs(JsonbParseState **state, Jsonb *meta, List *allowed, bool ip_given)
{
	JsonbIterator *it = JsonbIteratorInit(&meta->root);
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			pairs = 0;

	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);
		if (JsonbStringIs(&k, "ip") || (ip_given && JsonbStringIs(&k, "ip_hash")) ||
			JsonbStringIs(&k, "question_neutral_is_fallback"))
			continue;
		if (!KeyAllowed(allowed, k.val.string.val, k.val.string.len))
			continue;
		pushJsonbValue(state, WJB_KEY, &k);
		pushJsonbValue(state, WJB_VALUE, &v);
		pairs++;
	}
	return pairs;
}

/*
 * The metadata object a turn stores for meta (an object, or NULL): its
 * allowlisted keys, a raw "ip" replaced by "ip_hash" (when ip_hash is
 * allowed and a key is set; else dropped), and question_neutral_is_fallback
 * when asked. NULL when nothing is left. A non-string ip is 22023; a
 * result over convctx.max_text_bytes is 54000.
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
	bool		ip_given = false;
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
		ip_hash = MetadataIpHash(meta, allowed, &ip_given);
		pairs += PushAllowedPairs(&state, meta, allowed, ip_given);
	}
	if (ip_hash != NULL)
	{
		JsonbPushKey(&state, "ip_hash");
		JsonbPushString(&state, WJB_VALUE, ip_hash, strlen(ip_hash));
		pairs++;
	}
	if (question_neutral_is_fallback)
	{
		JsonbPushKey(&state, "question_neutral_is_fallback");
		JsonbPushBool(&state, WJB_VALUE, true);
		pairs++;
	}
	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	if (pairs == 0)
		return NULL;

	out = JsonbValueToJsonb(result);
	CheckMaxTextBytes(VARSIZE(out) - VARHDRSZ, "metadata is too long",
					  "The allowlisted metadata has");
	return out;
}

/*
 * The metadata an imported turn keeps of meta, the metadata a convctx
 * server stored: MetadataFilter's, and the question_neutral_is_fallback
 * flag that server set itself.
 */
Jsonb *
MetadataFilterStored(Jsonb *meta)
{
	JsonbValue	flag;

	return MetadataFilter(meta, JSONB_KEY(&meta->root, "question_neutral_is_fallback", &flag) != NULL &&
						  flag.type == jbvBool && flag.val.boolean);
}
