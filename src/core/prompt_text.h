/*-------------------------------------------------------------------------
 *
 * prompt_text.h
 *	  Appending stored text to a prompt so that it cannot pose as prompt
 *	  structure (see prompt_text.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/prompt_text.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_PROMPT_TEXT_H
#define CONVCTX_PROMPT_TEXT_H

#include "lib/stringinfo.h"

/* The indentation of the continuation lines of a block. */
#define PROMPT_BLOCK_INDENT "  "

extern void AppendPromptLine(StringInfo buf, const char *s, int len);
extern void AppendPromptLineClipped(StringInfo buf, const char *s, int len, int max_chars);
extern void AppendPromptBlock(StringInfo buf, const char *s, int len, const char *indent);

#endif							/* CONVCTX_PROMPT_TEXT_H */
