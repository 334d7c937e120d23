/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Retention on a schedule: schedule_retention and unschedule_retention
 *	  put the job "convctx-retention" (CALL convctx.purge_all()) into
 *	  pg_cron, or take it out.
 *
 * pg_cron is optional and lives in one database of the cluster
 * (cron.database_name). When that is this database, its functions are
 * called directly; otherwise a background worker (worker.c) calls them in
 * the pg_cron database, for this database, acting as the calling role.
 *
 * Either way nothing runs as anyone but the caller, the cron objects
 * called are checked to belong to extension pg_cron (a schema cron
 * planted before pg_cron was installed is never called into), and the
 * statements run with search_path pinned to pg_catalog, pg_temp and every
 * name qualified (a database-level search_path cannot redirect them).
 * During recovery and in a read-only transaction both functions fail at
 * once with 25006 (CONVCTX_WRITER), before a worker is started.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/lifecycle/schedule.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "core/args.h"
#include "core/worker.h"
#include "core/writable.h"

#define RETENTION_JOB_NAME "convctx-retention"
#define RETENTION_JOB_COMMAND "CALL convctx.purge_all()"

#define PG_CRON_HINT \
	"Install the Debian package postgresql-15-cron, add pg_cron to shared_preload_libraries, " \
	"restart the server, and run CREATE EXTENSION pg_cron in the database named by cron.database_name."

/*
 * Every name qualified and the search_path pinned to pg_catalog, pg_temp
 * wherever these run; the cron objects are checked to belong to extension
 * pg_cron first (CronCheckMembers). username NULL: pg_cron takes the
 * current role, and decides itself whether that role may schedule.
 */
#define SCHEDULE_HERE_SQL \
	"SELECT cron.schedule($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.text)"

#define SCHEDULE_ELSEWHERE_SQL \
	"SELECT cron.schedule_in_database($1::pg_catalog.text, $2::pg_catalog.text," \
	" $3::pg_catalog.text, $4::pg_catalog.text, NULL::pg_catalog.text, true)"

#define UNSCHEDULE_SQL \
	"SELECT pg_catalog.bool_or(cron.unschedule(j.jobid)) FROM cron.job j" \
	" WHERE j.jobname OPERATOR(pg_catalog.=) $1::pg_catalog.text" \
	"   AND j.username OPERATOR(pg_catalog.=) $2::pg_catalog.text" \
	"   AND j.database OPERATOR(pg_catalog.=) $3::pg_catalog.text"

/*
 * The database pg_cron runs its jobs from; ERROR 55000 when pg_cron is not
 * preloaded.
 */
static char *
PgCronDatabase(void)
{
	char	   *preload = pstrdup(GetConfigOption("shared_preload_libraries", false, false));
	List	   *libraries;
	ListCell   *lc;
	bool		loaded = false;
	const char *database;

	if (SplitDirectoriesString(preload, ',', &libraries))
		foreach(lc, libraries)
		{
			const char *lib = lfirst(lc);
			const char *base = strrchr(lib, '/');

			base = base ? base + 1 : lib;
			if (strncmp(base, "pg_cron", 7) == 0 && (base[7] == '\0' || strcmp(base + 7, ".so") == 0))
				loaded = true;
		}
	if (!loaded)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("pg_cron is not loaded"),
				errdetail("Retention scheduling needs pg_cron in shared_preload_libraries."),
				errhint(PG_CRON_HINT));

	database = GetConfigOption("cron.database_name", true, false);
	return pstrdup(database ? database : "postgres");
}

static void
CronFailed(const char *what, const char *database, const char *error, int sqlstate)
{
	ereport(ERROR,
			errcode(sqlstate),
			errmsg("pg_cron could not %s the retention job", what),
			errdetail("In database \"%s\": %s", database, error),
			sqlstate == ERRCODE_INSUFFICIENT_PRIVILEGE ?
			errhint("pg_cron decides which roles may schedule jobs: the role needs CONNECT on database \"%s\", "
					"USAGE on schema cron and EXECUTE on cron.schedule_in_database there.", database) :
			errhint(PG_CRON_HINT));
}

