/*-------------------------------------------------------------------------
 *
 * context.c
 *	  Pure functions over conversation context objects: shape checks, the
 *	  LRU merge of referenced node ids, and the prompt paragraph.
 *
 * A context is a JSON object {"activeNodeIds": [string, ...], ...}. Keys
 * other than activeNodeIds belong to the application and are carried
 * through unchanged. activeNodeIds is ordered from least to most recently
 * referenced. Everything here works on jsonb directly (no text round
 * trip) and runs in time linear in the sizes of its inputs: duplicates are
 * found with a hash set, never with nested loops.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/context/context.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tupmacs.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "core/common.h"
#include "context/context.h"
#include "core/idmap.h"
#include "core/jsonb_util.h"
#include "core/prompt_text.h"
#include "core/settings.h"

/* The ids of a context's activeNodeIds, in stored order. */
typedef struct NodeIdList
{
	IdKey  *ids;
	int			count;
} NodeIdList;

/*
 * The activeNodeIds array of ctx, NULL when the key is absent. Errors are
 * 22023 and name the problem.
 */
static JsonbContainer *
ContextActiveArray(Jsonb *ctx)
{
	JsonbValue	found;

	if (!JB_ROOT_IS_OBJECT(ctx))
		JsonbWrongType(JsonbRootTypeName(ctx), "context must be a JSON object");

	if (getKeyJsonValueFromContainer(&ctx->root, CONVCTX_ACTIVE_NODE_IDS,
									 strlen(CONVCTX_ACTIVE_NODE_IDS), &found) == NULL)
		return NULL;

	if (found.type != jbvBinary || !JsonContainerIsArray(found.val.binary.data))
		JsonbWrongType(JsonbValueTypeName(&found),
					   "context key \"%s\" must be a JSON array", CONVCTX_ACTIVE_NODE_IDS);
	return found.val.binary.data;
}

/*
 * Store the strings of array arr in ids[0 .. size of arr), read from its
 * JEntries directly; an element that is not a string is 22023.
 */
static void
ReadActiveIds(JsonbContainer *arr, IdKey *ids)
{
	int			n = JsonContainerSize(arr);
	const char *base = (const char *) &arr->children[n];
	uint32		off = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		JEntry		je = arr->children[i];
		uint32		start = off;

		if (!JBE_ISSTRING(je))
			JsonbWrongType(JsonbValueTypeName(getIthJsonbValueFromContainer(arr, i)),
						   "element %d of context key \"%s\" is not a string",
						   i + 1, CONVCTX_ACTIVE_NODE_IDS);
		JBE_ADVANCE_OFFSET(off, je);
		ids[i].str = base + start;
		ids[i].len = (int) (off - start);
	}
}

/*
 * Check that ctx is an object whose activeNodeIds, when present, is an
 * array of strings, and return those strings (empty ones included).
 */
static NodeIdList
ContextReadActiveIds(Jsonb *ctx)
{
	NodeIdList	list = {NULL, 0};
	JsonbContainer *arr = ContextActiveArray(ctx);

	if (arr == NULL)
		return list;
	list.count = JsonContainerSize(arr);
	list.ids = palloc(sizeof(IdKey) * Max(list.count, 1));
	ReadActiveIds(arr, list.ids);
	return list;
}

/*
 * Raise 22023 unless ctx has the shape of a conversation context.
 */
void
ContextCheckShape(Jsonb *ctx)
{
	(void) ContextReadActiveIds(ctx);
}

/*
 * Working memory of a merge: the hash set, the ids, the survivors. It is
 * kept for the next call of the backend up to MERGE_SCRATCH_KEEP bytes
 * (about 30,000 ids), so that merges of thousands of ids do not allocate
 * and free a large block per call: in a new backend glibc would hand such
 * a block back to the kernel on every free. A larger merge uses memory of
 * the call. Nothing a merge calls can run another merge, so one buffer
 * serves all; each call initializes what it uses.
 */
#define MERGE_SCRATCH_KEEP	(1024 * 1024)

static MemoryContext merge_scratch_cxt = NULL;
static void *merge_scratch = NULL;
static Size merge_scratch_size = 0;

