#!/usr/bin/env bash
# Benchmark convctx against what users would otherwise pick to store chat
# history in PostgreSQL, each used as its documentation shows, from Node.js:
# LangChain's PostgresChatMessageHistory (as shipped, and with an index on
# session_id), Mastra's Memory over PostgresStore, LangGraph's PostgresSaver,
# and a bare table with two statements (the floor). One chat request = read
# the last 10 Q/A pairs, store the question, ask an instant fake model, store
# the answer. Requests/s at 10 and 1,000 turns per session, 1 and 8 clients,
# then a behaviour run (a retried request after a lost connection, two
# concurrent requests in one session) counting duplicated, lost and
# mis-paired turns. Installs what is missing (Node.js and npm included),
# builds and installs convctx, installs the peers' exact npm versions
# (test/bench/peers/package-lock.json) into a temporary directory only, runs
# test/bench/peers/run.sh in a throwaway cluster with durable commits (fsync
# and synchronous_commit on) and prints the tables.
# Information only: exits non-zero only when the run fails.
# CONVCTX_BENCH_SECONDS: length of each run (default 15);
# CONVCTX_BENCH_ROUNDS: interleaved rounds per cell, the median reported (default 3);
# CONVCTX_BENCH_TRIALS: trials of each behaviour check (default 20);
# CONVCTX_BENCH_PEERS: the peers to run (default
#   "convctx floor langchain langchain_ix mastra langgraph").
source "$(dirname "$0")/../../scripts/lib.sh"

ensure_packages test
build_and_install
CONVCTX_DURABLE=1 in_throwaway_cluster "the benchmark" \
    env CONVCTX_BENCH_SECONDS="${CONVCTX_BENCH_SECONDS:-15}" \
        CONVCTX_BENCH_ROUNDS="${CONVCTX_BENCH_ROUNDS:-3}" \
        CONVCTX_BENCH_TRIALS="${CONVCTX_BENCH_TRIALS:-20}" \
        CONVCTX_BENCH_PEERS="${CONVCTX_BENCH_PEERS:-convctx floor langchain langchain_ix mastra langgraph}" \
        bash test/bench/peers/run.sh
