/*-------------------------------------------------------------------------
 *
 * writable.h
 *	  Refusing a function that writes on a standby or in a read-only
 *	  transaction (writable.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/writable.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_WRITABLE_H
#define CONVCTX_WRITABLE_H

#include "postgres.h"

/*
 * First line of every SQL-callable function that writes, as its first
 * declaration (CONVCTX_WRITER(start_turn);): on a standby and in a
 * read-only transaction it fails with 25006 naming the function
 * ("convctx.start_turn()"), before any other initializer reads an argument
 * or any statement runs.
 */
extern bool CheckWritable(const char *function);
#define CONVCTX_WRITER(name) \
	bool		convctx_writable pg_attribute_unused() = CheckWritable("convctx." #name "()")

#endif							/* CONVCTX_WRITABLE_H */
