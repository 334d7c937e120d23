/*-------------------------------------------------------------------------
 *
 * sources.h
 *	  convctx import --from=SOURCE: the readers of other stores' histories.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * client/sources.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SOURCES_H
#define CONVCTX_SOURCES_H

#include "import.h"

/* Read the source --from names into imp's groups. */
extern void import_source(Importer *imp, FILE *in);

#endif