/*
 * Run sql in this database, the pg_cron database, as the caller, after
 * checking the cron objects and with search_path pinned for the
 * statement. Returns the first column of the only row; SPI must be
 * connected.
 */
static Datum
CronRunHere(const char *sql, int nargs, Datum *values, bool *isnull)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	int			nestlevel;
	Datum		d;

	Assert(nargs <= 3);
	CronCheckMembers();
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "pg_cron returned no row");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	AtEOXact_GUC(true, nestlevel);
	return d;
}

/*
 * Run sql in the pg_cron database cron_db through a worker acting as the
 * calling role; ERROR when it did not commit.
 */
static char *
CronRunElsewhere(const char *what, const char *cron_db, const char *sql, int nargs,
				 const char **args)
{
	char	   *result;
	char	   *error;
	int			sqlstate;

	if (!WorkerRunSql(get_database_oid(cron_db, false), GetUserId(), WORKER_CHECK_PG_CRON,
					  sql, nargs, args, &result, &error, &sqlstate))
		CronFailed(what, cron_db, error, sqlstate);
	return result;
}

/*
 * Run a pg_cron statement and return its one value as text, or NULL: in
 * this database when it is pg_cron's (here_sql with the first nhere of
 * args), else in cron_db through a worker acting as the calling role
 * (elsewhere_sql with the first nelsewhere).
 */
static char *
CronRun(const char *what, const char **args, const char *here_sql, int nhere,
		const char *elsewhere_sql, int nelsewhere)
{
	char	   *cron_db = PgCronDatabase();
	MemoryContext caller = CurrentMemoryContext;
	Datum		values[3];
	bool		isnull;
	Datum		d;
	char	   *result = NULL;
	int			i;

	if (strcmp(cron_db, get_database_name(MyDatabaseId)) != 0)
		return CronRunElsewhere(what, cron_db, elsewhere_sql, nelsewhere, args);
	for (i = 0; i < nhere; i++)
		values[i] = CStringGetTextDatum(args[i]);
	SPI_connect();
	d = CronRunHere(here_sql, nhere, values, &isnull);
	if (!isnull)
	{
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(SPI_gettypeid(SPI_tuptable->tupdesc, 1), &out, &varlena);
		MemoryContextSwitchTo(caller);
		result = OidOutputFunctionCall(out, d);
	}
	SPI_finish();
	return result;
}

PG_FUNCTION_INFO_V1(convctx_schedule_retention);

/*
 * schedule_retention(schedule) -> bigint job id. The job belongs to the
 * calling role, and pg_cron's own privileges decide whether it may have
 * one.
 */
Datum
convctx_schedule_retention(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(schedule_retention);
	const char *args[4] = {RETENTION_JOB_NAME, NULL, RETENTION_JOB_COMMAND,
	get_database_name(MyDatabaseId)};
	char	   *jobid;

	ArgNotNull(fcinfo, 0, "schedule");
	args[1] = text_to_cstring(PG_GETARG_TEXT_PP(0));
	jobid = CronRun("schedule", args, SCHEDULE_HERE_SQL, 3, SCHEDULE_ELSEWHERE_SQL, 4);
	if (jobid == NULL)
		elog(ERROR, "cron.schedule returned no job id");
	PG_RETURN_INT64(pg_strtoint64(jobid));
}

PG_FUNCTION_INFO_V1(convctx_unschedule_retention);

/*
 * unschedule_retention() -> boolean: removes the calling role's job for
 * this database.
 */
Datum
convctx_unschedule_retention(PG_FUNCTION_ARGS)
{
	CONVCTX_WRITER(unschedule_retention);
	const char *args[3] = {RETENTION_JOB_NAME, NULL, get_database_name(MyDatabaseId)};
	char	   *removed;

	args[1] = GetUserNameFromId(GetUserId(), false);
	removed = CronRun("unschedule", args, UNSCHEDULE_SQL, 3, UNSCHEDULE_SQL, 3);

	PG_RETURN_BOOL(removed != NULL && strcmp(removed, "t") == 0);
}
