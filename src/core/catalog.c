/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  The catalog check: extension convctx installed in the version of this
 *	  library, schema convctx its own; the extension lookups.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "core/catalog.h"

static bool catalog_checked = false;
static Oid	convctx_namespace = InvalidOid;

/* The extension's owner, as whom every statement on the tables runs (CatalogCheck). */
static Oid	convctx_owner = InvalidOid;

/*
 * Whether the catalog this library runs on was checked (CatalogCheck):
 * forgotten when any schema changes, checked again before the next
 * statement.
 */
static void
NamespaceInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	catalog_checked = false;
	convctx_namespace = InvalidOid;
}

/*
 * Whether extension name is installed in this database; if so, its schema,
 * owner and version (palloc'd).
 */
bool
ExtensionLookup(const char *name, Oid *nsp, Oid *owner, char **version)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(name));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	found = HeapTupleIsValid(tup);
	if (found)
	{
		bool		isnull;
		Datum		v = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		*owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		*version = isnull ? pstrdup("") : TextDatumGetCString(v);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}
/*
 * Check that the objects the statements name are the extension's own, in
 * the version this library was built for:
 *	- extension convctx is installed in this database;
 *	- its version is the library's (a library of another version would
 *	  read and write tables of another shape); during CREATE or ALTER
 *	  EXTENSION the scripts in between may run;
 *	- the schema named convctx, which every statement names, is the
 *	  extension's schema, not one created under that name after the
 *	  extension's schema was renamed.
 * ERROR 55000 otherwise. The result is kept until a schema changes.
 */
void
CatalogCheck(void)
{
	Oid			ext_namespace = InvalidOid;
	char	   *ext_version = NULL;

	if (!ExtensionLookup("convctx", &ext_namespace, &convctx_owner, &ext_version))
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("extension \"convctx\" is not installed in this database"),
				errhint("Run CREATE EXTENSION convctx."));
	if (!creating_extension && strcmp(ext_version, CONVCTX_VERSION) != 0)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("convctx library version %s does not match the installed extension version %s",
					   CONVCTX_VERSION, ext_version),
				errhint("Run ALTER EXTENSION convctx UPDATE."));
	if (get_namespace_oid("convctx", true) != ext_namespace)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("schema \"convctx\" is not the schema of extension \"convctx\""),
				errdetail("The extension's schema is \"%s\".",
						  get_namespace_name(ext_namespace)),
				errhint("Rename the schemas back; convctx's statements name schema convctx."));
	convctx_namespace = ext_namespace;
	catalog_checked = true;
}
/* Whether the catalog was checked since the last change of a schema. */
bool
CatalogChecked(void)
{
	return catalog_checked;
}

/* The extension's owner (CatalogCheck). */
Oid
ConvctxOwner(void)
{
	if (!catalog_checked)
		CatalogCheck();
	return convctx_owner;
}

/*
 * The OID of schema convctx, checked to be the extension's (CatalogCheck),
 * for the code that opens relations by name.
 */
Oid
ConvctxNamespace(void)
{
	if (!catalog_checked)
		CatalogCheck();
	return convctx_namespace;
}

/* From _PG_init. */
void
CatalogInit(void)
{
	CacheRegisterSyscacheCallback(NAMESPACEOID, NamespaceInvalidate, (Datum) 0);
}
