/*-------------------------------------------------------------------------
 *
 * convctx.c
 *	  Module entry point: defines the settings and sets up the modules
 *	  that keep state per backend. Nothing else calls into this file.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/convctx.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "convctx.h"
#include "citus.h"
#include "recall.h"
#include "settings.h"
#include "spi_util.h"
#include "tenancy.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	SettingsDefine();
	TenancyInit();
	SpiInit();
	RecallInit();
	CitusInit();
}