static void *
MergeScratch(Size size)
{
	if (size > MERGE_SCRATCH_KEEP)
		return MemoryContextAllocHuge(CurrentMemoryContext, size);
	if (size > merge_scratch_size)
	{
		Size		want = Min(Max(size, merge_scratch_size * 2), MERGE_SCRATCH_KEEP);

		if (merge_scratch_cxt == NULL)
			merge_scratch_cxt = AllocSetContextCreate(TopMemoryContext,
													  "convctx context_merge",
													  ALLOCSET_SMALL_SIZES);
		if (merge_scratch != NULL)
			pfree(merge_scratch);
		merge_scratch = NULL;
		merge_scratch_size = 0;
		merge_scratch = MemoryContextAlloc(merge_scratch_cxt, want);
		merge_scratch_size = want;
	}
	return merge_scratch;
}

/*
 * The hash set of a merge: open addressing with linear probing, at most
 * half full, over ids[] (a slot holds the id's index + 1 and 32 bits of
 * its keyed SipHash-1-3, so most mismatches cost no memcmp).
 */
typedef struct MergeSlot
{
	uint32		tag;
	int32		ref;			/* index in ids + 1; 0 for an empty slot */
} MergeSlot;

typedef struct MergeSet
{
	MergeSlot  *slots;
	uint32		mask;
	const uint64 *key;
	const IdKey *ids;
} MergeSet;

/*
 * Add ids[ref] to the set unless an equal id is there: true when added.
 */
static inline bool
MergeSetAdd(MergeSet *set, int ref)
{
	const IdKey *id = &set->ids[ref];
	uint64		h = IdMapSipHash13(set->key, (const unsigned char *) id->str, id->len);
	uint32		tag = (uint32) (h >> 32);
	uint32		i = (uint32) h & set->mask;

	for (;;)
	{
		MergeSlot  *slot = &set->slots[i];

		if (slot->ref == 0)
		{
			slot->tag = tag;
			slot->ref = ref + 1;
			return true;
		}
		if (slot->tag == tag)
		{
			const IdKey *other = &set->ids[slot->ref - 1];

			if (other->len == id->len && memcmp(other->str, id->str, id->len) == 0)
				return false;
		}
		i = (i + 1) & set->mask;
	}
}

/* The most elements and pairs pushJsonbValue accepts (jsonb_util.c). */
#define MERGE_MAX_ELEMS (Min(MaxAllocSize / sizeof(JsonbValue), JENTRY_OFFLENMASK))
#define MERGE_MAX_PAIRS (Min(MaxAllocSize / sizeof(JsonbPair), JB_CMASK))

/* Raise the error PostgreSQL raises for a too large jsonb container. */
static void
JsonbTooLarge(const char *what)
{
	ereport(ERROR,
			errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			errmsg("total size of jsonb %s elements exceeds the maximum of %u bytes",
				   what, JENTRY_OFFLENMASK));
}

/* The JEntry of child k of a container, ending at offset end. */
static inline JEntry
MergeJEntry(int k, uint32 type, uint32 len, uint32 end)
{
	return (k % JB_OFFSET_STRIDE) == 0 ? type | end | JENTRY_HAS_OFF : type | len;
}

/*
 * Write at *pos (data offset off in its container) the array of the merged
 * ids: survivors[ns - 1 .. 0] then batch[0 .. nb), from the skip-th on,
 * laid out as PostgreSQL's convertJsonbArray does. Sizes were checked.
 */
static void
WriteIdArray(char **pos, uint32 off, const IdKey *existing, const int *survivors,
			 int ns, const IdKey *batch, int nb, int skip)
{
	int			n = ns + nb - skip;
	char	   *p = *pos;
	uint32		pad = INTALIGN(off) - off;
	JEntry	   *je;
	uint32		end = 0;
	int			k;

	while (pad-- > 0)
		*p++ = '\0';
	*(uint32 *) p = (uint32) n | JB_FARRAY;
	p += sizeof(uint32);
	je = (JEntry *) p;
	p += sizeof(JEntry) * n;
	for (k = 0; k < n; k++)
	{
		int			i = k + skip;
		const IdKey *id = i < ns ? &existing[survivors[ns - 1 - i]] : &batch[i - ns];

		end += id->len;
		memcpy(p, id->str, id->len);
		p += id->len;
		je[k] = MergeJEntry(k, JENTRY_ISSTRING, id->len, end);
	}
	*pos = p;
}

