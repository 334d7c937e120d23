/*-------------------------------------------------------------------------
 *
 * erasure.h
 *	  Erasure (erasure.c): what an erased identity becomes, for the
 *	  browser and the import, which recognise and look for it.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/erasure.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_ERASURE_H
#define CONVCTX_ERASURE_H

#include "postgres.h"

extern text *ErasedIdentity(text *tenant, text *identity_id);
extern text *LegacyErasedIdentity(text *identity_id);
extern bool IsErasedIdentity(text *identity);

#endif							/* CONVCTX_ERASURE_H */
