// One chat request, each conversation store used the way its documentation
// shows it: read the last 10 Q/A pairs for the prompt, store the question,
// ask the (fake, instant) model, store the answer.
//
//   node peers.mjs setup PEER            create PEER's tables in $PGDATABASE and
//                                        load the sessions (see load() of each peer)
//   node peers.mjs run PEER CLIENTS SECONDS WARMUP FIRST COUNT
//                                        CLIENTS concurrent requests for SECONDS
//                                        (after WARMUP untimed seconds) on sessions
//                                        s<FIRST>..s<FIRST+COUNT-1>; prints
//                                        "requests seconds"
//   node peers.mjs behaviour PEER TRIALS a retried request after a lost
//                                        connection, and two concurrent requests
//                                        in one session; prints the counts (JSON)
//
// PGHOST, PGPORT, PGUSER, PGDATABASE come from the environment (libpq's).
// Sessions s1..s<short sessions> hold SHORT turns, s1001.. hold LONG turns
// (PEERS_SHORT_SESSIONS, PEERS_SHORT, PEERS_LONG_SESSIONS, PEERS_LONG).

import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { HumanMessage, AIMessage, mapChatMessagesToStoredMessages } from '@langchain/core/messages';
import { PostgresChatMessageHistory } from '@langchain/community/stores/message/postgres';
import { PostgresStore } from '@mastra/pg';
import { Memory } from '@mastra/memory';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { StateGraph, MessagesAnnotation, START, END } from '@langchain/langgraph';

const APP = 'peers-bench';
const PAIRS = 10; // Q/A pairs read for the prompt
const QUESTION = 'How does the retention rule apply to this contract? '.repeat(3);
const ANSWER = 'The rule applies from the date of signature, subject to the exceptions listed. '.repeat(8);
const SHORT = +(process.env.PEERS_SHORT ?? 10);
const SHORT_SESSIONS = +(process.env.PEERS_SHORT_SESSIONS ?? 200);
const LONG = +(process.env.PEERS_LONG ?? 1000);
const LONG_SESSIONS = +(process.env.PEERS_LONG_SESSIONS ?? 100);

// The sessions to load, in the order real traffic writes them: turn i of
// every session that has one, then turn i + 1.
function sessions() {
    const out = [];
    for (let g = 1; g <= SHORT_SESSIONS; g++) out.push({ id: 's' + g, turns: SHORT });
    for (let g = 1001; g < 1001 + LONG_SESSIONS; g++) out.push({ id: 's' + g, turns: LONG });
    return out;
}

// The fake model: instant, its answer names the question it answers (the
// first word of a behaviour question is its tag).
let beforeAnswer = null; // behaviour run: called after the question is stored
let modelDelay = 0;      // behaviour run: ms the model takes
async function model(question, history) {
    if (!Array.isArray(history)) throw new Error('no history for the prompt');
    if (beforeAnswer) await beforeAnswer();
    if (modelDelay) await sleep(modelDelay);
    return question.startsWith('Q') ? 'A' + question.slice(1, question.indexOf(' ')) + ' ' + ANSWER : ANSWER;
}

function newPool(max) {
    const pool = new pg.Pool({ max, application_name: APP });
    // A terminated idle connection is reported here; the pool drops it.
    pool.on('error', () => {});
    // A terminated connection that a peer holds checked out (Mastra's
    // transactions) reports it on the client: without a listener the
    // process dies of an unhandled 'error' event.
    pool.on('connect', (client) => client.on('error', () => {}));
    return pool;
}

// ---------------------------------------------------------------- peers
// Each: tables (names locked by the behaviour run), setup(), load(),
// request(session, requestId, question, retry), history(session) ->
// [{ role: 'q'|'a', text }] in stored order, close().

