// One chat request with convctx through node-postgres (a pg.Pool).
// test/clients/node runs this file; copy it into your app.
'use strict';

// After these the request runs again with the SAME request id: the server may
// or may not have committed, and convctx makes the rerun safe (begin_turn
// returns the same turn, finalize_turn accepts the same answer again).
const RETRY_SQLSTATES = new Set(['40001', '40P01', '55P03', '57P01', '08000', '08003', '08006']);
const retryable = (err) => RETRY_SQLSTATES.has(err.code) || !err.code;  // no code: connection lost

async function withRetry(fn, attempts = 5) {
  for (let i = 1; ; i++) {
    try { return await fn(); } catch (err) {
      if (i >= attempts || !retryable(err)) throw err;
    }
  }
}

// fn(client) in one transaction that acts for tenant, and only in it: safe
// behind pgbouncer in transaction mode (for the calls without a tenant argument).
async function inTenant(pool, tenant, fn) {
  const client = await pool.connect();
  const ignore = () => {};  // a lost connection fails the running query; no crash from 'error'
  client.on('error', ignore);
  let broken = null;
  try {
    await client.query('BEGIN');
    await client.query({ name: 'convctx_use_tenant', text: 'SELECT convctx.use_tenant($1)', values: [tenant] });
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    broken = err;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.off('error', ignore);
    client.release(broken && retryable(broken) ? broken : undefined);  // drop a dead connection
  }
}

// req: { tenant, sessionId, requestId, question, identityId }; answer(history,
// question, context) calls the model and returns the answer text. Two calls,
// each its own transaction, each naming the tenant (no use_tenant needed
// behind a pooler). Returns { turnId, answer, history, context }; a repeated
// request returns the stored answer.
async function handleChat(pool, req, answer, historyTurns = 10) {
  const begun = await withRetry(async () => (await pool.query({ name: 'convctx_begin_turn',
    text: 'SELECT turn_id, answer_neutral, history, context FROM convctx.begin_turn($1, $2, $3, $4, $5, $6)',
    values: [req.sessionId, req.requestId, req.question, historyTurns, req.identityId ?? null, req.tenant] })).rows[0]);
  const { turn_id: turnId, history, context } = begun;
  if (begun.answer_neutral !== null) return { turnId, answer: begun.answer_neutral, history, context };  // a retry
  const text = await answer(history, req.question, context);  // outside any transaction
  await withRetry(() => pool.query({ name: 'convctx_finalize_turn',
    text: 'SELECT convctx.finalize_turn($1, $2, $3, tenant => $4)', values: [req.sessionId, turnId, text, req.tenant] }));
  return { turnId, answer: text, history, context };
}

// The sidebar: identityId's conversations, newest first, pageSize at a time;
// pass the cursor of the last row for the next page (null for the first).
async function listConversations(pool, tenant, identityId, cursor = null, pageSize = 20) {
  return withRetry(() => inTenant(pool, tenant, async (c) => (await c.query({
    name: 'convctx_list_conversations',
    text: 'SELECT session_id, title, last_activity_at, live_turns, cursor FROM convctx.list_conversations($1, $2, $3)',
    values: [identityId, cursor, pageSize] })).rows));
}

module.exports = { handleChat, inTenant, listConversations, withRetry };
