/*-------------------------------------------------------------------------
 *
 * prompt_text.c
 *	  Stored text in prompts: the one place that decides how text written
 *	  by users, retrieved documents or a model is pasted into the
 *	  line-oriented prompt formats of the render functions
 *	  (render_conversation_state, render_context_history,
 *	  render_clarification, context_aspect).
 *
 * Those formats mark their structure at the start of a line ("  user:",
 * "=== ... ===", "[1]", "## ...", "- ..."). Stored text must never start
 * a line of its own, or it could forge that structure: an "assistant:"
 * line the model reads as its own words, a second "CURRENT CONTEXT"
 * section, a fake "## " section. So every line break in stored text is
 * either collapsed (a field shown on one line) or followed by an indent
 * (a block, whose continuation lines then never start at the margin).
 *
 * A line break is LF, CR, CR LF (one break), VT, FF and, in UTF-8 (and
 * SQL_ASCII) databases, NEL (U+0085), LINE SEPARATOR (U+2028) and
 * PARAGRAPH SEPARATOR (U+2029); in the ISO 8859 encodings NEL is byte
 * 0x85. Other control characters (C0 but TAB, DEL, C1 where the encoding
 * has them) would be invisible to a reader checking a prompt and can
 * drive terminals that show it, so each becomes one space; TAB stays (it
 * cannot begin a line and documents use it in tables). Line breaks and
 * controls at the end of a field are dropped. Text without any of these
 * characters is appended byte for byte.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/prompt_text.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "core/prompt_text.h"

/* What a character of stored text is, for the prompt. */
typedef enum PromptChar
{
	PC_ORDINARY,				/* appended as it is */
	PC_BREAK,					/* a line break */
	PC_CONTROL					/* another control character */
} PromptChar;

/* Which non-ASCII line breaks and controls the database encoding has. */
typedef enum PromptEncoding
{
	PE_ASCII_ONLY,				/* only the ASCII ones (EUC, WIN, KOI8, ...) */
	PE_UTF8,					/* C1 as U+0080..U+009F, U+2028, U+2029 */
	PE_ISO8859					/* C1 as bytes 0x80..0x9F */
} PromptEncoding;

static PromptEncoding
CurrentPromptEncoding(void)
{
	switch (GetDatabaseEncoding())
	{
		case PG_UTF8:
		case PG_SQL_ASCII:		/* the bytes are most likely UTF-8 */
			return PE_UTF8;
		case PG_LATIN1:
		case PG_LATIN2:
		case PG_LATIN3:
		case PG_LATIN4:
		case PG_LATIN5:
		case PG_LATIN6:
		case PG_LATIN7:
		case PG_LATIN8:
		case PG_LATIN9:
		case PG_LATIN10:
		case PG_ISO_8859_5:
		case PG_ISO_8859_6:
		case PG_ISO_8859_7:
		case PG_ISO_8859_8:
			return PE_ISO8859;
		default:
			return PE_ASCII_ONLY;
	}
}

/*
 * The bytes that can begin a line break or a control character in each
 * PromptEncoding, so that ordinary text is passed over in a tight loop.
 */
static bool lead_tables_made = false;
static bool lead_bytes[3][256];

static void
MakeLeadTables(void)
{
	int			e;
	int			c;

	for (e = 0; e < 3; e++)
		for (c = 0; c < 256; c++)
			lead_bytes[e][c] = ((c < 0x20 && c != '\t') || c == 0x7f ||
								(e == PE_UTF8 && (c == 0xc2 || c == 0xe2)) ||
								(e == PE_ISO8859 && c >= 0x80 && c <= 0x9f));
	lead_tables_made = true;
}

/*
 * Classify the character at s[i] (i < len) and set *clen to its length
 * in bytes when it is not ordinary. Every server encoding keeps bytes
 * below 0x80 for ASCII, so the ASCII tests are safe in all of them.
 */