class Convctx {
    tables = ['convctx.turn'];
    constructor(max) { this.pool = newPool(max); }
    async setup() {
        await this.pool.query('CREATE EXTENSION IF NOT EXISTS convctx');
    }
    // Through the API, turn by turn (start_turn + finalize_turn), one commit
    // per turn round, as test/bench/turns/setup.sql does.
    async load() {
        await loadBySql(this.pool, `
            PERFORM convctx.finalize_turn(s.id, convctx.start_turn(s.id, 'p' || i, $q$${QUESTION}$q$),
                                          $a$${ANSWER}$a$);`);
    }
    async request(session, requestId, question) {
        const begun = (await this.pool.query({
            name: 'begin', text: 'SELECT * FROM convctx.begin_turn($1, $2, $3)',
            values: [session, requestId, question] })).rows[0];
        if (begun.repeated) this.repeated = (this.repeated ?? 0) + 1;
        if (begun.answer_neutral !== null) return begun.answer_neutral; // a retry of a finished turn
        const answer = await model(question, begun.history);
        await this.pool.query({
            name: 'finalize', text: 'SELECT convctx.finalize_turn($1, $2, $3)',
            values: [session, begun.turn_id, answer] });
        return answer;
    }
    async history(session) {
        return pairsToMessages((await this.pool.query(
            `SELECT question_neutral AS q, answer_neutral AS a FROM convctx.turn
              WHERE session_id = $1 AND replaced_by_turn_id IS NULL AND deleted_at IS NULL
              ORDER BY turn_no`, [session])).rows);
    }
    close() { return this.pool.end(); }
}

// The bare-table floor: floor.turn (test/bench/lib/floor_turn.sql) and two
// statements.
class Floor {
    tables = ['floor.turn'];
    constructor(max) { this.pool = newPool(max); }
    async setup() {
        // floor.turn copies convctx.turn's columns and indexes (the file sits
        // beside this directory, here and in the copy run.sh installs).
        await this.pool.query('CREATE EXTENSION IF NOT EXISTS convctx');
        const fs = await import('node:fs');
        await this.pool.query(fs.readFileSync(new URL('../floor_turn.sql', import.meta.url), 'utf8'));
    }
    async load() {
        await loadBySql(this.pool, `
            INSERT INTO floor.turn (tenant_id, session_id, request_id, question_neutral)
            VALUES ('', s.id, 'p' || i, $q$${QUESTION}$q$) RETURNING turn_id INTO t;
            UPDATE floor.turn SET answer_neutral = $a$${ANSWER}$a$, finalized_at = statement_timestamp()
             WHERE tenant_id = '' AND session_id = s.id AND turn_id = t;`);
    }
    async request(session, requestId, question) {
        const begun = (await this.pool.query({
            name: 'ask', text: `
            WITH asked AS (
                INSERT INTO floor.turn (tenant_id, session_id, request_id, question_neutral)
                VALUES ('', $1, $2, $3) RETURNING turn_id)
            SELECT (SELECT turn_id FROM asked) AS turn_id,
                   (SELECT coalesce(jsonb_agg(jsonb_build_object('question_neutral', question_neutral,
                                                                 'answer_neutral', answer_neutral)
                                              ORDER BY turn_no), '[]')
                      FROM (SELECT turn_no, question_neutral, answer_neutral FROM floor.turn
                             WHERE tenant_id = '' AND session_id = $1 AND finalized_at IS NOT NULL
                               AND deleted_at IS NULL AND replaced_by_turn_id IS NULL
                             ORDER BY turn_no DESC LIMIT ${PAIRS}) last) AS history`,
            values: [session, requestId, question] })).rows[0];
        const answer = await model(question, begun.history);
        await this.pool.query({
            name: 'answer', text: `
            UPDATE floor.turn SET answer_neutral = $3, finalized_at = statement_timestamp()
             WHERE tenant_id = '' AND session_id = $1 AND turn_id = $2`,
            values: [session, begun.turn_id, answer] });
        return answer;
    }
    async history(session) {
        return pairsToMessages((await this.pool.query(
            `SELECT question_neutral AS q, answer_neutral AS a FROM floor.turn
              WHERE tenant_id = '' AND session_id = $1 AND replaced_by_turn_id IS NULL
                AND deleted_at IS NULL ORDER BY turn_no`, [session])).rows);
    }
    close() { return this.pool.end(); }
}

