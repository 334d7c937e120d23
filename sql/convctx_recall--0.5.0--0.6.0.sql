/* convctx_recall--0.5.0--0.6.0.sql: recall after review */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION convctx_recall UPDATE TO '0.6.0'" to load this file. \quit

------------------------------------------------------------------------------
-- Old versions keep no embedding
------------------------------------------------------------------------------

-- replace_turn now deletes the embeddings of the version it replaces (and
-- an import stores none for an old version): those stored before are
-- deleted here, as they are never recalled.
DELETE FROM convctx_recall.turn_embedding e
 USING convctx.turn t
 WHERE t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
   AND t.session_id OPERATOR(pg_catalog.=) e.session_id
   AND t.turn_id OPERATOR(pg_catalog.=) e.turn_id
   AND t.replaced_by_turn_id IS NOT NULL;
