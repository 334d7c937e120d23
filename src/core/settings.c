/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The convctx.* settings: their variables, checks and definitions.
 *
 * The library does not need shared_preload_libraries: the settings exist
 * once it is loaded (on the first call of any convctx function, or LOAD
 * 'convctx'); a SET issued earlier is a placeholder that is taken over at
 * load time.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/core/settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"
#include <limits.h>

#include "core/settings.h"

char	   *convctx_tenant = NULL;
int			convctx_tenant_scope = TENANT_SCOPE_SESSION;
int			convctx_max_active_nodes = 256;
int			convctx_max_session_turns = 500;
int			convctx_max_text_bytes = 1024 * 1024;
char	   *convctx_metadata_allowlist = NULL;
char	   *convctx_ip_hash_key = NULL;
char	   *convctx_ip_hash_salt = NULL;
char	   *convctx_identity_hash_key = NULL;
int			convctx_session_ttl = 24 * 60 * 60;
int			convctx_purge_pause = CONVCTX_PURGE_PAUSE_DEFAULT;
int			convctx_turn_retention = 0;
int			convctx_context_ttl = 30 * 24 * 60 * 60;
int			convctx_audit_retention = 0;
int			convctx_summary_threshold = 15;

static bool
check_metadata_allowlist(char **newval, void **extra, GucSource source)
{
	char	   *raw = pstrdup(*newval);
	List	   *keys;
	bool		ok = SplitGUCList(raw, ',', &keys);

	if (!ok)
		GUC_check_errdetail("List syntax is invalid.");
	list_free(keys);
	pfree(raw);
	return ok;
}

/*
 * Audit retention is 0 (keep forever) or at least an hour. A shorter one
 * would let purge_all, which logs each pass that deleted something, delete
 * the rows of its own earlier passes and never finish, and leave no trail
 * of what a purge did for long enough to read it.
 */
#define AUDIT_RETENTION_MIN (60 * 60)

static bool
check_audit_retention(int *newval, void **extra, GucSource source)
{
	if (*newval > 0 && *newval < AUDIT_RETENTION_MIN)
	{
		GUC_check_errdetail("convctx.audit_retention must be 0 (keep the audit log forever) or at least %d seconds.",
							AUDIT_RETENTION_MIN);
		return false;
	}
	return true;
}

/*
 * The secret keys may come from postgresql.conf, ALTER SYSTEM, the server's
 * command line or a superuser's SET, never from ALTER DATABASE / ALTER ROLE
 * ... SET or a function's SET clause: those are stored in catalogs every
 * role can read (pg_db_role_setting, pg_proc.proconfig), and a session
 * sees such a value before this library is loaded. Refused there, the key
 * is not used: ip addresses are dropped, erased identities become
 * 'erased'.
 */
static bool
check_secret_key(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && (*newval)[0] != '\0' &&
		(source == PGC_S_TEST || source == PGC_S_DATABASE || source == PGC_S_USER ||
		 source == PGC_S_DATABASE_USER))
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errdetail("A key set for a database, a role or a function is readable by every role.");
		GUC_check_errhint("Set it in postgresql.conf or with ALTER SYSTEM.");
		return false;
	}
	return true;
}

static const struct config_enum_entry tenant_scope_options[] = {
	{"session", TENANT_SCOPE_SESSION, false},
	{"transaction", TENANT_SCOPE_TRANSACTION, false},
	{NULL, 0, false}
};

/*
 * Define every convctx.* setting and reserve the prefix, so that a
 * misspelt setting is rejected instead of becoming a silent placeholder.
 *
 * (Long on purpose: one definition per setting; nothing else happens
 * here.)
 */
