// convctx as a Node.js app calls it: node-postgres (pg) and the request
// handler of examples/node/chat.js, against the cluster in PGHOST/PGPORT
// (PGUSER a superuser). Run by scripts/clients.sh with `node --test`.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const pg = require('pg');
const { handleChat, inTenant, listConversations } = require('../../../examples/node/chat.js');

const DB = 'convctx_clients_node';
const PASSWORD = 'client-test-password';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ROLES = ['node_app', 'node_service', 'node_admin', 'node_unbound'];

const superuser = (database = DB) => new pg.Client({ database });
const pools = [];
const poolFor = (user, extra = {}) => {
  const pool = new pg.Pool({ database: DB, user, password: PASSWORD, max: 4, ...extra });
  pool.on('error', () => {});  // a backend terminated while idle
  pools.push(pool);
  return pool;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function sql(text, values, database) {
  const c = superuser(database);
  await c.connect();
  try { return await c.query(text, values); } finally { await c.end(); }
}

test.before(async () => {
  await sql(`DROP DATABASE IF EXISTS ${DB}`, [], 'postgres');
  for (const r of ROLES) await sql(`DROP ROLE IF EXISTS ${r}`, [], 'postgres');
  await sql(`CREATE DATABASE ${DB}`, [], 'postgres');
  await sql(`CREATE EXTENSION convctx;
    CREATE ROLE node_app LOGIN PASSWORD '${PASSWORD}' IN ROLE convctx_app;
    CREATE ROLE node_service LOGIN PASSWORD '${PASSWORD}' IN ROLE convctx_app;
    CREATE ROLE node_admin LOGIN PASSWORD '${PASSWORD}' IN ROLE convctx_admin;
    CREATE ROLE node_unbound LOGIN PASSWORD '${PASSWORD}' IN ROLE convctx_app;
    SELECT convctx.bind_role_tenant('node_app', 'acme');
    SELECT convctx.bind_role_all_tenants('node_service');
    SELECT convctx.bind_role_tenant('node_admin', 'acme');
    ALTER ROLE node_service SET convctx.tenant_scope = 'transaction';`);
});

test.after(async () => {
  for (const p of pools) await p.end().catch(() => {});
  await sql(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, [], 'postgres');
  for (const r of ROLES) await sql(`DROP ROLE IF EXISTS ${r}`, [], 'postgres');
});

const answerOf = (history, question) => `answer to ${question} after ${history.length} turns`;

test('a chat request cycle through the example handler', async () => {
  const pool = poolFor('node_service');
  const req = { tenant: 'acme', sessionId: 'cycle', requestId: 'r1', question: 'What is VAT?' };
  const first = await handleChat(pool, req, answerOf);
  assert.match(first.turnId, UUID);
  assert.equal(first.answer, 'answer to What is VAT? after 0 turns');
  const second = await handleChat(pool, { ...req, requestId: 'r2', question: 'And VRT?' }, answerOf);
  assert.equal(second.history.length, 1);
  assert.equal(second.history[0].question_neutral, 'What is VAT?');
  assert.equal(second.history[0].answer_neutral, first.answer);
  // a repeated request: the same turn and the stored answer, the model not asked again
  const again = await handleChat(pool, req, () => assert.fail('the model was asked again'));
  assert.equal(again.turnId, first.turnId);
  assert.equal(again.answer, first.answer);
  // another tenant, same session id: nothing of acme's
  const other = await handleChat(pool, { ...req, tenant: 'globex' }, answerOf);
  assert.notEqual(other.turnId, first.turnId);
  assert.equal(other.history.length, 0);

  // link the session to a user, then an administrator redacts the first turn
  await inTenant(pool, 'acme', (c) => c.query("SELECT convctx.link_session('user-7', 'cycle')"));
  const admin = poolFor('node_admin');
  const redacted = await admin.query("SELECT convctx.redact_turn('cycle', $1) AS r", [first.turnId]);
  assert.equal(redacted.rows[0].r, true);
  const third = await handleChat(pool, { ...req, requestId: 'r3', question: 'Thanks' }, answerOf);
  assert.deepEqual(third.history.map((t) => t.question_neutral), ['And VRT?']);
  const stored = await sql(`SELECT request_id, identity_id, question_neutral IS NULL AS gone
                              FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'cycle'
                             ORDER BY turn_no`);
  assert.deepEqual(stored.rows, [
    { request_id: 'r1', identity_id: 'user-7', gone: true },
    { request_id: 'r2', identity_id: 'user-7', gone: false },
    { request_id: 'r3', identity_id: 'user-7', gone: false },
  ]);
});

test('types arrive as the app expects them', async () => {
  const pool = poolFor('node_app');
  const texts = {
    latin: 'Ça coûte combien ?',
    astral: 'emoji 😀🧪 and a flag 🇧🇪',
    plane2: 'CJK extension B: 𠀀𠜎𪚥',
    planes3to16: 'plane 3 \u{30000}, tags \u{E0041}\u{E007F}, private use \u{F0000} \u{10FFFD}',
    combining: 'e\u0301 a\u0308 n\u0303 (combining marks)',
    rtl: 'שלום עולם مرحبا',
    controls: 'tab\tnewline\nquote\' backslash\\ "json" \u2028',
  };
  for (const [name, text] of Object.entries(texts)) {
    const started = await pool.query(
      "SELECT convctx.start_turn('types', $1, $2, meta => $3) AS id",
      [name, text, { channel: 'web', locale: 'fr-BE', dropped: 1 }]);
    const id = started.rows[0].id;
    assert.equal(typeof id, 'string');
    assert.match(id, UUID);
    await pool.query("SELECT convctx.finalize_turn('types', $1, $2)", [id, `${text} (answer)`]);
  }
  const rows = (await pool.query("SELECT * FROM convctx.recent_turns('types', 10)")).rows;
  assert.deepEqual(rows.map((r) => r.question_neutral), Object.values(texts));
  assert.deepEqual(rows.map((r) => r.answer_neutral), Object.values(texts).map((t) => `${t} (answer)`));
  for (const r of rows) {
    assert.ok(r.created_at instanceof Date && r.finalized_at instanceof Date);
    assert.ok(r.finalized_at >= r.created_at);
    assert.ok(Math.abs(Date.now() - r.created_at.getTime()) < 3600e3, 'timestamptz in the right zone');
    assert.deepEqual(r.metadata, { channel: 'web', locale: 'fr-BE' });  // parsed, allowlisted
  }
  const json = (await pool.query("SELECT convctx.recent_turns_json('types', 10) AS h")).rows[0].h;
  assert.ok(Array.isArray(json));
  assert.deepEqual(json.map((t) => t.question_neutral), Object.values(texts));
  // byte for byte, as the server stores it
  const bytes = (await pool.query(
    "SELECT octet_length(question_neutral) AS n FROM convctx.recent_turns('types', 10)")).rows;
  assert.deepEqual(bytes.map((b) => b.n), Object.values(texts).map((t) => Buffer.byteLength(t)));
});

test('every documented error reaches the app with its SQLSTATE', async () => {
  const app = poolFor('node_app');
  const expectCode = async (pool, text, values, code, pattern) => {
    await assert.rejects(pool.query(text, values), (err) => {
      assert.equal(err.code, code, `${text}: ${err.message}`);
      assert.match(err.message, pattern);
      return true;
    });
  };
  const t = (await app.query("SELECT convctx.start_turn('errors', 'r1', 'Q') AS id")).rows[0].id;
  await app.query("SELECT convctx.finalize_turn('errors', $1, 'A')", [t]);
  await app.query("SELECT convctx.link_session('user-1', 'errors')");
  await expectCode(app, "SELECT convctx.link_session('user-2', 'errors')", [], 'CV001', /already linked to another identity/);
  await expectCode(app, "SELECT convctx.finalize_turn('errors', $1, 'another answer')", [t], '55000', /finalized/);
  await expectCode(app, "SELECT convctx.start_turn('', 'r2', 'Q')", [], '22023', /session_id/);
  await expectCode(app, "SELECT convctx.start_turn(NULL, 'r2', 'Q')", [], '22004', /session_id must not be null/);
  await expectCode(app, "SELECT convctx.finalize_turn('errors', '00000000-0000-4000-8000-000000000000', 'A')", [],
    'P0002', /turn .* not found|does not exist|no turn/i);
  await expectCode(app, 'SELECT convctx.start_turn($1, $2, $3)', ['x'.repeat(1025), 'r', 'Q'], '54000', /too long/);
  const elsewhere = new pg.Client({ database: DB, user: 'node_app', password: PASSWORD,
                                    options: '-c convctx.tenant=globex' });
  await elsewhere.connect();
  await expectCode(elsewhere, 'SELECT convctx.current_tenant()', [], '42501', /permission denied for tenant "globex"/);
  await elsewhere.end();
  await expectCode(poolFor('node_unbound'), 'SELECT convctx.current_tenant()', [], '42501', /not bound to a tenant/);
  await expectCode(poolFor('node_service'), "SELECT convctx.use_tenant('acme')", [], '25P01', /transaction blocks/);
  await expectCode(poolFor('node_service'), 'SELECT convctx.current_tenant()', [], '42501', /not set in this transaction/);
  // nothing was written by the refused calls
  const n = await sql("SELECT count(*)::int AS n FROM convctx.turn WHERE session_id = 'errors'");
  assert.equal(n.rows[0].n, 1);
});

// Hold the session's row lock as the superuser so the app's next call on the
// session waits; returns the holder (COMMIT/ROLLBACK releases it).
async function lockSession(tenant, session) {
  const holder = superuser();
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT 1 FROM convctx.session WHERE tenant_id = $1 AND session_id = $2 FOR UPDATE',
    [tenant, session]);
  return holder;
}

