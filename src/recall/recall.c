/*-------------------------------------------------------------------------
 *
 * recall.c
 *	  Semantic recall over turns with pgvector: the functions of extension
 *	  convctx_recall (sql/convctx_recall--0.5.0.sql), and what redaction
 *	  and erasure forget of its embeddings.
 *
 * The app brings the embeddings; convctx_recall.turn_embedding keeps one
 * per turn and model, beside the turn, with a foreign key that deletes it
 * with its turn (retention purges, the anonymous cap). A redaction or an
 * erasure keeps the turn as a tombstone, so they delete its embeddings
 * here, in the same transaction (RecallForget). Reads join the turn and
 * return live, current versions only, so that nothing forgotten is ever
 * returned even by a read that races the forgetting.
 *
 * pgvector is reached by name: its type and its cosine distance operator
 * <=> are named with their schema in the statements, as every function
 * the statements call is. So the schema of extension vector must be one
 * that only a superuser can change (RecallCatalog), and the statements
 * are prepared again whenever a schema changes.
 *
 * A tenant with many embeddings of a model has its own HNSW index, partial
 * on its number and built on the embeddings cast to the model's dimensions
 * (convctx_recall.index_tenants): a statement that can use it names both,
 * so it is written and kept per index, a bounded number of them
 * (TenantPlan). The exact statements take the model as a parameter: one of
 * each scope serves every model.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/recall/recall.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/uuid.h"

#include "core/catalog.h"
#include "core/common.h"
#include "core/args.h"
#include "core/spi_plans.h"
#include "core/writable.h"
#include "recall/recall.h"
#include "core/tenancy.h"
#include "turns/turns.h"
#include "core/variant.h"

/* The largest k of a recall, and the most turns a work list returns at once. */
#define RECALL_MAX_K 1000
#define RECALL_MAX_WORK 10000

/*
 * What RecallCatalog found; forgotten when any schema changes (the
 * statements name schemas), checked again before the next use.
 */
static bool recall_checked = false;
static bool recall_installed = false;
static bool vector_checked = false;
static Oid	vector_type = InvalidOid;
static Oid	embedding_relid = InvalidOid;
static char *vector_schema = NULL;	/* quoted, in TopMemoryContext */

/* Kept plans that name no model. */
static SPIPlanPtr model_plan, store_plan, turn_exists_plan, unembedded_plan,
			forget_turn_plan, forget_versions_plan, forget_session_plan, forget_sessions_plan,
			import_plan, import_state_plan;

/* Kept plan of RecallForgetVersion. */
static SPIPlanPtr forget_version_plan;

/*
 * The number of the tenant's own index of the model, for a new embedding
 * ($1 the tenant, $4 the model's number): NULL while it has none.
 */
#define TENANT_INDEX_NO \
	"(SELECT i.index_no FROM convctx_recall.tenant_index i" \
	"  WHERE i.model_no OPERATOR(pg_catalog.=) $4 AND i.tenant_id OPERATOR(pg_catalog.=) $1)"

/* The statements of a recall (RecallSql), by scope. */
typedef enum RecallKind
{
	RECALL_TENANT_INDEX,		/* the tenant's, through its own HNSW index */
	RECALL_TENANT_EXACT,		/* the tenant's, each compared */
	RECALL_SESSION,				/* a session's, each compared */
	RECALL_IDENTITY,			/* an identity's sessions', each compared */
	RECALL_KINDS
} RecallKind;

/*
 * The exact kinds take the model as a parameter: one kept plan of each
 * serves every model (RECALL_TENANT_INDEX's slot is unused).
 */
static SPIPlanPtr exact_plans[RECALL_KINDS];

/*
 * The statement through a tenant's own index names the model's dimensions
 * and the index's number (index_tenants); a backend keeps at most
 * RECALL_TENANT_PLANS of them in all, the most recently used, so that its
 * memory does not grow with the number of models and tenants (each kept
 * plan takes some 65 kB). They are all freed when turn_embedding's
 * relation cache entry is invalidated, as an index built or dropped on it
 * does (index_tenants, rebuild_index, drop_model): freed before the next
 * recall, never while one runs.
 */
#define RECALL_TENANT_PLANS 64

typedef struct TenantPlan
{
	int32		model_no;
	int32		dims;
	int32		index_no;
	SPIPlanPtr	plan;
	struct TenantPlan *next;
} TenantPlan;

static TenantPlan *tenant_plans = NULL;
static bool tenant_plans_stale = false;

/*
 * What the check depends on changed, or may have: a schema (a rename),
 * a relation (DROP EXTENSION convctx_recall leaves the schema, so only its
 * table says it is gone), a type (ALTER EXTENSION vector SET SCHEMA), a
 * role, a membership or a database (who may change pgvector's schema).
 * Checked again before the next use; the plans are freed then if what they
 * name changed (RecallCatalog).
 */
static void
RecallInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	recall_checked = false;
	vector_checked = false;
}

static bool rel_callback_registered = false;

/* turn_embedding's indexes may have changed: its tenant plans go (RecallPlan). */
static void
RecallRelInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == embedding_relid)
		tenant_plans_stale = true;
}

/* What recall does when turns are forgotten, exported or imported. */
static const ConvctxCompanion recall_companion = {
	.name = "convctx_recall",
	.forget_turns = RecallForget,
	.forget_sessions = RecallForgetSessions,
	.export_sql = RecallExportSql,
	.import_embedding = RecallImportEmbedding,
	.forget_version = RecallForgetVersion,
};

/*
 * From _PG_init: recall registered as the companion, so that every backend
 * that loaded the library forgets embeddings with their turns, whether or
 * not it called a recall function before.
 */
void
RecallInit(void)
{
	int			caches[] = {NAMESPACEOID, RELOID, TYPEOID, AUTHOID, AUTHMEMROLEMEM, DATABASEOID};
	int			i;

	for (i = 0; i < (int) lengthof(caches); i++)
		CacheRegisterSyscacheCallback(caches[i], RecallInvalidate, (Datum) 0);
	CompanionRegister(&recall_companion);
}

/* Free the kept plans through tenants' indexes. */
static void
RecallFreeTenantPlans(void)
{
	while (tenant_plans)
	{
		TenantPlan *t = tenant_plans;

		if (t->plan)
			SPI_freeplan(t->plan);
		tenant_plans = t->next;
		pfree(t);
	}
	tenant_plans_stale = false;
}

