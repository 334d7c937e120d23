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
 * src/context.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "convctx.h"
#include "idmap.h"
#include "prompt_text.h"

/* The ids of a context's activeNodeIds, in stored order. */
typedef struct NodeIdList
{
	IdKey  *ids;
	int			count;
} NodeIdList;

/*
 * Check that ctx is an object whose activeNodeIds, when present, is an
 * array of strings, and return those strings (empty ones included).
 * Errors are 22023 and name the problem.
 */
static NodeIdList
ContextReadActiveIds(Jsonb *ctx)
{
	NodeIdList	list = {NULL, 0};
	JsonbValue	found;
	JsonbContainer *arr;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n;

	if (!JB_ROOT_IS_OBJECT(ctx))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("context must be a JSON object"),
				errdetail("Got a JSON %s.", JsonbRootTypeName(ctx)));

	if (getKeyJsonValueFromContainer(&ctx->root, CONVCTX_ACTIVE_NODE_IDS,
									 strlen(CONVCTX_ACTIVE_NODE_IDS), &found) == NULL)
		return list;

	if (found.type != jbvBinary || !JsonContainerIsArray(found.val.binary.data))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("context key \"%s\" must be a JSON array", CONVCTX_ACTIVE_NODE_IDS),
				errdetail("Got a JSON %s.", JsonbValueTypeName(&found)));

	arr = found.val.binary.data;
	list.ids = palloc(sizeof(IdKey) * Max(JsonContainerSize(arr), 1));

	n = 0;
	it = JsonbIteratorInit(arr);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvString)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("element %d of context key \"%s\" is not a string",
						   n + 1, CONVCTX_ACTIVE_NODE_IDS),
					errdetail("Got a JSON %s.", JsonbValueTypeName(&v)));
		list.ids[n].str = v.val.string.val;
		list.ids[n].len = v.val.string.len;
		n++;
	}
	list.count = n;
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
 * The batch of a merge: the unique non-empty ids of node_ids, in the order
 * given, each entered with flag true (referenced by the batch) in *set, a
 * new map sized for them and the existing ids.
 */
static IdKey *
MergeBatch(ArrayType *node_ids, int nexisting, idmap_hash **set, int *nbatch)
{
	Datum	   *datums = NULL;
	bool	   *nulls = NULL;
	int			count = 0;
	IdKey	   *batch;
	int			i;

	if (node_ids != NULL)
	{
		if (ARR_NDIM(node_ids) > 1)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node ids must be a one-dimensional array"));
		deconstruct_array(node_ids, TEXTOID, -1, false, TYPALIGN_INT,
						  &datums, &nulls, &count);
	}
	*set = idmap_create(CurrentMemoryContext, Max(nexisting + count, 8), NULL);
	batch = palloc(sizeof(IdKey) * Max(count, 1));
	*nbatch = 0;
	for (i = 0; i < count; i++)
	{
		text	   *t;
		IdKey		key;
		IdEntry    *e;
		bool		found;

		if (nulls[i])
			continue;
		t = DatumGetTextPP(datums[i]);
		key.str = VARDATA_ANY(t);
		key.len = VARSIZE_ANY_EXHDR(t);
		if (key.len == 0)
			continue;
		e = IdMapInsert(*set, key.str, key.len, &found);
		if (found)
			continue;
		e->flag = true;
		e->pos = -1;
		batch[(*nbatch)++] = key;
	}
	return batch;
}

/*
 * The existing ids the batch (already in set) does not reference again,
 * each at its last occurrence, in order.
 */
static IdKey *
MergeSurvivors(NodeIdList *existing, idmap_hash *set, int *nsurvivors)
{
	IdKey	   *survivors = palloc(sizeof(IdKey) * Max(existing->count, 1));
	int			i;

	/* pos: last position in the existing list */
	for (i = 0; i < existing->count; i++)
	{
		IdEntry    *e;
		bool		found;

		if (existing->ids[i].len == 0)
			continue;
		e = IdMapInsert(set, existing->ids[i].str, existing->ids[i].len, &found);
		if (!found)
			e->flag = false;
		if (!e->flag)
			e->pos = i;
	}
	*nsurvivors = 0;
	for (i = 0; i < existing->count; i++)
	{
		IdEntry    *e;

		if (existing->ids[i].len == 0)
			continue;
		e = IdMapLookup(set, existing->ids[i].str, existing->ids[i].len);
		if (!e->flag && e->pos == i)
			survivors[(*nsurvivors)++] = existing->ids[i];
	}
	return survivors;
}

/* Push the pairs of ctx (NULL for none) other than activeNodeIds. */
static void
PushOtherKeys(JsonbParseState **state, Jsonb *ctx)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		skip_value = false;

	if (ctx == NULL)
		return;
	it = JsonbIteratorInit(&ctx->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			skip_value = JsonbStringIs(&v, CONVCTX_ACTIVE_NODE_IDS);
			if (!skip_value)
				pushJsonbValue(state, WJB_KEY, &v);
		}
		else if (tok == WJB_VALUE && !skip_value)
			pushJsonbValue(state, WJB_VALUE, &v);
	}
}

/*
 * Merge node_ids into ctx (NULL means an empty context) and return the new
 * context. Ids already present keep their relative order, ids referenced
 * again move to the end, new ids are appended in the order given (first
 * occurrence wins), NULL and empty ids are ignored, and when more than
 * max_nodes remain the least recently referenced are dropped from the
 * front. Keys other than activeNodeIds are kept unchanged.
 */
Jsonb *
ContextMerge(Jsonb *ctx, ArrayType *node_ids, int max_nodes)
{
	NodeIdList	existing = {NULL, 0};
	idmap_hash *set;
	IdKey	   *batch;
	IdKey	   *survivors;
	int			nbatch;
	int			nsurvivors;
	int			total;
	int			i;
	JsonbParseState *state = NULL;

	Assert(max_nodes >= 1);
	if (ctx != NULL)
		existing = ContextReadActiveIds(ctx);
	batch = MergeBatch(node_ids, existing.count, &set, &nbatch);
	survivors = MergeSurvivors(&existing, set, &nsurvivors);
	total = nsurvivors + nbatch;

	/* Rebuild the object: other keys unchanged, activeNodeIds replaced. */
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	PushOtherKeys(&state, ctx);
	JsonbPushKey(&state, CONVCTX_ACTIVE_NODE_IDS);
	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = total > max_nodes ? total - max_nodes : 0; i < total; i++)
	{
		IdKey	   *k = i < nsurvivors ? &survivors[i] : &batch[i - nsurvivors];

		JsonbPushString(&state, WJB_ELEM, k->str, k->len);
	}
	pushJsonbValue(&state, WJB_END_ARRAY, NULL);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
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
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("key \"%s\" of node %d must be a string", key, node_no),
				errdetail("Got a JSON %s.", JsonbValueTypeName(out)));
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
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("nodes must be a JSON array of objects"),
				errdetail("Got a JSON %s.", JsonbRootTypeName(jnodes)));
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
			ereport(ERROR,
					errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					errmsg("node %d must be a JSON object", n + 1),
					errdetail("Got a JSON %s.", JsonbValueTypeName(&v)));
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