/*
 * The data length of the value JEntry je of a container (data offset start
 * there), written at data offset off of another: numbers and containers
 * start 4-aligned, their padding counting as data.
 */
static inline uint32
MovedValueLength(JEntry je, uint32 start, uint32 end, uint32 off)
{
	if (JBE_ISNUMERIC(je) || JBE_ISCONTAINER(je))
		return (INTALIGN(off) - off) + (end - INTALIGN(start));
	return end - start;
}

/* The ids a merge keeps (MergeIds): the batch's and the stored survivors. */
typedef struct MergeIds
{
	IdKey	   *ids;			/* ids[0 .. nb): the batch, unique, in order */
	IdKey	   *existing;		/* the stored ids, oldest first */
	int		   *survivors;		/* indexes into existing, newest first */
	int			nb;
	int			ns;
	int			skip;			/* the oldest dropped to keep max_nodes */
	int			nids;			/* ids written: nb + ns - skip */
	Size		iddata;			/* their bytes */
} MergeIds;

/* The object a merge writes: ctx's pairs with activeNodeIds at its place. */
typedef struct MergeObject
{
	int			npairs;			/* ctx's pairs */
	const JEntry *children;
	const char *base;
	int			active_pair;	/* ctx's pair activeNodeIds, or -1 */
	int			insert_at;		/* the result's pair activeNodeIds */
	int			nout;			/* the result's pairs */
} MergeObject;

#define ACTIVE_LEN ((int) (sizeof(CONVCTX_ACTIVE_NODE_IDS) - 1))

/*
 * The batch into the hash set, then the stored ids from the newest back,
 * each kept at its first sight there (its last position) unless the batch
 * has it; the walk stops as soon as max_nodes ids are kept.
 */
static void
MergeKeptIds(Jsonb *ctx, ArrayType *node_ids, int max_nodes, MergeIds *m)
{
	JsonbContainer *arr = ctx ? ContextActiveArray(ctx) : NULL;
	int			nexisting = arr ? JsonContainerSize(arr) : 0;
	int			count = 0;
	int			nonnull = 0;	/* elements of node_ids that are not NULL */
	char	   *adata = NULL;
	bits8	   *anulls = NULL;
	Size		cap;
	char	   *scratch;
	MergeSet	set;
	int			i;
	int			k;

	if (node_ids != NULL)
	{
		count = ArrayGetNItems(ARR_NDIM(node_ids), ARR_DIMS(node_ids));
		nonnull = count;
		/* sized by the ids there are: an array of NULLs is small */
		if (ARR_HASNULL(node_ids))
			for (i = 0; i < count; i++)
				if (att_isnull(i, ARR_NULLBITMAP(node_ids)))
					nonnull--;
	}

	/* ids[0 .. nonnull) the batch, ids[nonnull ..) the stored ids */
	cap = 16;
	while (cap < 2 * ((Size) nonnull + nexisting))
		cap *= 2;
	scratch = MergeScratch(sizeof(MergeSlot) * cap +
						   sizeof(IdKey) * ((Size) nonnull + nexisting) +
						   sizeof(int) * Max(nexisting, 1));
	set.slots = (MergeSlot *) scratch;
	m->ids = (IdKey *) (scratch + sizeof(MergeSlot) * cap);
	m->existing = m->ids + nonnull;
	m->survivors = (int *) (m->existing + nexisting);
	set.mask = (uint32) (cap - 1);
	set.ids = m->ids;

	if (arr != NULL)
		ReadActiveIds(arr, m->existing);
	if (node_ids != NULL)
	{
		if (ARR_NDIM(node_ids) > 1)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node ids must be a one-dimensional array"));
		/* ARR_DATA_PTR, whose ?: mixes signedness */
		adata = (char *) node_ids + (ARR_HASNULL(node_ids) ?
									 (Size) node_ids->dataoffset :
									 ARR_OVERHEAD_NONULLS(ARR_NDIM(node_ids)));
		anulls = ARR_NULLBITMAP(node_ids);
	}
	set.key = IdMapKey();
	memset(set.slots, 0, sizeof(MergeSlot) * cap);

	/* The batch: unique non-empty ids in the order given. */
	m->nb = 0;
	for (i = 0; i < count; i++)
	{
		text	   *t;

		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		if (anulls && att_isnull(i, anulls))
			continue;
		t = (text *) adata;
		adata = att_addlength_pointer(adata, -1, adata);
		adata = (char *) att_align_nominal(adata, TYPALIGN_INT);
		if (VARATT_IS_EXTERNAL(t) || VARATT_IS_COMPRESSED(t))
			t = DatumGetTextPP(PointerGetDatum(t));
		m->ids[m->nb].str = VARDATA_ANY(t);
		m->ids[m->nb].len = VARSIZE_ANY_EXHDR(t);
		if (m->ids[m->nb].len > 0 && MergeSetAdd(&set, m->nb))
			m->nb++;
	}

	/* The survivors, newest first: stored ids the batch does not have. */
	m->ns = 0;
	for (i = nexisting - 1; i >= 0 && m->nb + m->ns < max_nodes; i--)
	{
		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		if (m->existing[i].len > 0 && MergeSetAdd(&set, nonnull + i))
			m->survivors[m->ns++] = i;
	}
	m->skip = m->nb + m->ns > max_nodes ? m->nb + m->ns - max_nodes : 0;
	m->nids = m->nb + m->ns - m->skip;
	if ((Size) m->nids > MERGE_MAX_ELEMS)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("number of jsonb array elements exceeds the maximum allowed (%zu)",
					   MERGE_MAX_ELEMS));
	m->iddata = 0;
	for (k = m->skip; k < m->nb + m->ns; k++)
		m->iddata += k < m->ns ? m->existing[m->survivors[m->ns - 1 - k]].len :
			m->ids[k - m->ns].len;
}