/* Free every kept plan of this file: the schemas they name may have changed. */
static void
RecallFreePlans(void)
{
	SPIPlanPtr *fixed[] = {&model_plan, &store_plan, &turn_exists_plan, &unembedded_plan,
		&forget_turn_plan, &forget_versions_plan, &forget_session_plan, &forget_sessions_plan,
	&import_plan, &import_state_plan};
	int			i;

	for (i = 0; i < (int) lengthof(fixed); i++)
	{
		if (*fixed[i])
			SPI_freeplan(*fixed[i]);
		*fixed[i] = NULL;
	}
	if (forget_version_plan)
		SPI_freeplan(forget_version_plan);
	forget_version_plan = NULL;
	for (i = 0; i < RECALL_KINDS; i++)
	{
		if (exact_plans[i])
			SPI_freeplan(exact_plans[i]);
		exact_plans[i] = NULL;
	}
	RecallFreeTenantPlans();
}

/*
 * Whether the schema can be changed by nobody but a superuser: it belongs
 * to a superuser or to convctx's owner (or is owned by pg_database_owner
 * in a database a superuser owns), and no other role may create in it.
 */
bool
RecallSchemaTrusted(Oid nsp)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	Form_pg_namespace form;
	Oid			owner;
	bool		isnull;
	Datum		acl_datum;
	bool		trusted;

	if (!HeapTupleIsValid(tup))
		return false;
	form = (Form_pg_namespace) GETSTRUCT(tup);
	owner = form->nspowner;
	if (owner == ROLE_PG_DATABASE_OWNER)
	{
		HeapTuple	db = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));

		trusted = HeapTupleIsValid(db) &&
			superuser_arg(((Form_pg_database) GETSTRUCT(db))->datdba);
		if (HeapTupleIsValid(db))
			ReleaseSysCache(db);
	}
	else
		trusted = superuser_arg(owner) || owner == ConvctxOwner();
	acl_datum = SysCacheGetAttr(NAMESPACEOID, tup, Anum_pg_namespace_nspacl, &isnull);
	if (trusted && !isnull)
	{
		Acl		   *acl = DatumGetAclP(acl_datum);
		Oid		   *members;
		int			n = aclmembers(acl, &members);
		int			i;

		/* the members include grantors, and PUBLIC as InvalidOid */
		for (i = 0; i < n; i++)
			if (members[i] != owner && !superuser_arg(members[i]) &&
				aclmask(acl, members[i], owner, ACL_CREATE, ACLMASK_ANY) != 0)
				trusted = false;
	}
	ReleaseSysCache(tup);
	return trusted;
}

/*
 * Check what the statements name, as catalog.c's CatalogCheck does for
 * convctx; ERROR when convctx_recall is installed but not as it must be:
 *	- its version is the library's and it belongs to convctx's owner (the
 *	  statements run as that owner);
 *	- the schema named convctx_recall is the extension's;
 *	- with vector_too, for the statements that name pgvector's type and
 *	  operator: the schema of extension vector is one that only a
 *	  superuser can change (RecallSchemaTrusted); its owner could otherwise
 *	  rename it and create another of its name, with a type and an
 *	  operator that the statements would then call as the owner. The
 *	  deletes of redaction and erasure name nothing of pgvector's and do
 *	  not depend on it.
 * The kept plans are freed when the table or pgvector's schema they name
 * is another one. Returns whether convctx_recall is installed.
 */
static bool
RecallCatalog(bool vector_too)
{
	Oid			nsp,
				owner,
				vector_nsp,
				vector_owner,
				relid;
	char	   *version,
			   *vector_version;
	const char *schema;
	AttrNumber	att;

	if (!recall_checked)
	{
		recall_installed = ExtensionLookup("convctx_recall", &nsp, &owner, &version);
		relid = InvalidOid;
		if (recall_installed)
		{
			if (!creating_extension && strcmp(version, CONVCTX_VERSION) != 0)
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("convctx library version %s does not match the installed convctx_recall version %s",
							   CONVCTX_VERSION, version),
						errhint("Run ALTER EXTENSION convctx_recall UPDATE."));
			if (owner != ConvctxOwner())
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("extension \"convctx_recall\" does not belong to the owner of extension \"convctx\""),
						errhint("Drop convctx_recall and create it as the role that created convctx."));
			if (get_namespace_oid("convctx_recall", true) != nsp)
				ereport(ERROR,
						errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("schema \"convctx_recall\" is not the schema of extension \"convctx_recall\""),
						errhint("Rename the schemas back; convctx's statements name schema convctx_recall."));
			relid = get_relname_relid("turn_embedding", nsp);
			if (!OidIsValid(relid))
				elog(ERROR, "convctx_recall.turn_embedding does not exist");

			/*
			 * Registered once the extension is found here, not at load: a
			 * backend has ten relcache callbacks in all, and Citus, where
			 * recall never runs, takes five.
			 */
			if (!rel_callback_registered)
			{
				CacheRegisterRelcacheCallback(RecallRelInvalidate, (Datum) 0);
				rel_callback_registered = true;
			}
		}
		/* a model's number may name other dimensions in a table made again */
		if (relid != embedding_relid)
			RecallFreePlans();
		embedding_relid = relid;
		recall_checked = true;
	}
	if (!recall_installed || !vector_too || vector_checked)
		return recall_installed;

	if (!ExtensionLookup("vector", &vector_nsp, &vector_owner, &vector_version))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension \"vector\" is not installed"),
				errhint("Run CREATE EXTENSION vector."));
	if (!RecallSchemaTrusted(vector_nsp))
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("schema \"%s\" of extension \"vector\" can be changed by roles that are not superusers",
					   get_namespace_name(vector_nsp)),
				errdetail("convctx names pgvector's type and operators with their schema, and runs them as its owner."),
				errhint("Move pgvector to a schema that only a superuser owns and creates in: CREATE SCHEMA vectors; ALTER EXTENSION vector SET SCHEMA vectors;"));
	att = get_attnum(embedding_relid, "embedding");
	if (att == InvalidAttrNumber)
		elog(ERROR, "convctx_recall.turn_embedding.embedding does not exist");
	vector_type = get_atttype(embedding_relid, att);
	{
		HeapTuple	typ = SearchSysCache1(TYPEOID, ObjectIdGetDatum(vector_type));
		bool		ours = HeapTupleIsValid(typ) &&
			((Form_pg_type) GETSTRUCT(typ))->typnamespace == vector_nsp &&
			strcmp(NameStr(((Form_pg_type) GETSTRUCT(typ))->typname), "vector") == 0;

		if (HeapTupleIsValid(typ))
			ReleaseSysCache(typ);
		if (!ours)
			elog(ERROR, "convctx_recall.turn_embedding.embedding is not of pgvector's type");
	}
	schema = quote_identifier(get_namespace_name(vector_nsp));
	if (vector_schema == NULL || strcmp(vector_schema, schema) != 0)
	{
		RecallFreePlans();
		if (vector_schema)
			pfree(vector_schema);
		vector_schema = MemoryContextStrdup(TopMemoryContext, schema);
	}
	vector_checked = true;
	return true;
}