void
SettingsDefine(void)
{
	DefineCustomStringVariable("convctx.tenant",
							   "Tenant that convctx functions act for in this session.",
							   "Empty means the single-tenant default.",
							   &convctx_tenant,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	/*
	 * Behind a pooler in transaction mode a value of convctx.tenant left by
	 * one client's SET would serve the next client of the connection. With
	 * "transaction", a role that acts for any tenant must name it in every
	 * transaction (tenancy.c). Only superusers set it (ALTER ROLE ... SET),
	 * so an app cannot switch the guard off.
	 */
	DefineCustomEnumVariable("convctx.tenant_scope",
							 "How long a value of convctx.tenant counts for roles that act for any tenant.",
							 "\"transaction\": only in the transaction that set it (SET LOCAL, convctx.use_tenant); for transaction pooling.",
							 &convctx_tenant_scope,
							 TENANT_SCOPE_SESSION,
							 tenant_scope_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.max_active_nodes",
							"Most node ids a conversation context keeps; the least recently referenced go first.",
							"Used by context_merge when max_nodes is NULL, and by context_add. Only superusers may change it: it bounds what context_add stores.",
							&convctx_max_active_nodes,
							256,
							1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.max_session_turns",
							"Most turns an anonymous session keeps; the oldest are dropped on append.",
							"Sessions linked to an identity are not capped.",
							&convctx_max_session_turns,
							500,
							1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.max_text_bytes",
							"Largest text (question, answer, metadata) a turn accepts.",
							NULL,
							&convctx_max_text_bytes,
							1024 * 1024,
							1, 512 * 1024 * 1024,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomStringVariable("convctx.metadata_allowlist",
							   "Request metadata keys that turns persist; other keys are dropped.",
							   "A raw \"ip\" is never stored: it becomes \"ip_hash\" when that key is allowed and convctx.ip_hash_key is set.",
							   &convctx_metadata_allowlist,
							   "channel,device_type,ip_hash,user_agent_hash,locale,client_version",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   check_metadata_allowlist, NULL, NULL);

	/*
	 * The keys are secrets: only superusers may read or set them, and SHOW
	 * ALL does not list them.
	 */
	DefineCustomStringVariable("convctx.ip_hash_key",
							   "Secret key of the HMAC-SHA256 that turns a raw ip into ip_hash.",
							   "Empty: a raw ip is dropped, no ip_hash is stored.",
							   &convctx_ip_hash_key,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_secret_key, NULL, NULL);

	DefineCustomStringVariable("convctx.ip_hash_salt",
							   "Deprecated: used as convctx.ip_hash_key when that is empty.",
							   NULL,
							   &convctx_ip_hash_salt,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_secret_key, NULL, NULL);

	DefineCustomStringVariable("convctx.identity_hash_key",
							   "Secret key of the HMAC-SHA256 that stands in for an erased identity.",
							   "Empty: every erased identity becomes the same marker \"erased\".",
							   &convctx_identity_hash_key,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_secret_key, NULL, NULL);

	DefineCustomIntVariable("convctx.session_ttl",
							"Inactivity after which purge deletes an anonymous session, its turns and its context.",
							"0 keeps anonymous sessions forever.",
							&convctx_session_ttl,
							24 * 60 * 60,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.turn_retention",
							"Age after which purge deletes any turn, tombstones included.",
							"0 keeps turns forever.",
							&convctx_turn_retention,
							0,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.context_ttl",
							"Time without an update after which purge deletes a conversation context.",
							"0 keeps contexts forever.",
							&convctx_context_ttl,
							30 * 24 * 60 * 60,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.audit_retention",
							"Age after which purge deletes an audit log row.",
							"0 keeps the audit log forever; otherwise at least one hour.",
							&convctx_audit_retention,
							0,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							check_audit_retention, NULL, NULL);

	DefineCustomIntVariable("convctx.purge_pause",
							"Pause of purge_all after each pass that deleted something, so that live requests keep their share of the machine.",
							"0 purges without pausing.",
							&convctx_purge_pause,
							CONVCTX_PURGE_PAUSE_DEFAULT,
							0, 60 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("convctx.summary_threshold",
							"Unsummarized messages older than the window above which conversation_state asks for a summary.",
							NULL,
							&convctx_summary_threshold,
							15,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("convctx");
}
