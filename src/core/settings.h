/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The convctx.* settings (settings.c).
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/settings.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONVCTX_SETTINGS_H
#define CONVCTX_SETTINGS_H

#include "postgres.h"

/* Settings (settings.c) */
extern void SettingsDefine(void);
extern char *convctx_tenant;
extern int	convctx_tenant_scope;
extern int	convctx_max_active_nodes;
extern int	convctx_max_session_turns;
extern int	convctx_max_text_bytes;
extern char *convctx_metadata_allowlist;
extern char *convctx_ip_hash_key;
extern char *convctx_ip_hash_salt;
extern char *convctx_identity_hash_key;
extern int	convctx_session_ttl;
extern int	convctx_turn_retention;
extern int	convctx_context_ttl;
extern int	convctx_audit_retention;
extern int	convctx_purge_pause;

/* purge_all's pause after a pass, in ms (docs/retention.md, test/bench/lifecycle.sh) */
#define CONVCTX_PURGE_PAUSE_DEFAULT 500
extern int	convctx_summary_threshold;

/* Values of convctx.tenant_scope: how long a convctx.tenant value counts. */
typedef enum TenantScope
{
	TENANT_SCOPE_SESSION,		/* until changed: the PostgreSQL default */
	TENANT_SCOPE_TRANSACTION	/* only in the transaction that set it */
} TenantScope;

#endif							/* CONVCTX_SETTINGS_H */