/* ERROR unless convctx_recall can run here; from every function of it. */
static void
RecallCheck(const char *function)
{
	VariantRefuse(function, "Semantic recall runs on a single server.");
	if (!RecallCatalog(true))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension \"convctx_recall\" is not installed in this database"),
				errhint("Run CREATE EXTENSION convctx_recall (it needs pgvector)."));
}

/*
 * A model's number and dimensions, and the number of the tenant's own
 * index of it (index_tenants; 0 when tenant is NULL or has none ready:
 * its rows not all marked yet, src/recall/recall_index.c); 42704
 * when the model is not registered, or false with missing_ok. SPI
 * connected.
 */
static bool
ModelLookup(text *model, text *tenant, int32 *model_no, int32 *dims, int32 *index_no,
			bool missing_ok)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {PointerGetDatum(model), PointerGetDatum(tenant)};
	char		nulls[2] = {' ', tenant ? ' ' : 'n'};
	bool		isnull;

	SpiRunPlan(SpiKeptPlan(&model_plan,
						   "SELECT m.model_no, m.dimensions,"
						   "       (SELECT i.index_no FROM convctx_recall.tenant_index i"
						   "         WHERE i.model_no OPERATOR(pg_catalog.=) m.model_no"
						   "           AND i.tenant_id OPERATOR(pg_catalog.=) $2 AND i.ready)"
						   "  FROM convctx_recall.model m WHERE m.model OPERATOR(pg_catalog.=) $1",
						   2, argtypes),
			   values, nulls, true, 1, SPI_OK_SELECT);
	if (SPI_processed == 0 && missing_ok)
		return false;
	if (SPI_processed == 0)
		ereport(ERROR,
				errcode(ERRCODE_UNDEFINED_OBJECT),
				errmsg("embedding model \"%s\" is not registered", text_to_cstring(model)),
				errhint("A superuser registers it with its dimensions: SELECT convctx_recall.add_model('%s', 384);",
						text_to_cstring(model)));
	*model_no = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*dims = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (index_no)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);

		*index_no = isnull ? 0 : DatumGetInt32(d);
	}
	return true;
}

/*
 * An embedding, a pgvector vector, checked to have the model's dimensions
 * (22000; pgvector's own input already refused anything that is not a
 * vector) and a cosine distance to any other embedding (22023).
 *
 * pgvector computes a cosine distance from the sums of the squares of
 * the elements in single precision (VectorCosineSimilarity): when that sum
 * is 0 (a vector of zeros, or elements so small that their squares
 * underflow) the distance is NaN, and the HNSW index leaves the vector
 * out; when it overflows, the distance is NaN or meaningless. pgvector
 * never holds a NaN or an infinite element (its input and arithmetic refuse
 * them), but a sum that is not a finite number is refused all the same.
 * The bound keeps a margin for the order in which pgvector adds (its loop
 * is vectorized): 2000 dimensions round by far less than a factor 2.
 */
static Datum
CheckDimensions(Datum embedding, int32 dims)
{
	struct varlena *v = PG_DETOAST_DATUM(embedding);
	int16		got;
	int			i;
	bool		nonzero = false;
	double		sum = 0.0;

	if (VARSIZE(v) < VARHDRSZ + 2 * sizeof(int16))
		elog(ERROR, "embedding is not a vector");
	/* pgvector's Vector: varlena header, int16 dim, int16 unused, float4 x[] */
	memcpy(&got, VARDATA(v), sizeof(int16));
	if (got != dims)
		ereport(ERROR,
				errcode(ERRCODE_DATA_EXCEPTION),
				errmsg("embedding has %d dimensions, the model has %d", got, dims),
				errhint("Embed with the model the name says, or register the other model under its own name."));
	if (VARSIZE(v) != VARHDRSZ + 2 * sizeof(int16) + got * sizeof(float4))
		elog(ERROR, "embedding is not a vector");
	for (i = 0; i < got; i++)
	{
		float4		x;
		float4		square;

		memcpy(&x, VARDATA(v) + 2 * sizeof(int16) + i * sizeof(float4), sizeof(float4));
		square = x * x;
		nonzero |= (square != 0.0f);
		sum += (double) square;
	}
	if (!nonzero)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("embedding has no cosine distance: its norm is zero"),
				errdetail("Every element is 0, or too small for its square to be a float4 (below about 1e-22)."),
				errhint("Pass the vector the model returned for a text; a vector of zeros has no direction."));
	if (!(sum <= FLT_MAX / 2))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("embedding has no cosine distance: its norm is too large"),
				errdetail("The sum of the squares of its elements is %g, more than a float4 holds.", sum),
				errhint("Scale the vector down (cosine distance does not depend on its length), or normalize it."));
	return PointerGetDatum(v);
}

/* The embedding argument, checked as CheckDimensions checks it. */
static Datum
ArgEmbedding(FunctionCallInfo fcinfo, int argno, int32 dims)
{
	ArgNotNull(fcinfo, argno, "embedding");
	return CheckDimensions(PG_GETARG_DATUM(argno), dims);
}

/*
 * The statement of a recall of one kind: $1 tenant, $2 the query
 * embedding, $3 k, $4 whether turns without an answer count, $5 the
 * session or the identity, $6 the model's number, $7 how many candidates.
 * Its rows are (distance, session_id, turn_id, turn_no, created_at,
 * question_neutral, answer_neutral, live), nearest first.
 *
 * The exact kinds take the $7 nearest embeddings of the scope first,
 * ordered by distance and then key (a total order: ties are broken as
 * they always were), as a plain scan of the embeddings would, and only
 * then read the turns of these candidates; live says whether the turn is
 * one a recall returns (a live, current version; answered, unless $4),
 * so that the caller knows both which rows count and whether the
 * candidates ran out (RecallExact). The embeddings of the scope are read
 * through the btree on (tenant_id, model_no), or the primary key for a
 * session or an identity's sessions (as below). Each candidate's turn is
 * the first at or after its id in its session, by the primary key (the
 * foreign key says it is there): asked for by equality, the planner, which
 * deems (tenant_id, session_id) as selective as the whole key, may take
 * the smaller turn_chronology and read every turn of the session for each.
 *
 * RECALL_TENANT_INDEX names the model's dimensions and the number of the
 * tenant's own index and orders by the index's expression
 * (convctx_recall.index_tenants: partial on index_no, on the embedding
 * cast to the model's dimensions), so that the planner can prove the index
 * covers it; it filters the turns as it goes (pgvector's iterative scan),
 * returns live rows only, and ignores $6 and $7.
 */
