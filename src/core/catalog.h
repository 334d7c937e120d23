/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The catalog check and the extension lookups (catalog.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_CATALOG_H
#define CONVCTX_CATALOG_H

#include "postgres.h"

extern void CatalogInit(void);
extern void CatalogCheck(void);
extern bool CatalogChecked(void);
extern Oid	ConvctxNamespace(void);
extern Oid	ConvctxOwner(void);
extern bool ExtensionLookup(const char *name, Oid *nsp, Oid *owner, char **version);

#endif							/* CONVCTX_CATALOG_H */