/* Where activeNodeIds goes among the pairs of ctx (sorted as jsonb sorts keys). */
static void
MergePlaceActive(Jsonb *ctx, MergeObject *o)
{
	uint32		off = 0;
	int			k;

	o->npairs = 0;
	o->children = NULL;
	o->base = NULL;
	o->active_pair = -1;
	if (ctx != NULL)
	{
		o->npairs = JsonContainerSize(&ctx->root);
		o->children = ctx->root.children;
		o->base = (const char *) &o->children[2 * o->npairs];
	}
	o->insert_at = o->npairs;
	for (k = 0; k < o->npairs; k++)
	{
		uint32		start = off;
		int			len;
		int			cmp;

		JBE_ADVANCE_OFFSET(off, o->children[k]);
		len = (int) (off - start);
		if (len != ACTIVE_LEN)
			cmp = len < ACTIVE_LEN ? -1 : 1;
		else
			cmp = memcmp(o->base + start, CONVCTX_ACTIVE_NODE_IDS, len);
		if (cmp >= 0)
		{
			o->insert_at = k;
			if (cmp == 0)
				o->active_pair = k;
			break;
		}
	}
	o->nout = o->active_pair >= 0 ? o->npairs : o->npairs + 1;
	if ((Size) o->nout > MERGE_MAX_PAIRS)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("number of jsonb object pairs exceeds the maximum allowed (%zu)",
					   MERGE_MAX_PAIRS));
}

/*
 * The data length of the result's object, checked as convertToJsonb
 * checks it: keys, then values, the array's own limits when it comes,
 * then the object whole, its header and JEntries included.
 */