static char *
RecallSql(RecallKind kind, int32 dims, int32 index_no)
{
	const char *vs = vector_schema;
	const char *scope = "";
	const char *from = "convctx_recall.turn_embedding e";
	const char *model;

	if (kind == RECALL_TENANT_INDEX)
		return psprintf("SELECT (e.embedding OPERATOR(%s.<=>) $2), t.session_id::pg_catalog.text,"
						"       t.turn_id, t.turn_no, t.created_at, t.question_neutral,"
						"       t.answer_neutral, true"
						"  FROM convctx_recall.turn_embedding e"
						"  JOIN convctx.turn t"
						"    ON t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id"
						"   AND t.session_id OPERATOR(pg_catalog.=) e.session_id"
						"   AND t.turn_id OPERATOR(pg_catalog.=) e.turn_id"
						" WHERE e.tenant_id OPERATOR(pg_catalog.=) $1"
						"   AND e.index_no OPERATOR(pg_catalog.=) %d"
						"   AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
						"   AND ($4 OR t.finalized_at IS NOT NULL)"
						" ORDER BY (e.embedding::%s.vector(%d) OPERATOR(%s.<=>) $2::%s.vector(%d))"
						" LIMIT $3",
						vs, index_no, vs, dims, vs, vs, dims);

	/*
	 * A session's or an identity's embeddings through the primary key, on
	 * (tenant_id, session_id), for each session linked to the identity
	 * (one link per session): the model is compared in an expression that
	 * the btree on (tenant_id, model_no) cannot use, as otherwise the
	 * planner, which without statistics deems both as selective, takes the
	 * smaller index and reads the whole tenant's rows.
	 */
	if (kind == RECALL_SESSION)
		scope = " AND e.session_id OPERATOR(pg_catalog.=) $5";
	else if (kind == RECALL_IDENTITY)
	{
		from = "convctx.session_link l JOIN convctx_recall.turn_embedding e"
			" ON e.session_id OPERATOR(pg_catalog.=) l.session_id";
		scope = " AND l.tenant_id OPERATOR(pg_catalog.=) $1"
			" AND l.identity_id OPERATOR(pg_catalog.=) $5";
	}
	model = kind == RECALL_TENANT_EXACT ? "e.model_no"
		: "(e.model_no OPERATOR(pg_catalog.+) 0)";

	return psprintf("SELECT c.distance, t.session_id::pg_catalog.text, t.turn_id, t.turn_no,"
					"       t.created_at, t.question_neutral, t.answer_neutral,"
					"       (t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
					"        AND ($4 OR t.finalized_at IS NOT NULL))"
					"  FROM (SELECT e.session_id, e.turn_id,"
					"               (e.embedding OPERATOR(%s.<=>) $2) AS distance"
					"          FROM %s"
					"         WHERE e.tenant_id OPERATOR(pg_catalog.=) $1"
					"           AND %s OPERATOR(pg_catalog.=) $6%s"
					"         ORDER BY 3, e.session_id, e.turn_id LIMIT $7) c"
					" CROSS JOIN LATERAL"
					"       (SELECT t.session_id, t.turn_id, t.turn_no, t.created_at,"
					"               t.question_neutral, t.answer_neutral, t.deleted_at,"
					"               t.replaced_by_turn_id, t.finalized_at"
					"          FROM convctx.turn t"
					"         WHERE t.tenant_id OPERATOR(pg_catalog.=) $1"
					"           AND t.session_id OPERATOR(pg_catalog.=) c.session_id"
					"           AND t.turn_id OPERATOR(pg_catalog.>=) c.turn_id"
					"         ORDER BY t.turn_id LIMIT 1) t"
					" WHERE t.turn_id OPERATOR(pg_catalog.=) c.turn_id"
					" ORDER BY c.distance, c.session_id, c.turn_id",
					vs, from, model, scope);
}

/* The kept plan of a recall of one kind (for a tenant's index, that index's). */
static SPIPlanPtr
RecallPlan(RecallKind kind, int32 model_no, int32 dims, int32 index_no)
{
	Oid			argtypes[7] = {TEXTOID, vector_type, INT4OID, BOOLOID, TEXTOID, INT4OID, INT8OID};
	TenantPlan *t,
			   *prev = NULL;
	int			n = 0;

	/* before any is run: an invalidation may come while one runs */
	if (tenant_plans_stale)
		RecallFreeTenantPlans();
	if (kind != RECALL_TENANT_INDEX)
		return SpiKeptPlan(&exact_plans[kind], RecallSql(kind, 0, 0), 7, argtypes);

	/* most recently used first; past RECALL_TENANT_PLANS, the last is freed */
	for (t = tenant_plans; t; prev = t, t = t->next, n++)
		if (t->index_no == index_no && t->model_no == model_no && t->dims == dims)
			break;
	if (t != NULL && prev != NULL)
	{
		prev->next = t->next;
		t->next = tenant_plans;
		tenant_plans = t;
	}
	else if (t == NULL)
	{
		if (n >= RECALL_TENANT_PLANS)
		{
			TenantPlan *last = tenant_plans;

			while (last->next->next)
				last = last->next;
			if (last->next->plan)
				SPI_freeplan(last->next->plan);
			pfree(last->next);
			last->next = NULL;
		}
		t = MemoryContextAllocZero(TopMemoryContext, sizeof(TenantPlan));
		t->model_no = model_no;
		t->dims = dims;
		t->index_no = index_no;
		t->next = tenant_plans;
		tenant_plans = t;
	}
	return SpiKeptPlan(&t->plan, RecallSql(kind, dims, index_no), 7, argtypes);
}

/*
 * Lock the tables a recall statement reads, then check the catalog again:
 * taking a lock is where a backend takes in others' catalog changes, so
 * with every lock held, the statement is planned (or planned again from
 * its text) against the schemas just checked, never against a rename
 * that came in between.
 */
static void
RecallLockAndCheck(void)
{
	Oid			nsp = ConvctxNamespace();

	LockRelationOid(embedding_relid, AccessShareLock);
	LockRelationOid(get_relname_relid("turn", nsp), AccessShareLock);
	LockRelationOid(get_relname_relid("session_link", nsp), AccessShareLock);
	if (!RecallCatalog(true))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension \"convctx_recall\" is not installed in this database"));
}

