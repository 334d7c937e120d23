/* convctx_recall--0.5.0--0.6.0.sql: recall after review */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx_recall UPDATE TO '0.6.0'" to load this file. \quit
