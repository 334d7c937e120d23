/*-------------------------------------------------------------------------
 *
 * spi_plans.h
 *	  SPI plans kept per backend, running them and reading their results
 *	  (spi_plans.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/spi_plans.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SPI_PLANS_H
#define CONVCTX_SPI_PLANS_H

#include "postgres.h"
#include "executor/spi.h"
#include "funcapi.h"

extern SPIPlanPtr SpiKeptPlan(SPIPlanPtr *cache, const char *sql,
							  int nargs, Oid *argtypes);
extern SPIPlanPtr SpiKeptCustomPlan(SPIPlanPtr *cache, const char *sql,
									int nargs, Oid *argtypes);
extern int	SpiRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
					   bool read_only, long count, int expected_rc);
extern int	SpiRunBulkPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
						   bool read_only, long count, int expected_rc);
extern int	SpiRunBulkPlanLatest(SPIPlanPtr plan, Datum *values, const char *nulls,
								 int expected_rc);
extern int	SpiRunPlanLatest(SPIPlanPtr plan, Datum *values, const char *nulls,
							 int expected_rc);
extern bool SpiBulkReadLatest(bool on);
extern int	SpiRunSessionPlan(SPIPlanPtr *cache, const char *sql, text *tenant,
							  text *session_id, bool read_only, long count, int expected_rc);
extern int64 SpiFirstInt8(void);
extern void SpiRowsToResult(ReturnSetInfo *rsinfo);
extern Datum SpiFirstDatumCopy(int col, bool *isnull);

#endif							/* CONVCTX_SPI_PLANS_H */
