/*-------------------------------------------------------------------------
 *
 * browser.h
 *	  The conversation browser (browser.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/browser/browser.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_BROWSER_H
#define CONVCTX_BROWSER_H

#include "postgres.h"

/* Session titles (browser.c) */
extern void CheckSessionTitle(text *title);

#endif							/* CONVCTX_BROWSER_H */