/*
 * Keep the first k live rows of SPI's result, in order, as SPI's result
 * (the column live is left, unread); returns whether there were k.
 */
static bool
RecallKeepLive(int32 k)
{
	uint64		i,
				kept = 0;
	bool		isnull;

	for (i = 0; i < SPI_processed && kept < (uint64) k; i++)
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 8, &isnull)))
			SPI_tuptable->vals[kept++] = SPI_tuptable->vals[i];
	SPI_processed = kept;
	return kept == (uint64) k;
}

/*
 * Run a recall statement of a kind, leaving its first k live rows in
 * SPI's result.
 *
 * Exact: the nearest candidates first, k and a quarter (at least 2
 * more), and then 8 times as many each time fewer than k of them are
 * live, until k are or the candidates run out. Only a few are not live (a turn without its answer
 * yet for answered_before; an old version or a tombstone keeps no
 * embedding), so one pass, as costly as a plain scan of the embeddings,
 * is the rule.
 *
 * Through the tenant's own index: with pgvector's iterative index scan,
 * so that the scan goes on until k rows passed the turn's filters, and
 * with sorts off, so that the planner takes the index. The index holds
 * the tenant's embeddings only, so its scan depends on nothing of another
 * tenant's; hnsw.ef_search and hnsw.max_scan_tuples are the caller's to
 * set. The settings are undone when the statement ends.
 */
static void
RecallRun(RecallKind kind, int32 model_no, int32 dims, int32 index_no, Datum *values,
		  const char *nulls, int32 k)
{
	int			nestlevel;
	int64		candidates = (int64) k + Max(k / 4, 2);

	RecallLockAndCheck();
	if (kind != RECALL_TENANT_INDEX)
	{
		SPIPlanPtr	plan = RecallPlan(kind, model_no, dims, index_no);

		for (;;)
		{
			values[6] = Int64GetDatum(candidates);
			SpiRunBulkPlan(plan, values, nulls, true, 0, SPI_OK_SELECT);
			if ((int64) SPI_processed < candidates)
				break;			/* every candidate was read */
			if (RecallKeepLive(k))
				return;
			SPI_freetuptable(SPI_tuptable);
			candidates *= 8;
		}
		RecallKeepLive(k);
		return;
	}
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("hnsw.iterative_scan", "strict_order", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_sort", "off", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SpiRunBulkPlan(RecallPlan(kind, model_no, dims, index_no), values, nulls, true, 0,
				   SPI_OK_SELECT);
	AtEOXact_GUC(true, nestlevel);
	RecallKeepLive(k);
}

/*
 * The k nearest live, current turns of the tenant to the query embedding
 * (argument embedding_arg) under a model, nearest first, left in SPI's
 * result (with an eighth column, live, always true): of a session, of an
 * identity's sessions (scope_key), or with scope RECALL_TENANT_INDEX of
 * the whole tenant, through its own index when it has one, else each
 * compared; with finalized_only, only answered turns. SPI connected.
 */
static void
Recall(FunctionCallInfo fcinfo, text *tenant, text *model, int embedding_arg, int32 k,
	   RecallKind scope, text *scope_key, bool finalized_only)
{
	int32		model_no,
				dims;
	int32		index_no;
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', scope_key ? ' ' : 'n', ' ', ' '};

	ModelLookup(model, tenant, &model_no, &dims, &index_no, false);
	values[0] = PointerGetDatum(tenant);
	values[1] = ArgEmbedding(fcinfo, embedding_arg, dims);
	values[2] = Int32GetDatum(k);
	values[3] = BoolGetDatum(!finalized_only);
	values[4] = PointerGetDatum(scope_key);
	values[5] = Int32GetDatum(model_no);
	values[6] = Int64GetDatum(0);
	if (scope == RECALL_TENANT_INDEX && index_no == 0)
		scope = RECALL_TENANT_EXACT;
	RecallRun(scope, model_no, dims, index_no, values, nulls, k);
}

/* Copy the rows Recall left, but the column live, into the function's result. */
static void
RecallRowsToResult(ReturnSetInfo *rsinfo)
{
	TupleDesc	desc = rsinfo->setDesc;
	uint64		i;
	int			c;

	if (desc->natts != 7 || SPI_tuptable->tupdesc->natts != 8)
		elog(ERROR, "recall is declared with %d result columns, expected 7", desc->natts);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		row[7];
		bool		row_nulls[7];

		for (c = 0; c < 7; c++)
			row[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1,
								   &row_nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, desc, row, row_nulls);
	}
}


PG_FUNCTION_INFO_V1(convctx_recall_recall);

/*
 * recall(embedding, model, k, session_id, identity_id) -> setof (distance,
 * session_id, turn_id, turn_no, created_at, question_neutral, answer_neutral)
 */
Datum
convctx_recall_recall(PG_FUNCTION_ARGS)
{
	text	   *model;
	int32		k;
	text	   *session_id,
			   *identity_id;

	RecallCheck("convctx_recall.recall()");
	model = ArgRequiredId(fcinfo, 1, "model");
	k = ArgLimitAtMost(fcinfo, 2, "k", RECALL_MAX_K, NULL);
	session_id = ArgOptionalId(fcinfo, 3, "session_id");
	identity_id = ArgOptionalId(fcinfo, 4, "identity_id");
	if (session_id && identity_id)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("recall takes a session_id or an identity_id, not both"),
				errhint("Leave both NULL to recall from every conversation of the tenant."));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	SPI_connect();
	Recall(fcinfo, CurrentTenant(), model, 0, k,
		   session_id ? RECALL_SESSION : identity_id ? RECALL_IDENTITY : RECALL_TENANT_INDEX,
		   session_id ? session_id : identity_id, false);
	RecallRowsToResult((ReturnSetInfo *) fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_recall_answered_before);

/*
 * answered_before(embedding, model, min_similarity, identity_id) -> setof
 * (similarity, session_id, turn_id, question_neutral, answer_neutral): the
 * nearest answered live turn when its cosine similarity (1 - distance) is
 * at least min_similarity, else no row.
 */
