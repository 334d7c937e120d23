/*-------------------------------------------------------------------------
 *
 * turn_reader.h
 *	  Reading a session's newest turns through a kept plan (turn_reader.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/turn_reader.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_TURN_READER_H
#define CONVCTX_TURN_READER_H

#include "postgres.h"
#include "executor/spi.h"

extern SPITupleTable *SpiReadNewestTurns(SPIPlanPtr plan, Datum *values, int64 want,
										 int64 last, int64 span, uint64 *nrows);

#endif							/* CONVCTX_TURN_READER_H */
