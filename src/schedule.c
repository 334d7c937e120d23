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
 * the pg_cron database, for this database and the calling role.
 *
 * Copyright (c) 2026, the convctx authors
 *
 * src/schedule.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "convctx.h"

#define RETENTION_JOB_NAME "convctx-retention"
#define RETENTION_JOB_COMMAND "CALL convctx.purge_all()"

#define PG_CRON_HINT \
	"Install the Debian package postgresql-15-cron, add pg_cron to shared_preload_libraries, " \
	"restart the server, and run CREATE EXTENSION pg_cron in the database named by cron.database_name."

#define SCHEDULE_HERE_SQL \
	"SELECT cron.schedule($1, $2, $3)"

#define SCHEDULE_ELSEWHERE_SQL \
	"SELECT cron.schedule_in_database($1, $2, $3, $4, $5)"

#define UNSCHEDULE_SQL \
	"SELECT bool_or(cron.unschedule(jobid)) FROM cron.job" \
	" WHERE jobname OPERATOR(pg_catalog.=) $1 AND username OPERATOR(pg_catalog.=) $2" \
	"   AND database OPERATOR(pg_catalog.=) $3"

#define CRON_INSTALLED_SQL \
	"SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'pg_cron'"

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
CronFailed(const char *what, const char *database, const char *error)
{
	ereport(ERROR,
			errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			errmsg("pg_cron could not %s the retention job", what),
			errdetail("In database \"%s\": %s", database, error),
			errhint(PG_CRON_HINT));
}

/* Check that pg_cron is installed in this database; SPI must be connected. */
static void
CronInstalledHere(const char *database)
{
	SPI_execute(CRON_INSTALLED_SQL, true, 1);
	if (SPI_processed == 0)
		CronFailed("reach", database, "extension pg_cron is not installed");
}

PG_FUNCTION_INFO_V1(convctx_schedule_retention);

/*
 * schedule_retention(schedule) -> bigint job id
 */
Datum
convctx_schedule_retention(PG_FUNCTION_ARGS)
{
	char	   *schedule;
	char	   *cron_db;
	char	   *here = get_database_name(MyDatabaseId);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	int64		jobid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				errmsg("schedule must not be null"));
	schedule = text_to_cstring(PG_GETARG_TEXT_PP(0));
	cron_db = PgCronDatabase();

	if (strcmp(cron_db, here) == 0)
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
		Datum		values[3];
		bool		isnull;

		values[0] = CStringGetTextDatum(RETENTION_JOB_NAME);
		values[1] = CStringGetTextDatum(schedule);
		values[2] = CStringGetTextDatum(RETENTION_JOB_COMMAND);
		SPI_connect();
		CronInstalledHere(cron_db);
		if (SPI_execute_with_args(SCHEDULE_HERE_SQL, 3, argtypes, values, NULL,
								  false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "cron.schedule returned no job id");
		jobid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											1, &isnull));
		SPI_finish();
	}
	else
	{
		const char *args[5] = {RETENTION_JOB_NAME, schedule, RETENTION_JOB_COMMAND, here, user};
		char	   *result;
		char	   *error;

		if (!WorkerRunSql(cron_db, SCHEDULE_ELSEWHERE_SQL, 5, args, &result, &error))
			CronFailed("schedule", cron_db, error);
		if (result == NULL)
			elog(ERROR, "cron.schedule_in_database returned no job id");
		jobid = pg_strtoint64(result);
	}

	PG_RETURN_INT64(jobid);
}

PG_FUNCTION_INFO_V1(convctx_unschedule_retention);

/*
 * unschedule_retention() -> boolean
 */
Datum
convctx_unschedule_retention(PG_FUNCTION_ARGS)
{
	char	   *cron_db = PgCronDatabase();
	char	   *here = get_database_name(MyDatabaseId);
	char	   *user = GetUserNameFromId(GetUserId(), false);
	bool		removed = false;

	if (strcmp(cron_db, here) == 0)
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
		Datum		values[3];
		bool		isnull;
		Datum		d;

		values[0] = CStringGetTextDatum(RETENTION_JOB_NAME);
		values[1] = CStringGetTextDatum(user);
		values[2] = CStringGetTextDatum(here);
		SPI_connect();
		CronInstalledHere(cron_db);
		if (SPI_execute_with_args(UNSCHEDULE_SQL, 3, argtypes, values, NULL,
								  false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up the retention job");
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		removed = !isnull && DatumGetBool(d);
		SPI_finish();
	}
	else
	{
		const char *args[3] = {RETENTION_JOB_NAME, user, here};
		char	   *result;
		char	   *error;

		if (!WorkerRunSql(cron_db, UNSCHEDULE_SQL, 3, args, &result, &error))
			CronFailed("unschedule", cron_db, error);
		removed = result != NULL && strcmp(result, "t") == 0;
	}

	PG_RETURN_BOOL(removed);
}