// Terminate the backend of user that waits for a lock, once it does.
async function killWaiter(user) {
  for (let i = 0; i < 200; i++) {
    const r = await sql(`SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
                          WHERE usename = $1 AND wait_event_type = 'Lock'`, [user]);
    if (r.rows.length > 0) return r.rows.length;
    await sleep(25);
  }
  throw new Error(`no backend of ${user} waited for a lock`);
}

test('a request whose backend is killed mid-call is retried into exactly one turn', async () => {
  const pool = poolFor('node_service');
  const base = { tenant: 'acme', sessionId: 'killed', question: 'Q' };
  await handleChat(pool, { ...base, requestId: 'warm-up' }, answerOf);

  // killed while begin_turn waits
  let holder = await lockSession('acme', 'killed');
  const running = handleChat(pool, { ...base, requestId: 'r-start' }, answerOf);
  assert.equal(await killWaiter('node_service'), 1);
  await holder.query('ROLLBACK');
  await holder.end();
  const done = await running;
  assert.match(done.turnId, UUID);

  // killed while finalize_turn waits: the lock is taken while the model "thinks"
  let finalizeHolder;
  const running2 = handleChat(pool, { ...base, requestId: 'r-finalize' }, async (h, q) => {
    finalizeHolder = await lockSession('acme', 'killed');
    return answerOf(h, q);
  });
  while (!finalizeHolder) await sleep(10);
  assert.equal(await killWaiter('node_service'), 1);
  await finalizeHolder.query('ROLLBACK');
  await finalizeHolder.end();
  const done2 = await running2;

  const rows = (await sql(`SELECT request_id, count(*)::int AS turns, count(finalized_at)::int AS answered,
                                  min(turn_id::text) AS turn_id
                             FROM convctx.turn WHERE tenant_id = 'acme' AND session_id = 'killed'
                            GROUP BY 1 ORDER BY 1`)).rows;
  assert.deepEqual(rows, [
    { request_id: 'r-finalize', turns: 1, answered: 1, turn_id: done2.turnId },
    { request_id: 'r-start', turns: 1, answered: 1, turn_id: done.turnId },
    { request_id: 'warm-up', turns: 1, answered: 1, turn_id: rows[2].turn_id },
  ]);
  // and a later retry of either request gets the same turn
  const again = await handleChat(pool, { ...base, requestId: 'r-start' }, () => assert.fail('asked again'));
  assert.equal(again.turnId, done.turnId);
});

