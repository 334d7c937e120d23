-- Semantic recall (convctx_recall) runs on a single server: on a cluster
-- where convctx.distribute() ran, installing it is refused, and nothing of
-- it (not even pgvector, asked for with CASCADE) is left behind.
SELECT count(*) > 0 AS distributed FROM pg_dist_partition WHERE logicalrelid = 'convctx.turn'::regclass;
CREATE EXTENSION convctx_recall CASCADE;
SELECT extname FROM pg_extension WHERE extname IN ('vector', 'convctx_recall');
-- with pgvector there first, the same
CREATE EXTENSION vector;
CREATE EXTENSION convctx_recall;
SELECT extname FROM pg_extension WHERE extname IN ('vector', 'convctx_recall');
DROP EXTENSION vector;
-- distribute() again (after adding nodes) goes on as before
SELECT convctx.distribute();
