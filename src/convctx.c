/*-------------------------------------------------------------------------
 *
 * convctx.c
 *	  Module entry point: defines the settings, sets up the modules
 *	  that keep state per backend and registers the Citus variant and the
 *	  companion (core/companion.h). Nothing else calls into this file.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/convctx.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "citus/citus.h"
#include "recall/recall.h"
#include "core/settings.h"
#include "core/catalog.h"
#include "core/planner.h"
#include "core/tenancy.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	SettingsDefine();
	TenancyInit();
	PlannerInit();
	CatalogInit();
	RecallInit();
	CitusInit();
}