test('named prepared statements over many calls on one connection', async () => {
  const client = new pg.Client({ database: DB, user: 'node_app', password: PASSWORD });
  await client.connect();
  try {
    for (let i = 1; i <= 200; i++) {
      const id = (await client.query({ name: 'start', text: 'SELECT convctx.start_turn($1, $2, $3) AS id',
        values: ['prepared', `r${i}`, `question ${i}`] })).rows[0].id;
      await client.query({ name: 'finalize', text: 'SELECT convctx.finalize_turn($1, $2, $3)',
        values: ['prepared', id, `answer ${i}`] });
      const h = (await client.query({ name: 'history',
        text: 'SELECT question_neutral, answer_neutral FROM convctx.recent_turns($1, $2)',
        values: ['prepared', 3] })).rows;
      assert.deepEqual(h.at(-1), { question_neutral: `question ${i}`, answer_neutral: `answer ${i}` });
      assert.equal(h.length, Math.min(i, 3));
    }
    const names = (await client.query('SELECT name FROM pg_prepared_statements ORDER BY 1')).rows;
    assert.deepEqual(names.map((r) => r.name), ['finalize', 'history', 'start']);
  } finally {
    await client.end();
  }
});

test("the README's JavaScript is the example's code", () => {
  const fs = require('node:fs');
  const path = require('node:path');
  const top = path.join(__dirname, '..', '..', '..');
  const readme = fs.readFileSync(path.join(top, 'README.md'), 'utf8');
  const example = fs.readFileSync(path.join(top, 'examples', 'node', 'chat.js'), 'utf8');
  const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.ok(blocks.length >= 1, 'the README shows JavaScript');
  for (const b of blocks) assert.ok(example.includes(b), `not in examples/node/chat.js:\n${b}`);
});

test("the sidebar: a user's conversations, a page at a time", async () => {
  const pool = poolFor('node_service');
  for (const n of [1, 2, 3]) {
    await handleChat(pool, { tenant: 'acme', sessionId: `side-${n}`, requestId: 'r1',
                             question: `Question ${n}`, identityId: 'user-side' }, answerOf);
  }
  const page1 = await listConversations(pool, 'acme', 'user-side', null, 2);
  assert.deepEqual(page1.map((r) => r.session_id), ['side-3', 'side-2']);  // newest first
  assert.equal(page1[0].title, 'Question 3');
  assert.ok(page1[0].last_activity_at instanceof Date);
  assert.equal(page1[0].live_turns, '1');  // bigint arrives as a string
  const page2 = await listConversations(pool, 'acme', 'user-side', page1[1].cursor, 2);
  assert.deepEqual(page2.map((r) => r.session_id), ['side-1']);
  assert.deepEqual(await listConversations(pool, 'globex', 'user-side'), []);  // another tenant
});