static uint32
MergeDataLength(const MergeObject *o, const MergeIds *m)
{
	uint32		off;
	uint32		soff = 0;
	uint32		start;
	Size		arraylen;
	int			i;
	int			k;

	for (k = 0; k < o->npairs; k++)
		JBE_ADVANCE_OFFSET(soff, o->children[k]);
	off = soff + (o->active_pair >= 0 ? 0 : ACTIVE_LEN);
	if (off > JENTRY_OFFLENMASK)
		JsonbTooLarge("object");
	for (k = 0, i = 0; k < o->nout; k++)
	{
		if (k == o->insert_at)
		{
			if (m->iddata > JENTRY_OFFLENMASK)
				JsonbTooLarge("array");
			arraylen = (INTALIGN(off) - off) + sizeof(uint32) +
				sizeof(JEntry) * (Size) m->nids + m->iddata;
			if (arraylen > JENTRY_OFFLENMASK)
				JsonbTooLarge("array");
			off += arraylen;
			if (o->active_pair >= 0)
				JBE_ADVANCE_OFFSET(soff, o->children[o->npairs + i++]);
		}
		else
		{
			start = soff;
			JBE_ADVANCE_OFFSET(soff, o->children[o->npairs + i]);
			off += MovedValueLength(o->children[o->npairs + i], start, soff, off);
			i++;
		}
		if (off > JENTRY_OFFLENMASK)
			JsonbTooLarge("object");
	}
	if (sizeof(uint32) + sizeof(JEntry) * 2 * (Size) o->nout + off > JENTRY_OFFLENMASK)
		JsonbTooLarge("object");
	return off;
}

/* The result's keys at *p, their JEntries in je; returns their length. */
static uint32
MergeWriteKeys(const MergeObject *o, JEntry *je, char **p)
{
	uint32		off = 0;
	uint32		soff = 0;
	int			i;
	int			k;

	for (k = 0, i = 0; k < o->nout; k++)
	{
		const char *key;
		uint32		len;

		if (k == o->insert_at)
		{
			key = CONVCTX_ACTIVE_NODE_IDS;
			len = ACTIVE_LEN;
			if (o->active_pair >= 0)
				JBE_ADVANCE_OFFSET(soff, o->children[i++]);
		}
		else
		{
			uint32		start = soff;

			JBE_ADVANCE_OFFSET(soff, o->children[i]);
			key = o->base + start;
			len = soff - start;
			i++;
		}
		memcpy(*p, key, len);
		*p += len;
		off += len;
		je[k] = MergeJEntry(k, JENTRY_ISSTRING, len, off);
	}
	return off;
}

/*
 * The result's values at *p (off bytes into the data), their JEntries at
 * je[nout ..): the id array at its place, the other values copied
 * (numbers and containers from and to 4-aligned offsets).
 */
static void
MergeWriteValues(const MergeObject *o, const MergeIds *m, JEntry *je, char **p, uint32 off)
{
	uint32		soff = 0;
	int			nout = o->nout;
	int			i;
	int			k;

	for (k = 0; k < o->npairs; k++)
		JBE_ADVANCE_OFFSET(soff, o->children[k]);
	for (k = 0, i = 0; k < nout; k++)
	{
		uint32		type;
		uint32		len;

		if (k == o->insert_at)
		{
			char	   *value = *p;

			type = JENTRY_ISCONTAINER;
			WriteIdArray(p, off, m->existing, m->survivors, m->ns, m->ids, m->nb, m->skip);
			len = *p - value;
			if (o->active_pair >= 0)
				JBE_ADVANCE_OFFSET(soff, o->children[o->npairs + i++]);
		}
		else
		{
			JEntry		sje = o->children[o->npairs + i];
			uint32		start = soff;

			JBE_ADVANCE_OFFSET(soff, sje);
			type = sje & JENTRY_TYPEMASK;
			len = MovedValueLength(sje, start, soff, off);
			if (JBE_ISNUMERIC(sje) || JBE_ISCONTAINER(sje))
			{
				uint32		pad = INTALIGN(off) - off;

				memset(*p, 0, pad);
				memcpy(*p + pad, o->base + INTALIGN(start), len - pad);
			}
			else
				memcpy(*p, o->base + start, len);
			*p += len;
			i++;
		}
		off += len;
		je[nout + k] = MergeJEntry(nout + k, type, len, off);
	}
}