// LangChain's PostgresChatMessageHistory, as its documentation shows: a
// history object per session and request (what RunnableWithMessageHistory's
// getMessageHistory does), getMessages() for the prompt (it reads the whole
// session; the prompt takes the last 10 pairs), addMessage() for the
// question and the answer. Its table has no index on session_id; with
// index = true (peer "langchain_ix") one on (session_id, id) is added.
class LangChain {
    tables = ['langchain_chat_histories'];
    constructor(max, index = false) { this.pool = newPool(max); this.index = index; }
    chat(session) { return new PostgresChatMessageHistory({ pool: this.pool, sessionId: session }); }
    async setup() {
        await this.chat('setup').ensureTable();
        if (this.index)
            await this.pool.query('CREATE INDEX ON langchain_chat_histories (session_id, id)');
    }
    // Bulk: the rows addMessage() writes, in the order it writes them.
    async load() {
        const [q, a] = mapChatMessagesToStoredMessages([new HumanMessage(QUESTION), new AIMessage(ANSWER)])
            .map(({ data, type }) => JSON.stringify({ ...data, type }));
        await loadBySql(this.pool, `
            INSERT INTO langchain_chat_histories (session_id, message) VALUES (s.id, $q$${q}$q$), (s.id, $a$${a}$a$);`);
    }
    async request(session, requestId, question) {
        const chat = this.chat(session);
        const prompt = (await chat.getMessages()).slice(-2 * PAIRS);
        await chat.addMessage(new HumanMessage(question));
        const answer = await model(question, prompt);
        await chat.addMessage(new AIMessage(answer));
        return answer;
    }
    async history(session) {
        return (await this.chat(session).getMessages())
            .map((m) => ({ role: m._getType() === 'human' ? 'q' : 'a', text: m.content }));
    }
    close() { return this.pool.end(); }
}

// Mastra: Memory (lastMessages 20: Mastra counts messages, so 10 pairs)
// over PostgresStore, as its documentation shows without an agent: recall()
// the thread's last messages, saveMessages() the user message, then the
// assistant message. recall() is given includeTotal: false, as the agent's
// own history load passes (no COUNT of the thread per request).
class Mastra {
    tables = ['mastra_messages'];
    constructor(max) {
        this.pool = newPool(max);
        this.storage = new PostgresStore({ id: 'peers-bench', pool: this.pool });
        this.memory = new Memory({ storage: this.storage, options: { lastMessages: 2 * PAIRS } });
    }
    async init() { await this.storage.init(); }
    async setup() { await this.storage.init(); }
    message(session, role, text) {
        return { id: randomUUID(), threadId: session, resourceId: 'user-' + session, role,
                 createdAt: new Date(), content: { format: 2, parts: [{ type: 'text', text }], content: text } };
    }
    // Threads through the API (createThread); messages bulk, as the rows
    // saveMessages() writes (one user and one assistant message saved
    // through the API give the content), createdAt one millisecond apart,
    // in the past.
    async load() {
        const tmpl = { q: null, a: null };
        await this.memory.createThread({ threadId: 'template', resourceId: 'user-template' });
        await this.memory.saveMessages({ messages: [this.message('template', 'user', QUESTION)] });
        await this.memory.saveMessages({ messages: [this.message('template', 'assistant', ANSWER)] });
        for (const r of (await this.pool.query(`SELECT role, content::text AS content, type FROM mastra_messages WHERE thread_id = 'template'`)).rows)
            tmpl[r.role === 'user' ? 'q' : 'a'] = r;
        await this.pool.query(`DELETE FROM mastra_messages WHERE thread_id = 'template'`);
        await this.pool.query(`DELETE FROM mastra_threads WHERE id = 'template'`);
        for (const s of sessions())
            await this.memory.createThread({ threadId: s.id, resourceId: 'user-' + s.id, title: s.id });
        await loadBySql(this.pool, `
            INSERT INTO mastra_messages (id, thread_id, content, "createdAt", "createdAtZ", role, type, "resourceId")
            SELECT gen_random_uuid()::text, s.id, c, at AT TIME ZONE 'UTC', at, r, $t$${tmpl.q.type}$t$, 'user-' || s.id
              FROM (VALUES ($q$${tmpl.q.content}$q$, 'user', 0), ($a$${tmpl.a.content}$a$, 'assistant', 1)) m(c, r, k),
                   LATERAL (SELECT timestamptz '2026-01-01 00:00:00+00' + (2 * i + k) * interval '1 ms' AS at) t;`);
    }
    async request(session, requestId, question) {
        const { messages } = await this.memory.recall({ threadId: session, resourceId: 'user-' + session,
                                                        includeTotal: false });
        await this.memory.saveMessages({ messages: [this.message(session, 'user', question)] });
        const answer = await model(question, messages);
        await this.memory.saveMessages({ messages: [this.message(session, 'assistant', answer)] });
        return answer;
    }
    async newSession(session) {
        await this.memory.createThread({ threadId: session, resourceId: 'user-' + session });
    }
    async history(session) {
        const { messages } = await this.memory.recall({ threadId: session, perPage: false });
        return messages.map((m) => ({ role: m.role === 'user' ? 'q' : 'a',
                                      text: m.content.parts.filter((p) => p.type === 'text').map((p) => p.text).join('') }));
    }
    close() { return this.pool.end(); }
}