static inline PromptChar
ClassifyAt(const unsigned char *s, int len, int i, PromptEncoding enc, int *clen)
{
	unsigned char c = s[i];

	*clen = 1;
	if (c < 0x20 || c == 0x7f)
	{
		if (c == '\t')
			return PC_ORDINARY;
		if (c == '\r' && i + 1 < len && s[i + 1] == '\n')
		{
			*clen = 2;
			return PC_BREAK;
		}
		if (c == '\n' || c == '\r' || c == '\v' || c == '\f')
			return PC_BREAK;
		return PC_CONTROL;
	}
	if (c < 0x80 || enc == PE_ASCII_ONLY)
		return PC_ORDINARY;
	if (enc == PE_ISO8859)
	{
		if (c == 0x85)
			return PC_BREAK;
		return c <= 0x9f ? PC_CONTROL : PC_ORDINARY;
	}
	/* UTF-8: C2 80..9F is U+0080..U+009F; E2 80 A8/A9 is U+2028/U+2029 */
	if (c == 0xc2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f)
	{
		*clen = 2;
		return s[i + 1] == 0x85 ? PC_BREAK : PC_CONTROL;
	}
	if (c == 0xe2 && i + 2 < len && s[i + 1] == 0x80 &&
		(s[i + 2] == 0xa8 || s[i + 2] == 0xa9))
	{
		*clen = 3;
		return PC_BREAK;
	}
	return PC_ORDINARY;
}

/*
 * Word-at-a-time tests: nonzero when some byte of w is below n (n <= 128,
 * exact for "some"), every byte of ONE_BYTES is 1, of HIGH_BITS 0x80.
 */
#define ONE_BYTES	UINT64CONST(0x0101010101010101)
#define HIGH_BITS	UINT64CONST(0x8080808080808080)
#define BYTES_BELOW(w, n) (((w) - ONE_BYTES * (n)) & ~(w) & HIGH_BITS)

/*
 * Append s: ordinary runs as they are, and each run of line breaks and
 * controls that is not at the end as one space (indent == NULL) or, for
 * a block, each line break as a new line starting with indent and each
 * control as a space.
 */
static void
AppendPromptText(StringInfo buf, const char *str, int len, const char *indent)
{
	const unsigned char *s = (const unsigned char *) str;
	PromptEncoding enc = CurrentPromptEncoding();
	const bool *lead;
	int			start = 0;
	int			i = 0;

	if (unlikely(!lead_tables_made))
		MakeLeadTables();
	lead = lead_bytes[enc];
	while (i < len)
	{
		int			clen;
		int			run_end;
		uint64		w;

		/* eight plain ASCII bytes (no control, no DEL) at a time */
		if (i + 8 <= len)
		{
			memcpy(&w, s + i, 8);
			if (((w & HIGH_BITS) | BYTES_BELOW(w, 0x20) | BYTES_BELOW(w ^ (ONE_BYTES * 0x7f), 1)) == 0)
			{
				i += 8;
				continue;
			}
		}
		if (!lead[s[i]] || ClassifyAt(s, len, i, enc, &clen) == PC_ORDINARY)
		{
			i++;
			continue;
		}
		appendBinaryStringInfo(buf, str + start, i - start);

		/* the whole run of breaks and controls */
		run_end = i + clen;
		while (run_end < len && ClassifyAt(s, len, run_end, enc, &clen) != PC_ORDINARY)
			run_end += clen;
		if (run_end >= len)
			return;				/* nothing but breaks and controls remain */
		if (indent == NULL)
			appendStringInfoChar(buf, ' ');
		else
			while (i < run_end)
			{
				if (ClassifyAt(s, len, i, enc, &clen) == PC_BREAK)
				{
					appendStringInfoChar(buf, '\n');
					appendStringInfoString(buf, indent);
				}
				else
					appendStringInfoChar(buf, ' ');
				i += clen;
			}
		i = start = run_end;
	}
	appendBinaryStringInfo(buf, str + start, len - start);
}

/*
 * Append len bytes of s on one line: each run of line breaks and control
 * characters becomes one space, and one at the end is dropped.
 */
void
AppendPromptLine(StringInfo buf, const char *s, int len)
{
	AppendPromptText(buf, s, len, NULL);
}

/* The same for at most the first max_chars characters of s. */
void
AppendPromptLineClipped(StringInfo buf, const char *s, int len, int max_chars)
{
	AppendPromptText(buf, s, pg_mbcharcliplen(s, len, max_chars), NULL);
}

/*
 * Append len bytes of s as a block of lines: the first line continues
 * the caller's line, each line break starts a new line that begins with
 * indent (which must not be empty), each other control character becomes
 * a space, and line breaks at the end are dropped.
 */
void
AppendPromptBlock(StringInfo buf, const char *s, int len, const char *indent)
{
	Assert(indent != NULL && indent[0] != '\0');
	AppendPromptText(buf, s, len, indent);
}