Datum
convctx_recall_answered_before(PG_FUNCTION_ARGS)
{
	text	   *model;
	float8		min_similarity;
	text	   *identity_id;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc;

	RecallCheck("convctx_recall.answered_before()");
	model = ArgRequiredId(fcinfo, 1, "model");
	ArgNotNull(fcinfo, 2, "min_similarity");
	min_similarity = PG_GETARG_FLOAT8(2);
	if (!(min_similarity >= -1.0 && min_similarity <= 1.0))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("min_similarity must be between -1 and 1"),
				errdetail("Got %g.", min_similarity));
	identity_id = ArgOptionalId(fcinfo, 3, "identity_id");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	desc = rsinfo->setDesc;
	if (desc->natts != 5)
		elog(ERROR, "answered_before is declared with %d result columns, expected 5", desc->natts);

	/* the nearest answered turn, as a recall of one, then the threshold */
	SPI_connect();
	Recall(fcinfo, CurrentTenant(), model, 0, 1,
		   identity_id ? RECALL_IDENTITY : RECALL_TENANT_INDEX, identity_id, true);
	if (SPI_processed > 0)
	{
		bool		n[7];
		Datum		v[7];
		int			c;

		for (c = 0; c < 7; c++)
			v[c] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c + 1, &n[c]);
		if (!n[0] && 1.0 - DatumGetFloat8(v[0]) >= min_similarity)
		{
			Datum		row[5] = {Float8GetDatum(1.0 - DatumGetFloat8(v[0])), v[1], v[2], v[5], v[6]};
			bool		row_nulls[5] = {false, n[1], n[2], n[5], n[6]};

			tuplestore_putvalues(rsinfo->setResult, desc, row, row_nulls);
		}
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(convctx_recall_store_embedding);

/*
 * store_embedding(session_id, turn_id, model, embedding) -> boolean
 *
 * Store (or replace) the turn's embedding under the model; false, storing
 * nothing, when the turn is a tombstone or an old version; P0002 when the
 * session has no such turn. The turn's row is locked FOR SHARE while the
 * embedding is written: a redaction or erasure of the turn waits for this
 * transaction and then deletes what it stored, or went first and this
 * stores nothing; a purge that deletes the turn deletes the embedding with
 * it (the foreign key).
 */
Datum
convctx_recall_store_embedding(PG_FUNCTION_ARGS)
{
	bool		writable pg_attribute_unused() = CheckWritable("convctx_recall.store_embedding()");
	text	   *session_id;
	pg_uuid_t  *turn_id;
	text	   *model;
	text	   *tenant;
	int32		model_no,
				dims;
	Oid			argtypes[5] = {TEXTOID, TEXTOID, UUIDOID, INT4OID, InvalidOid};
	Datum		values[5];
	bool		stored;

	RecallCheck("convctx_recall.store_embedding()");
	session_id = ArgRequiredId(fcinfo, 0, "session_id");
	turn_id = ArgTurnId(fcinfo, 1);
	model = ArgRequiredId(fcinfo, 2, "model");
	tenant = CurrentTenant();

	SPI_connect();
	ModelLookup(model, NULL, &model_no, &dims, NULL, false);
	argtypes[4] = vector_type;
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(session_id);
	values[2] = UUIDPGetDatum(turn_id);
	values[3] = Int32GetDatum(model_no);
	values[4] = ArgEmbedding(fcinfo, 3, dims);
	SpiRunPlan(SpiKeptPlan(&store_plan,
						   "WITH t AS (SELECT t.tenant_id, t.session_id, t.turn_id FROM convctx.turn t"
						   "            WHERE " SESSION_KEY_AT("t")
						   "              AND t.turn_id OPERATOR(pg_catalog.=) $3"
						   "              AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
						   "              FOR SHARE)"
						   "INSERT INTO convctx_recall.turn_embedding AS e"
						   "       (tenant_id, session_id, turn_id, model_no, index_no, embedding)"
						   "SELECT t.tenant_id, t.session_id, t.turn_id, $4, " TENANT_INDEX_NO ", $5 FROM t"
						   "    ON CONFLICT (tenant_id, session_id, turn_id, model_no)"
						   "    DO UPDATE SET embedding = EXCLUDED.embedding, index_no = EXCLUDED.index_no,"
						   "                  stored_at = pg_catalog.statement_timestamp()"
						   " RETURNING 1",
						   5, argtypes),
			   values, NULL, false, 0, SPI_OK_INSERT_RETURNING);
	stored = SPI_processed > 0;
	if (!stored)
	{
		SpiRunPlan(SpiKeptPlan(&turn_exists_plan,
							   "SELECT FROM convctx.turn t WHERE " SESSION_KEY_AT("t")
							   "   AND t.turn_id OPERATOR(pg_catalog.=) $3",
							   3, argtypes),
				   values, NULL, true, 1, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ReportTurnNotFound(turn_id, session_id);
	}
	SPI_finish();
	PG_RETURN_BOOL(stored);
}

PG_FUNCTION_INFO_V1(convctx_recall_unembedded_turns);

/*
 * unembedded_turns(model, max_turns, after_session_id, after_turn_id) ->
 * setof (session_id, turn_id, turn_no, question_neutral, answer_neutral,
 * finalized): the tenant's live, current turns without an embedding of the
 * model, in (session_id, turn_id) order after the given pair: the work
 * list of an embedder, which passes the last pair it got to get the next.
 */
Datum
convctx_recall_unembedded_turns(PG_FUNCTION_ARGS)
{
	text	   *model;
	int32		max_turns;
	text	   *after_session;
	pg_uuid_t  *after_turn;
	int32		model_no,
				dims;
	Oid			argtypes[5] = {TEXTOID, INT4OID, TEXTOID, UUIDOID, INT4OID};
	Datum		values[5];

	RecallCheck("convctx_recall.unembedded_turns()");
	model = ArgRequiredId(fcinfo, 0, "model");
	max_turns = ArgLimitAtMost(fcinfo, 1, "max_turns", RECALL_MAX_WORK,
							   "Take the work list in steps: pass the last pair of one call to the next.");
	after_session = ArgOptionalId(fcinfo, 2, "after_session_id");
	after_turn = PG_ARGISNULL(3) ? NULL : PG_GETARG_UUID_P(3);
	if ((after_session == NULL) != (after_turn == NULL))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("after_session_id and after_turn_id go together"),
				errhint("Pass both from the last row of the previous call, or neither for the first."));
	if (after_turn == NULL)
	{
		/* before every turn: no session id is empty */
		after_session = cstring_to_text("");
		after_turn = palloc0(sizeof(pg_uuid_t));
	}
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	SPI_connect();
	ModelLookup(model, NULL, &model_no, &dims, NULL, false);
	values[0] = PointerGetDatum(CurrentTenant());
	values[1] = Int32GetDatum(model_no);
	values[2] = PointerGetDatum(after_session);
	values[3] = UUIDPGetDatum(after_turn);
	values[4] = Int32GetDatum(max_turns);
	SpiRunPlan(SpiKeptPlan(&unembedded_plan,
						   "SELECT t.session_id::pg_catalog.text, t.turn_id, t.turn_no,"
						   "       t.question_neutral, t.answer_neutral, t.finalized_at IS NOT NULL"
						   "  FROM convctx.turn t"
						   " WHERE t.tenant_id OPERATOR(pg_catalog.=) $1"
						   "   AND (t.tenant_id, t.session_id, t.turn_id) OPERATOR(pg_catalog.>) ($1, $3, $4)"
						   "   AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
						   "   AND NOT EXISTS (SELECT FROM convctx_recall.turn_embedding e"
						   "                    WHERE e.tenant_id OPERATOR(pg_catalog.=) t.tenant_id"
						   "                      AND e.session_id OPERATOR(pg_catalog.=) t.session_id"
						   "                      AND e.turn_id OPERATOR(pg_catalog.=) t.turn_id"
						   "                      AND e.model_no OPERATOR(pg_catalog.=) $2)"
						   " ORDER BY t.tenant_id, t.session_id, t.turn_id LIMIT $5",
						   5, argtypes),
			   values, NULL, true, 0, SPI_OK_SELECT);
	SpiRowsToResult((ReturnSetInfo *) fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}

/*
 * Delete the embeddings of a redacted turn (turn_no >= 1, every version)
 * or of a whole session (turn_no 0), when convctx_recall is installed.
 * Run on the newest committed rows: an embedding stored by a transaction
 * that held the turn's row until this one's redaction got it is deleted
 * also at repeatable read. SPI must be connected.
 *
 * The versions' turn_ids are read first (turn_chronology), then each is
 * one probe of turn_embedding_pkey: no join whose order the planner
 * could get wrong (on tables never analyzed, one walked every embedding
 * of the session for each of them, and redact_turn took seconds).
 */
void
RecallForget(text *tenant, text *session_id, int64 turn_no)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, INT8OID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	Int64GetDatum(turn_no)};
	Oid			delete_types[3] = {TEXTOID, TEXTOID, UUIDOID};
	pg_uuid_t  *ids;
	uint64		n;
	uint64		i;

	/* what committed since this transaction last took a lock, e.g. the install */
	AcceptInvalidationMessages();
	if (!RecallCatalog(false))
		return;
	if (turn_no == 0)
	{
		SpiRunPlanLatest(SpiKeptPlan(&forget_session_plan,
									 "DELETE FROM convctx_recall.turn_embedding e"
									 " WHERE " SESSION_KEY_AT("e"),
									 2, argtypes),
						 values, NULL, SPI_OK_DELETE);
		return;
	}
	SpiRunPlanLatest(SpiKeptPlan(&forget_versions_plan,
								 "SELECT t.turn_id FROM convctx.turn t"
								 " WHERE " SESSION_KEY_AT("t")
								 "   AND t.turn_no OPERATOR(pg_catalog.=) $3",
								 3, argtypes),
					 values, NULL, SPI_OK_SELECT);
	n = SPI_processed;
	ids = palloc(sizeof(pg_uuid_t) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = *DatumGetUUIDP(SPI_getbinval(SPI_tuptable->vals[i],
											  SPI_tuptable->tupdesc, 1, &isnull));
	}
	for (i = 0; i < n; i++)
	{
		values[2] = UUIDPGetDatum(&ids[i]);
		SpiRunPlanLatest(SpiKeptPlan(&forget_turn_plan,
									 "DELETE FROM convctx_recall.turn_embedding e"
									 " WHERE " SESSION_KEY_AT("e")
									 "   AND e.turn_id OPERATOR(pg_catalog.=) $3",
									 3, delete_types),
						 values, NULL, SPI_OK_DELETE);
	}
	pfree(ids);
}