// LangGraph: a graph over MessagesAnnotation whose one node appends the
// model's answer, compiled with PostgresSaver, invoked per request with
// thread_id = session; the history is the checkpoint's messages.
class LangGraph {
    tables = ['checkpoints', 'checkpoint_blobs', 'checkpoint_writes'];
    constructor(max) {
        this.pool = newPool(max);
        this.saver = new PostgresSaver(this.pool);
        this.graph = new StateGraph(MessagesAnnotation)
            .addNode('model', async (state, config) => {
                if (config.configurable?.load) return {}; // loading: the input is the history
                const question = state.messages.at(-1).content;
                const answer = await model(question, state.messages.slice(-(2 * PAIRS + 1), -1));
                return { messages: [new AIMessage(answer)] };
            })
            .addEdge(START, 'model').addEdge('model', END)
            .compile({ checkpointer: this.saver });
    }
    async setup() { await this.saver.setup(); }
    // Through the graph, one invoke per session whose input is the whole
    // history: the thread's state is the same as after the turns one by one,
    // but without the checkpoints each of those turns leaves behind.
    async load() {
        for (const s of sessions()) {
            const messages = [];
            for (let i = 0; i < s.turns; i++) messages.push(new HumanMessage(QUESTION), new AIMessage(ANSWER));
            await this.graph.invoke({ messages }, { configurable: { thread_id: s.id, load: true } });
        }
    }
    async request(session, requestId, question, retry = false) {
        const config = { configurable: { thread_id: session } };
        // A retry resumes an interrupted run from its last checkpoint
        // (invoke with null), as LangGraph documents for failures.
        if (retry && (await this.graph.getState(config)).next.length > 0) {
            this.resumed = (this.resumed ?? 0) + 1;
            return lastText(await this.graph.invoke(null, config));
        }
        return lastText(await this.graph.invoke({ messages: [new HumanMessage(question)] }, config));
    }
    async history(session) {
        const state = await this.graph.getState({ configurable: { thread_id: session } });
        return (state.values.messages ?? []).map((m) => ({ role: m._getType() === 'human' ? 'q' : 'a', text: m.content }));
    }
    close() { return this.pool.end(); }
}
const lastText = (state) => state.messages.at(-1).content;

const PEERS = {
    convctx: (max) => new Convctx(max),
    floor: (max) => new Floor(max),
    langchain: (max) => new LangChain(max),
    langchain_ix: (max) => new LangChain(max, true),
    mastra: (max) => new Mastra(max),
    langgraph: (max) => new LangGraph(max),
};

function pairsToMessages(rows) {
    const out = [];
    for (const r of rows) {
        out.push({ role: 'q', text: r.q });
        if (r.a !== null) out.push({ role: 'a', text: r.a });
    }
    return out;
}

