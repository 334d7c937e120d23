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
 * src/idmap.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_IDMAP_H
#define CONVCTX_IDMAP_H

extern uint64 IdMapSipHash(const uint64 k[2], const unsigned char *s, size_t len, int c, int d);
extern uint32 IdMapHash(const char *s, int len);

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