/*
 * The same for the sessions (a text[]) of an erasure. SPI must be
 * connected. A join with the array, planned for the array it is given:
 * one probe of turn_embedding_pkey per session, or one hash of the array;
 * never "= ANY (array)" as a filter, which compares every row read with
 * every session erased.
 */
void
RecallForgetSessions(text *tenant, Datum sessions)
{
	Oid			argtypes[2] = {TEXTOID, TEXTARRAYOID};
	Datum		values[2] = {PointerGetDatum(tenant), sessions};

	AcceptInvalidationMessages();
	if (!RecallCatalog(false))
		return;
	SpiRunPlanLatest(SpiKeptCustomPlan(&forget_sessions_plan,
									   "DELETE FROM convctx_recall.turn_embedding e"
									   " USING pg_catalog.unnest($2::pg_catalog.text[]) AS k(session_id)"
									   " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1"
									   "   AND e.session_id OPERATOR(pg_catalog.=) k.session_id",
									   2, argtypes),
					 values, NULL, SPI_OK_DELETE);
}

/*
 * Delete the embeddings of a turn's old version, which replace_turn just
 * replaced (replaced_by_turn_id set by this transaction), when
 * convctx_recall is installed: a recall never returns an old version, so
 * its embeddings would only take room. Run on the newest committed rows,
 * as RecallForget is: an embedding stored by a transaction that held the
 * turn's row until the replacement got it is deleted also at repeatable
 * read; one that comes after finds the turn replaced and stores nothing.
 * SPI must be connected.
 */
void
RecallForgetVersion(text *tenant, text *session_id, pg_uuid_t *turn_id)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, UUIDOID};
	Datum		values[3] = {PointerGetDatum(tenant), PointerGetDatum(session_id),
	UUIDPGetDatum(turn_id)};

	AcceptInvalidationMessages();
	if (!RecallCatalog(false))
		return;
	SpiRunBulkPlanLatest(SpiKeptPlan(&forget_version_plan,
									 "DELETE FROM convctx_recall.turn_embedding e"
									 " WHERE " SESSION_KEY_AT("e")
									 "   AND e.turn_id OPERATOR(pg_catalog.=) $3",
									 3, argtypes),
						 values, NULL, SPI_OK_DELETE);
}

/*
 * Whether convctx_recall is installed here, as it must be (ERROR when it
 * is not as RecallCatalog wants it): export_records then carries the
 * embeddings of the conversations it exports.
 */
bool
RecallInstalled(void)
{
	AcceptInvalidationMessages();
	return RecallCatalog(false);
}

/*
 * The embeddings of the session's turns, after its summary, by turn, as
 * export_records carries them (the companion's export_sql): "embedding"
 * is pgvector's text of the vector, a JSON array; models break ties by
 * the line.
 */