// Load the sessions with BODY, a PL/pgSQL statement run for session s (s.id)
// and turn i: turn round by turn round across the sessions, one commit per
// round.
async function loadBySql(pool, body) {
    const list = sessions();
    await pool.query('CREATE TABLE IF NOT EXISTS peers_load (id text PRIMARY KEY, turns integer NOT NULL)');
    await pool.query('TRUNCATE peers_load');
    await pool.query('INSERT INTO peers_load SELECT * FROM unnest($1::text[], $2::int[])',
                     [list.map((s) => s.id), list.map((s) => s.turns)]);
    await pool.query(`
        CREATE OR REPLACE PROCEDURE peers_fill(from_round integer, to_round integer) LANGUAGE plpgsql AS $fill$
        DECLARE s record; t uuid;
        BEGIN
            FOR i IN from_round..to_round LOOP
                FOR s IN SELECT id FROM peers_load WHERE turns >= i ORDER BY id LOOP
                    ${body}
                END LOOP;
                COMMIT;
            END LOOP;
        END $fill$`);
    const most = Math.max(...list.map((s) => s.turns));
    await pool.query(`CALL peers_fill(1, ${Math.min(10, most)})`);
    await pool.query('ANALYZE');
    if (most > 10) await pool.query(`CALL peers_fill(11, ${most})`);
    await pool.query('DROP PROCEDURE peers_fill');
    await pool.query('DROP TABLE peers_load');
}

// ---------------------------------------------------------------- run

