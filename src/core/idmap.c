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
 * src/core/idmap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bswap.h"

#include "core/idmap.h"

static bool idmap_keyed = false;
static uint64 idmap_key[2];

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
