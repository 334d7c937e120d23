/*-------------------------------------------------------------------------
 *
 * spi_util.h
 *	  SPI plans kept per backend, and acting as the extension's owner (spi_util.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/spi_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SPI_UTIL_H
#define CONVCTX_SPI_UTIL_H

#include "postgres.h"
#include "executor/spi.h"
#include "funcapi.h"

/* SPI plans kept for the life of the backend (spi_util.c) */
extern void SpiInit(void);
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
extern SPITupleTable *SpiReadNewestTurns(SPIPlanPtr plan, Datum *values, int64 want,
										 int64 last, int64 span, uint64 *nrows);
extern Oid	ConvctxNamespace(void);
extern bool ExtensionLookup(const char *name, Oid *nsp, Oid *owner, char **version);

/*
 * First line of every SQL-callable function that writes, as its first
 * declaration (CONVCTX_WRITER(start_turn);): on a standby and in a
 * read-only transaction it fails with 25006 naming the function
 * ("convctx.start_turn()"), before any other initializer reads an argument
 * or any statement runs (spi_util.c).
 */
extern bool CheckWritable(const char *function);
#define CONVCTX_WRITER(name) \
	bool		convctx_writable pg_attribute_unused() = CheckWritable("convctx." #name "()")

/* Acting as the extension's owner for the tables (spi_util.c) */
typedef struct OwnerSwitch
{
	Oid			user;
	int			sec_context;
	int			depth;
	int			nestlevel;		/* of the settings changed as the owner */
} OwnerSwitch;
extern void ActAsOwner(OwnerSwitch *sw);
extern void ActAsCaller(OwnerSwitch *sw);
extern Oid	ConvctxInvoker(void);
extern Oid	ConvctxOwner(void);

#endif							/* CONVCTX_SPI_UTIL_H */