#define EXPORT_EMBEDDINGS \
	"  UNION ALL" \
	"  SELECT 'embedding', pg_catalog.jsonb_build_object('type', 'embedding', 'session_id', e.session_id," \
	"           'turn_id', e.turn_id, 'model', d.model," \
	"           'embedding', e.embedding::pg_catalog.text::pg_catalog.jsonb, 'stored_at', e.stored_at)," \
	"         5, t.turn_no, t.record_version, NULL" \
	"    FROM convctx_recall.turn_embedding e" \
	"    JOIN convctx_recall.model d ON d.model_no OPERATOR(pg_catalog.=) e.model_no" \
	"    JOIN convctx.turn t ON t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id" \
	"     AND t.session_id OPERATOR(pg_catalog.=) e.session_id AND t.turn_id OPERATOR(pg_catalog.=) e.turn_id" \
	"   WHERE g.part OPERATOR(pg_catalog.=) 0 AND e.tenant_id OPERATOR(pg_catalog.=) $1" \
	"     AND e.session_id OPERATOR(pg_catalog.=) g.k"

/* EXPORT_EMBEDDINGS when convctx_recall is installed here, else NULL. */
const char *
RecallExportSql(void)
{
	return RecallInstalled() ? EXPORT_EMBEDDINGS : NULL;
}

/*
 * Whether two embeddings, pgvector's vectors, are equal element by element
 * (a negative zero equals zero, as in pgvector's = operator).
 */
static bool
VectorsEqual(Datum a, Datum b)
{
	struct varlena *va = PG_DETOAST_DATUM(a);
	struct varlena *vb = PG_DETOAST_DATUM(b);
	int16		dims;
	int			i;

	/* the same size: the same dimensions */
	if (VARSIZE(va) != VARSIZE(vb))
		return false;
	/* pgvector's Vector: varlena header, int16 dim, int16 unused, float4 x[] */
	memcpy(&dims, VARDATA(va), sizeof(int16));
	if (VARSIZE(va) != VARHDRSZ + 2 * sizeof(int16) + dims * sizeof(float4))
		elog(ERROR, "embedding is not a vector");
	for (i = 0; i < dims; i++)
	{
		float4		x,
					y;

		memcpy(&x, VARDATA(va) + 2 * sizeof(int16) + i * sizeof(float4), sizeof(float4));
		memcpy(&y, VARDATA(vb) + 2 * sizeof(int16) + i * sizeof(float4), sizeof(float4));
		if (x != y)
			return false;
	}
	return true;
}

/*
 * Store an embedding an import brought, for the turn (turn_id, turn_no)
 * of the session, under model: embedding is pgvector's text of it,
 * stored_at when it was stored where it comes from. Stored as
 * store_embedding stores, when the turn is here, not a tombstone, its
 * current version, and has no embedding of the model yet; else says why
 * not: an old version takes none, as replace_turn deletes its embeddings
 * (a file exported before 0.6.0 may have some), and is changed here.
 * 22000 when the model here has other dimensions, 22023 when the
 * embedding has no cosine distance. SPI connected; the results are freed.
 */
CompanionImported
RecallImportEmbedding(text *tenant, text *session_id, pg_uuid_t *turn_id, int64 turn_no,
					  text *model, char *embedding, TimestampTz stored_at)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, UUIDOID, INT4OID, InvalidOid, TIMESTAMPTZOID, INT8OID};
	Datum		values[7];
	int32		model_no,
				dims;
	Oid			typinput,
				typioparam;
	bool		found;
	bool		isnull;
	Datum		there;
	CompanionImported done;

	AcceptInvalidationMessages();
	if (!RecallCatalog(true))
		return COMPANION_NOT_INSTALLED;
	found = ModelLookup(model, NULL, &model_no, &dims, NULL, true);
	SPI_freetuptable(SPI_tuptable);
	if (!found)
		return COMPANION_NO_MODEL;
	getTypeInputInfo(vector_type, &typinput, &typioparam);
	argtypes[4] = vector_type;
	values[0] = PointerGetDatum(tenant);
	values[1] = PointerGetDatum(session_id);
	values[2] = UUIDPGetDatum(turn_id);
	values[3] = Int32GetDatum(model_no);
	values[4] = CheckDimensions(OidInputFunctionCall(typinput, embedding, typioparam, -1), dims);
	values[5] = TimestampTzGetDatum(stored_at);
	values[6] = Int64GetDatum(turn_no);
	/* by turn number too: a session of many turns has few versions of one */
	SpiRunPlan(SpiKeptPlan(&import_plan,
						   "WITH t AS (SELECT t.tenant_id, t.session_id, t.turn_id FROM convctx.turn t"
						   "            WHERE " SESSION_KEY_AT("t")
						   "              AND t.turn_no OPERATOR(pg_catalog.=) $7"
						   "              AND t.turn_id OPERATOR(pg_catalog.=) $3"
						   "              AND t.deleted_at IS NULL AND t.replaced_by_turn_id IS NULL"
						   "              FOR SHARE)"
						   "INSERT INTO convctx_recall.turn_embedding"
						   "       (tenant_id, session_id, turn_id, model_no, index_no, embedding, stored_at)"
						   "SELECT t.tenant_id, t.session_id, t.turn_id, $4, " TENANT_INDEX_NO ", $5, $6 FROM t"
						   "    ON CONFLICT (tenant_id, session_id, turn_id, model_no) DO NOTHING"
						   " RETURNING 1",
						   7, argtypes),
			   values, NULL, false, 0, SPI_OK_INSERT_RETURNING);
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	if (found)
		return COMPANION_IMPORTED;

	/* why not: the turn here, and the embedding it has (as written, not read-only) */
	SpiRunPlan(SpiKeptPlan(&import_state_plan,
						   "SELECT t.deleted_at IS NOT NULL, t.replaced_by_turn_id IS NOT NULL,"
						   "       (SELECT e.embedding FROM convctx_recall.turn_embedding e"
						   "         WHERE " SESSION_KEY_AT("e")
						   "           AND e.turn_id OPERATOR(pg_catalog.=) t.turn_id"
						   "           AND e.model_no OPERATOR(pg_catalog.=) $4)"
						   "  FROM convctx.turn t WHERE " SESSION_KEY_AT("t")
						   "   AND t.turn_no OPERATOR(pg_catalog.=) $7"
						   "   AND t.turn_id OPERATOR(pg_catalog.=) $3",
						   7, argtypes),
			   values, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		done = COMPANION_REMOVED;
	else if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		done = COMPANION_REDACTED;
	else if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
		done = COMPANION_CHANGED;
	else
	{
		there = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		done = !isnull && VectorsEqual(there, values[4]) ? COMPANION_THERE : COMPANION_CHANGED;
	}
	SPI_freetuptable(SPI_tuptable);
	return done;
}
