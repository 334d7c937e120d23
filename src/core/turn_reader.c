/*-------------------------------------------------------------------------
 *
 * turn_reader.c
 *	  Reading a session's newest turns through a kept plan, span by span.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/turn_reader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/spi_plans.h"
#include "core/turn_reader.h"

/*
 * Run a kept plan that returns a session's newest turns, newest first: its
 * $3 is how many (want) and its $4 a lower bound on their turn_no. A btree
 * scan reads every matching entry of a leaf page and a generic plan may
 * sort a range, so no range is left unbounded while a narrower one may
 * do: the newest span turn numbers below last (the session's newest turn)
 * are read first, then spans four times wider, until want rows are found
 * or turn 1 is reached. Returns the rows of the last run (NULL and 0 rows
 * when want is 0). SPI must be connected.
 */
SPITupleTable *
SpiReadNewestTurns(SPIPlanPtr plan, Datum *values, int64 want, int64 last,
				   int64 span, uint64 *nrows)
{
	SPITupleTable *rows = NULL;
	int64		lower;

	*nrows = 0;
	values[2] = Int64GetDatum(want);
	while (want > 0)
	{
		lower = (last - span > 0) ? last - span : 0;
		values[3] = Int64GetDatum(lower);
		SpiRunPlan(plan, values, NULL, true, 0, SPI_OK_SELECT);
		if (rows != NULL)
			SPI_freetuptable(rows);
		rows = SPI_tuptable;
		*nrows = SPI_processed;
		if (*nrows >= (uint64) want || lower == 0)
			break;
		span = (span > PG_INT64_MAX / 4) ? PG_INT64_MAX : span * 4;
	}
	return rows;
}