/*
 * Merge node_ids into ctx (NULL means an empty context) and return the new
 * context. Ids already present keep their relative order, ids referenced
 * again move to the end, new ids are appended in the order given (first
 * occurrence wins), NULL and empty ids are ignored, and when more than
 * max_nodes remain the least recently referenced are dropped from the
 * front. Keys other than activeNodeIds are kept unchanged.
 *
 * The ids of the batch go into the hash set first, then the stored ids
 * from the newest back, each kept at its first sight there (its last
 * position) unless the batch has it; that walk stops as soon as max_nodes
 * ids are kept, the older ones being pruned anyway.
 *
 * The result is written as PostgreSQL's JsonbValueToJsonb would write it,
 * byte for byte: the object's pairs are ctx's pairs in their (sorted)
 * order with activeNodeIds replaced or inserted at its place, the other
 * values copied (numbers and containers start 4-aligned in their
 * container, so they are copied from and to aligned offsets), and every
 * JB_OFFSET_STRIDE-th JEntry holding an offset instead of a length.
 */
Jsonb *
ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes)
{
	MergeIds	m;
	MergeObject o;
	uint32		datalen;
	uint32		keylen;
	Size		size;
	char	   *out;
	JEntry	   *je;
	char	   *p;

	Assert(max_nodes >= 1);
	MergeKeptIds(ctx, node_ids, max_nodes, &m);
	MergePlaceActive(ctx, &o);
	datalen = MergeDataLength(&o, &m);

	size = VARHDRSZ + sizeof(uint32) + sizeof(JEntry) * 2 * o.nout + datalen;
	out = palloc(size);
	SET_VARSIZE(out, size);
	*(uint32 *) VARDATA(out) = (uint32) o.nout | JB_FOBJECT;
	je = (JEntry *) (VARDATA(out) + sizeof(uint32));
	p = (char *) &je[2 * o.nout];
	keylen = MergeWriteKeys(&o, je, &p);
	MergeWriteValues(&o, &m, je, &p, keylen);
	Assert(p == out + VARSIZE(out));
	return (Jsonb *) out;
}

PG_FUNCTION_INFO_V1(convctx_context_merge);

/*
 * context_merge(ctx jsonb, node_ids text[], max_nodes integer) -> jsonb
 */
Datum
convctx_context_merge(PG_FUNCTION_ARGS)
{
	Jsonb	   *ctx = PG_ARGISNULL(0) ? NULL : PG_GETARG_JSONB_P(0);
	ArrayType  *ids = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1);
	int			max_nodes = convctx_max_active_nodes;

	if (!PG_ARGISNULL(2))
	{
		max_nodes = PG_GETARG_INT32(2);
		if (max_nodes < 1)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("max_nodes must be at least 1"),
					errdetail("Got %d.", max_nodes));
	}

	PG_RETURN_JSONB_P(ContextMerge(ctx, ids, max_nodes));
}

/* The fields of one node object that context_aspect prints. */
typedef struct AspectNode
{
	JsonbValue	label;
	JsonbValue	jurisdiction;
	JsonbValue	description;
} AspectNode;

/*
 * Read an optional string field of a node object into *out (type jbvNull
 * when absent, null or empty). Anything but a string or null is 22023.
 */
static void
NodeOptionalString(JsonbContainer *node, int node_no, const char *key, JsonbValue *out)
{
	if (getKeyJsonValueFromContainer(node, key, strlen(key), out) == NULL ||
		out->type == jbvNull)
	{
		out->type = jbvNull;
		return;
	}
	if (out->type != jbvString)
		JsonbWrongType(JsonbValueTypeName(out),
					   "key \"%s\" of node %d must be a string", key, node_no);
	if (out->val.string.len == 0)
		out->type = jbvNull;
}

/*
 * Read the node objects into an array, and index in set the first object
 * for each id (flag false: not listed yet).
 */
