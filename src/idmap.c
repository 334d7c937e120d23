/*-------------------------------------------------------------------------
 *
 * idmap.c
 *	  The keyed hash function of the id hash sets (idmap.h).
 *
 * The ids hashed come from callers (node ids of context_merge and
 * context_add, chunk ids, clarification ids), so they can be chosen to
 * collide. PostgreSQL's hash_bytes is unkeyed and invertible: anyone can
 * compute thousands of ids with one hash value, and a linear-probing set
 * of n such ids costs O(n^2) (16,000 ids took 252 ms instead of 7.8 ms).
 * So ids are hashed with SipHash-1-3 (the keyed function Python and Rust
 * use against hash flooding) under a 128-bit key drawn once per backend
 * from pg_strong_random: without the key, colliding ids cannot be chosen.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/idmap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bswap.h"

#include "idmap.h"

static bool idmap_keyed = false;
static uint64 idmap_key[2];

/* Eight bytes as a little-endian word, as SipHash defines them. */
static inline uint64
ReadLE64(const unsigned char *p)
{
	uint64		w;

	memcpy(&w, p, sizeof(w));
#ifdef WORDS_BIGENDIAN
	w = pg_bswap64(w);
#endif
	return w;
}

/*
 * SipHash-c-d of len bytes under key k (c compression and d finalization
 * rounds); the reference algorithm of Aumasson and Bernstein.
 */
uint64
IdMapSipHash(const uint64 k[2], const unsigned char *s, size_t len, int c, int d)
{
	uint64		v0 = k[0] ^ UINT64CONST(0x736f6d6570736575);
	uint64		v1 = k[1] ^ UINT64CONST(0x646f72616e646f6d);
	uint64		v2 = k[0] ^ UINT64CONST(0x6c7967656e657261);
	uint64		v3 = k[1] ^ UINT64CONST(0x7465646279746573);
	uint64		b = ((uint64) len) << 56;
	size_t		left = len & 7;
	const unsigned char *end = s + (len - left);
	int			i;

	for (; s < end; s += 8)
	{
		uint64		m = ReadLE64(s);

		v3 ^= m;
		for (i = 0; i < c; i++)
			IDMAP_SIPROUND;
		v0 ^= m;
	}
	for (i = (int) left - 1; i >= 0; i--)
		b |= ((uint64) s[i]) << (8 * i);
	v3 ^= b;
	for (i = 0; i < c; i++)
		IDMAP_SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	for (i = 0; i < d; i++)
		IDMAP_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/*
 * This backend's SipHash key, drawn on first use. Without a strong random
 * source there is no safe key: that is an error rather than a predictable
 * one.
 */
const uint64 *
IdMapKey(void)
{
	if (unlikely(!idmap_keyed))
	{
		if (!pg_strong_random(idmap_key, sizeof(idmap_key)))
			ereport(ERROR,
					errcode(ERRCODE_INTERNAL_ERROR),
					errmsg("could not generate a random key for the id hash"));
		idmap_keyed = true;
	}
	return idmap_key;
}

/* The hash of an id: SipHash-1-3 under this backend's key. */
uint32
IdMapHash(const char *s, int len)
{
	return (uint32) IdMapSipHash13(IdMapKey(), (const unsigned char *) s, (size_t) len);
}
