/*-------------------------------------------------------------------------
 *
 * idmap.h
 *	  A hash set of string ids borrowed from jsonb or text[] inputs (not
 *	  NUL-terminated), for the O(n) deduplication the jsonb functions need.
 *	  Each including file gets its own static instance of simplehash. Ids
 *	  are hashed with a per-backend key (idmap.c), so ids crafted to
 *	  collide cannot turn the linear passes quadratic.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/idmap.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_IDMAP_H
#define CONVCTX_IDMAP_H

#include "port/pg_bswap.h"

extern const uint64 *IdMapKey(void);
extern uint32 IdMapHash(const char *s, int len);

#define IDMAP_ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

#define IDMAP_SIPROUND \
	do { \
		v0 += v1; v1 = IDMAP_ROTL64(v1, 13); v1 ^= v0; v0 = IDMAP_ROTL64(v0, 32); \
		v2 += v3; v3 = IDMAP_ROTL64(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = IDMAP_ROTL64(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = IDMAP_ROTL64(v1, 17); v1 ^= v2; v2 = IDMAP_ROTL64(v2, 32); \
	} while (0)

/*
 * SipHash-1-3 of len bytes under key k (the reference algorithm of
 * Aumasson and Bernstein with one compression and three finalization
 * rounds), inlined where ids are hashed in a loop.
 */
static inline uint64
IdMapSipHash13(const uint64 k[2], const unsigned char *s, size_t len)
{
	uint64		v0 = k[0] ^ UINT64CONST(0x736f6d6570736575);
	uint64		v1 = k[1] ^ UINT64CONST(0x646f72616e646f6d);
	uint64		v2 = k[0] ^ UINT64CONST(0x6c7967656e657261);
	uint64		v3 = k[1] ^ UINT64CONST(0x7465646279746573);
	uint64		b = ((uint64) len) << 56;
	const unsigned char *end = s + (len & ~(size_t) 7);

	for (; s < end; s += 8)
	{
		uint64		m;

		memcpy(&m, s, sizeof(m));
#ifdef WORDS_BIGENDIAN
		m = pg_bswap64(m);
#endif
		v3 ^= m;
		IDMAP_SIPROUND;
		v0 ^= m;
	}
	switch (len & 7)
	{
		case 7:
			b |= ((uint64) s[6]) << 48;
			/* FALLTHROUGH */
		case 6:
			b |= ((uint64) s[5]) << 40;
			/* FALLTHROUGH */
		case 5:
			b |= ((uint64) s[4]) << 32;
			/* FALLTHROUGH */
		case 4:
			b |= ((uint64) s[3]) << 24;
			/* FALLTHROUGH */
		case 3:
			b |= ((uint64) s[2]) << 16;
			/* FALLTHROUGH */
		case 2:
			b |= ((uint64) s[1]) << 8;
			/* FALLTHROUGH */
		case 1:
			b |= ((uint64) s[0]);
			break;
		case 0:
			break;
	}
	v3 ^= b;
	IDMAP_SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	IDMAP_SIPROUND;
	IDMAP_SIPROUND;
	IDMAP_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

typedef struct IdKey
{
	const char *str;
	int			len;
} IdKey;

typedef struct IdEntry
{
	IdKey		key;
	uint32		hash;
	char		status;
	bool		flag;			/* meaning set by the user of the map */
	int			pos;			/* position, meaning set by the user */
	int			index;			/* index, meaning set by the user */
	void	   *value;
} IdEntry;

#define SH_PREFIX		idmap
#define SH_ELEMENT_TYPE IdEntry
#define SH_KEY_TYPE		IdKey
#define SH_KEY			key
#define SH_HASH_KEY(tb, k) IdMapHash((k).str, (k).len)
#define SH_EQUAL(tb, a, b) ((a).len == (b).len && memcmp((a).str, (b).str, (a).len) == 0)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* Insert key; a new entry starts cleared. */
static inline IdEntry *
IdMapInsert(idmap_hash *map, const char *str, int len, bool *found)
{
	IdKey		key = {str, len};
	IdEntry    *e = idmap_insert(map, key, found);

	if (!*found)
	{
		e->flag = false;
		e->pos = -1;
		e->index = -1;
		e->value = NULL;
	}
	return e;
}

static inline IdEntry *
IdMapLookup(idmap_hash *map, const char *str, int len)
{
	IdKey		key = {str, len};

	return idmap_lookup(map, key);
}

#endif							/* CONVCTX_IDMAP_H */