static AspectNode *
ReadAspectNodes(Jsonb *jnodes, idmap_hash *set)
{
	AspectNode *nodes;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;

	if (!JB_ROOT_IS_ARRAY(jnodes) || JB_ROOT_IS_SCALAR(jnodes))
		JsonbWrongType(JsonbRootTypeName(jnodes), "nodes must be a JSON array of objects");
	nodes = palloc(sizeof(AspectNode) * Max(JB_ROOT_COUNT(jnodes), 1));
	it = JsonbIteratorInit(&jnodes->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *node;
		JsonbValue	id;
		JsonbValue	pref;
		JsonbValue	name;
		IdEntry    *e;
		bool		found;

		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			JsonbWrongType(JsonbValueTypeName(&v), "node %d must be a JSON object", n + 1);
		node = v.val.binary.data;
		if (JSONB_KEY(node, "id", &id) == NULL || id.type != jbvString)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node %d must have a string \"id\"", n + 1));
		NodeOptionalString(node, n + 1, "prefLabel", &pref);
		NodeOptionalString(node, n + 1, "name", &name);
		nodes[n].label = pref.type == jbvString ? pref :
			name.type == jbvString ? name : id;
		NodeOptionalString(node, n + 1, "jurisdiction", &nodes[n].jurisdiction);
		NodeOptionalString(node, n + 1, "shortDescription", &nodes[n].description);

		/* The first object for an id describes it. */
		e = IdMapInsert(set, id.val.string.val, id.val.string.len, &found);
		if (!found)
		{
			e->index = n;
			e->flag = false;
		}
		n++;
	}
	return nodes;
}

/* One concept line: "label (jurisdiction) – description". */
static void
AppendAspectNode(StringInfo buf, AspectNode *node)
{
	/*
	 * The en dash the apps convctx replaces print, where the database
	 * encoding can hold it.
	 */
	const char *dash = (GetDatabaseEncoding() == PG_UTF8 ||
						GetDatabaseEncoding() == PG_SQL_ASCII) ?
		" \xe2\x80\x93 " : " - ";

	AppendPromptLine(buf, node->label.val.string.val, node->label.val.string.len);
	if (node->jurisdiction.type == jbvString)
	{
		appendStringInfoString(buf, " (");
		AppendPromptLine(buf, node->jurisdiction.val.string.val,
						 node->jurisdiction.val.string.len);
		appendStringInfoChar(buf, ')');
	}
	if (node->description.type == jbvString)
	{
		appendStringInfoString(buf, dash);
		AppendPromptLine(buf, node->description.val.string.val,
						 node->description.val.string.len);
	}
}

/* The context_aspect paragraph of ctx, nodes NULL for none; NULL when empty. */
static text *
ContextAspect(Jsonb *ctx, Jsonb *jnodes)
{
	NodeIdList	active = ContextReadActiveIds(ctx);

	/* index: the node object describing the id; flag: already listed */
	idmap_hash *set = idmap_create(CurrentMemoryContext, Max(active.count, 8), NULL);
	AspectNode *nodes = jnodes ? ReadAspectNodes(jnodes, set) : NULL;
	StringInfoData buf;
	int			lines = 0;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf,
						   "In this conversation, the following regulatory concepts are already in scope:");
	for (i = 0; i < active.count; i++)
	{
		IdKey		key = active.ids[i];
		IdEntry    *e;
		bool		found;

		if (key.len == 0)
			continue;
		e = IdMapInsert(set, key.str, key.len, &found);
		if (!found)
			e->index = -1;
		else if (e->flag)
			continue;			/* already listed */
		e->flag = true;
		appendStringInfoString(&buf, "\n- ");
		if (e->index < 0)
			AppendPromptLine(&buf, key.str, key.len);
		else
			AppendAspectNode(&buf, &nodes[e->index]);
		lines++;
	}
	if (lines == 0)
		return NULL;
	appendStringInfoString(&buf,
						   "\nWhere relevant, prefer grounded explanations that reuse these concepts.");
	return cstring_to_text_with_len(buf.data, buf.len);
}

PG_FUNCTION_INFO_V1(convctx_context_aspect);

/*
 * context_aspect(ctx jsonb, nodes jsonb) -> text
 *
 * The "active concepts" paragraph for the system prompt: one line per
 * active node id, in activeNodeIds order, described by the matching
 * object of nodes when there is one. NULL when there are no active ids.
 * Ids and node fields come from the app's graph and from model output, so
 * each is shown on one line (prompt_text.c): none can start a concept
 * line or the closing sentence of its own.
 */
Datum
convctx_context_aspect(PG_FUNCTION_ARGS)
{
	text	   *out;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	out = ContextAspect(PG_GETARG_JSONB_P(0), PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1));
	if (out == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(out);
}