async function run(peerName, clients, seconds, warmup, first, count) {
    const peer = PEERS[peerName](clients);
    if (peer.init) await peer.init();
    let done = 0, counting = false, stop = false;
    const worker = async () => {
        while (!stop) {
            const session = 's' + (first + Math.floor(Math.random() * count));
            await peer.request(session, randomUUID(), QUESTION);
            if (counting) done++;
        }
    };
    const workers = Array.from({ length: clients }, worker);
    let failed = null;
    const all = Promise.all(workers).catch((e) => { failed = e; stop = true; });
    await sleep(warmup * 1000);
    counting = true;
    const t0 = process.hrtime.bigint();
    await Promise.race([sleep(seconds * 1000), all]);
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    const counted = done;
    stop = true;
    await all;
    await peer.close();
    if (failed) throw failed;
    console.log(`${counted} ${elapsed.toFixed(3)}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- behaviour

// Terminates the peer's backend at the point after the question is stored
// and before the answer is: once the question can be read back and the
// peer's connections are idle, lock the tables the answer goes to; the
// store of the answer waits on that lock, and is terminated there.
function killBeforeAnswer(admin, peer, session, tag) {
    let watcher = null, stored = false;
    const hook = async () => {
        beforeAnswer = null;
        // LangGraph writes its checkpoints in the background: wait for the
        // question to be in.
        for (let i = 0; i < 500 && !stored; i++) {
            stored = (await peer.history(session)).some((m) => m.role === 'q' && tagOf(m.text) === tag);
            if (!stored) await sleep(10);
        }
        for (let i = 0; i < 500; i++) {
            const busy = (await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE application_name = $1 AND state NOT LIKE 'idle%'`, [APP])).rows[0].n;
            if (busy === 0) break;
            await sleep(10);
        }
        await admin.query('BEGIN');
        await admin.query(`LOCK TABLE ${peer.tables.join(', ')} IN EXCLUSIVE MODE`);
        watcher = (async () => {
            try {
                for (let i = 0; i < 2000; i++) {
                    const r = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE application_name = $1 AND wait_event_type = 'Lock'`, [APP]);
                    if (r.rowCount > 0) return true;
                    await sleep(5);
                }
                return false;
            } finally {
                await admin.query('ROLLBACK');
            }
        })();
    };
    return { hook, killed: () => watcher ?? Promise.resolve(false), stored: () => stored };
}

// Keep the first error of each kind, for the log.
function note(totals, what, e) {
    totals.errors ??= {};
    totals.errors[what] ??= String(e?.message ?? e).split('\n')[0].slice(0, 160);
}

const tagOf = (text) => (text && /^[QA]\S+/.test(text) ? text.slice(1, text.indexOf(' ')) : null);

// Count, over the tags asked: copies beyond one of a question (duplicated),
// questions or answers missing (lost), answers not stored right after their
// own question (mis-paired).
function count(messages, tags, totals) {
    for (const tag of tags) {
        const qs = messages.flatMap((m, i) => (m.role === 'q' && tagOf(m.text) === tag ? [i] : []));
        const as = messages.flatMap((m, i) => (m.role === 'a' && tagOf(m.text) === tag ? [i] : []));
        totals.duplicated += Math.max(0, qs.length - 1) + Math.max(0, as.length - 1);
        if (qs.length === 0 || as.length === 0) totals.lost++;
        for (const i of as) {
            const before = messages[i - 1];
            if (!before || before.role !== 'q' || tagOf(before.text) !== tag) totals.misPaired++;
        }
    }
}

async function behaviour(peerName, trials) {
    const peer = PEERS[peerName](4);
    if (peer.init) await peer.init();
    const admin = new pg.Client({ application_name: APP + '-admin' });
    await admin.connect();
    const result = {};
    const prior = async (session) => {
        if (peer.newSession) await peer.newSession(session);
        for (let i = 0; i < 2; i++) await peer.request(session, randomUUID(), QUESTION);
    };

    // (a) the connection is lost after the question is stored, the client
    // retries the same request (same request id where the peer has one).
    // killed: the backend was terminated with the question stored and the
    // answer waiting.
    let a = { trials, killed: 0, missed: 0, failed: 0, retryFailed: 0, duplicated: 0, lost: 0, misPaired: 0 };
    for (let t = 0; t < trials; t++) {
        const session = `ra-${peerName}-${t}`, tag = `ra${t}`, question = `Q${tag} ${QUESTION}`;
        const requestId = randomUUID();
        await prior(session);
        const kill = killBeforeAnswer(admin, peer, session, tag);
        beforeAnswer = kill.hook;
        let failed = false;
        try { await peer.request(session, requestId, question); } catch (e) { failed = true; note(a, 'request', e); }
        beforeAnswer = null;
        const hit = (await kill.killed()) && kill.stored();
        if (failed) {
            try { await peer.request(session, requestId, question, true); } catch (e) { failed = 'retry'; note(a, 'retry', e); }
        }
        // Only the trials where the kill hit its point count.
        if (!hit) { a.missed++; continue; }
        a.killed++;
        if (failed) a.failed++;
        if (failed === 'retry') a.retryFailed++;
        count(await peer.history(session), [tag], a);
    }
    if (peer.resumed !== undefined) a.resumed = peer.resumed;
    if (peer instanceof Convctx) a.repeated = peer.repeated ?? 0;
    result.retry = a;

    // (b) two requests in one session, different questions, started together.
    // The model takes 50 ms here (a real one takes seconds): both questions
    // are in before either answer.
    let b = { trials, failed: 0, duplicated: 0, lost: 0, misPaired: 0 };
    for (let t = 0; t < trials; t++) {
        const session = `rb-${peerName}-${t}`, tags = [`rb${t}x`, `rb${t}y`];
        await prior(session);
        modelDelay = 50;
        const results = await Promise.allSettled(
            tags.map((tag) => peer.request(session, randomUUID(), `Q${tag} ${QUESTION}`)));
        modelDelay = 0;
        for (const r of results) if (r.status === 'rejected') { b.failed++; note(b, 'request', r.reason); }
        count(await peer.history(session), tags, b);
    }
    result.concurrent = b;
    await admin.end();
    await peer.close();
    console.log(JSON.stringify(result));
}

// ---------------------------------------------------------------- main

const [cmd, peerName, ...args] = process.argv.slice(2);
if (!PEERS[peerName]) throw new Error(`unknown peer ${peerName}; peers: ${Object.keys(PEERS).join(' ')}`);
if (cmd === 'setup') {
    const peer = PEERS[peerName](4);
    await peer.setup();
    await peer.load();
    await peer.close();
} else if (cmd === 'run') {
    await run(peerName, ...args.map(Number));
} else if (cmd === 'behaviour') {
    await behaviour(peerName, +(args[0] ?? 5));
} else {
    throw new Error('usage: node peers.mjs setup|run|behaviour PEER ...');
}
