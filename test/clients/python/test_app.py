"""convctx as a Python app calls it: psycopg 3 and the request handler of
examples/python/chat.py, against the cluster in PGHOST/PGPORT (PGUSER a
superuser). Run by scripts/clients.sh with /usr/bin/python3 -m unittest."""
import datetime
import os
import re
import sys
import threading
import time
import unittest
import uuid

import psycopg
from psycopg import errors

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python"))
from chat import handle_chat, in_tenant, list_conversations  # noqa: E402

DB = "convctx_clients_python"
PASSWORD = "client-test-password"
ROLES = ("py_app", "py_service", "py_admin", "py_unbound")


def superuser(dbname=DB):
    return psycopg.connect(dbname=dbname, autocommit=True)


def sql(query, params=None, dbname=DB):
    with superuser(dbname) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else None


def connector(user, **kwargs):
    return lambda: psycopg.connect(dbname=DB, user=user, password=PASSWORD, autocommit=True, **kwargs)


def answer_of(history, question, context=None):
    return f"answer to {question} after {len(history)} turns"


def setUpModule():
    for r in ROLES:
        sql(f"DROP ROLE IF EXISTS {r}", dbname="postgres")
    sql(f"DROP DATABASE IF EXISTS {DB}", dbname="postgres")
    sql(f"CREATE DATABASE {DB}", dbname="postgres")
    with superuser() as conn:
        conn.execute("CREATE EXTENSION convctx")
        for role, group in (("py_app", "convctx_app"), ("py_service", "convctx_app"),
                            ("py_admin", "convctx_admin"), ("py_unbound", "convctx_app")):
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}' IN ROLE {group}")
        conn.execute("SELECT convctx.bind_role_tenant('py_app', 'acme')")
        conn.execute("SELECT convctx.bind_role_all_tenants('py_service')")
        conn.execute("SELECT convctx.bind_role_tenant('py_admin', 'acme')")
        conn.execute("ALTER ROLE py_service SET convctx.tenant_scope = 'transaction'")


def tearDownModule():
    sql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", dbname="postgres")
    for r in ROLES:
        sql(f"DROP ROLE IF EXISTS {r}", dbname="postgres")


class Sidebar(unittest.TestCase):
    def test_conversations_a_page_at_a_time(self):
        connect = connector("py_service")
        for n in (1, 2, 3):
            handle_chat(connect, {"tenant": "acme", "session_id": f"side-{n}", "request_id": "r1",
                                  "question": f"Question {n}", "identity_id": "user-side"}, answer_of)
        page1 = list_conversations(connect, "acme", "user-side", page_size=2)
        self.assertEqual([r[0] for r in page1], ["side-3", "side-2"])  # newest first
        self.assertEqual(page1[0][1], "Question 3")
        self.assertIsInstance(page1[0][2], datetime.datetime)
        self.assertEqual(page1[0][3], 1)
        page2 = list_conversations(connect, "acme", "user-side", page1[-1][4], 2)
        self.assertEqual([r[0] for r in page2], ["side-1"])
        self.assertEqual(list_conversations(connect, "globex", "user-side"), [])


class RequestCycle(unittest.TestCase):
    def test_cycle_through_the_example_handler(self):
        connect = connector("py_service")
        req = {"tenant": "acme", "session_id": "cycle", "request_id": "r1", "question": "What is VAT?"}
        turn1, answer1, history = handle_chat(connect, req, answer_of)
        self.assertIsInstance(turn1, uuid.UUID)
        self.assertEqual(answer1, "answer to What is VAT? after 0 turns")
        self.assertEqual(history, [])
        turn2, _, history = handle_chat(connect, {**req, "request_id": "r2", "question": "And VRT?"}, answer_of)
        self.assertEqual([(h["question_neutral"], h["answer_neutral"]) for h in history],
                         [("What is VAT?", answer1)])
        # a repeated request: the same turn, the stored answer, the model not asked again
        again = handle_chat(connect, req, lambda h, q, c: self.fail("the model was asked again"))
        self.assertEqual(again[:2], (turn1, answer1))
        # the same session id in another tenant shares nothing
        other = handle_chat(connect, {**req, "tenant": "globex"}, answer_of)
        self.assertNotEqual(other[0], turn1)
        self.assertEqual(other[2], [])
        # link the session, then an administrator redacts the first turn
        with connect() as conn:
            in_tenant(conn, "acme", lambda c: c.execute("SELECT convctx.link_session('user-7', 'cycle')"))
        with connector("py_admin")() as admin:
            self.assertTrue(admin.execute("SELECT convctx.redact_turn('cycle', %s)", (turn1,)).fetchone()[0])
        _, _, history = handle_chat(connect, {**req, "request_id": "r3", "question": "Thanks"}, answer_of)
        self.assertEqual([h["question_neutral"] for h in history], ["And VRT?"])
        rows = sql("SELECT request_id, identity_id, question_neutral IS NULL FROM convctx.turn"
                   " WHERE tenant_id = 'acme' AND session_id = 'cycle' ORDER BY turn_no")
        self.assertEqual(rows, [("r1", "user-7", True), ("r2", "user-7", False), ("r3", "user-7", False)])


class Types(unittest.TestCase):
    TEXTS = {
        "latin": "Ça coûte combien ?",
        "astral": "emoji 😀🧪 and a flag 🇧🇪",
        "plane2": "CJK extension B: 𠀀𠜎𪚥",
        "planes3to16": "plane 3 \U00030000, tags \U000E0041\U000E007F, private use \U000F0000 \U0010FFFD",
        "combining": "e\u0301 a\u0308 n\u0303 (combining marks)",
        "rtl": "שלום עולם مرحبا",
        "controls": "tab\tnewline\nquote' backslash\\ \"json\" \u2028",
    }

    def test_types_arrive_as_the_app_expects(self):
        with connector("py_app")() as conn:
            for name, text in self.TEXTS.items():
                turn = conn.execute(
                    "SELECT convctx.start_turn('types', %s, %s, meta => %s)",
                    (name, text, psycopg.types.json.Jsonb({"channel": "web", "locale": "fr-BE", "dropped": 1})),
                ).fetchone()[0]
                self.assertIsInstance(turn, uuid.UUID)
                conn.execute("SELECT convctx.finalize_turn('types', %s, %s)", (turn, text + " (answer)"))
            cur = conn.execute("SELECT * FROM convctx.recent_turns('types', 10)")
            cols = [d.name for d in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
            self.assertEqual([r["question_neutral"] for r in rows], list(self.TEXTS.values()))
            self.assertEqual([r["answer_neutral"] for r in rows], [t + " (answer)" for t in self.TEXTS.values()])
            now = datetime.datetime.now(datetime.timezone.utc)
            for r in rows:
                self.assertIsInstance(r["turn_id"], uuid.UUID)
                self.assertIsNotNone(r["created_at"].tzinfo)
                self.assertLessEqual(r["created_at"], r["finalized_at"])
                self.assertLess(abs((now - r["created_at"]).total_seconds()), 3600)
                self.assertEqual(r["metadata"], {"channel": "web", "locale": "fr-BE"})
            history = conn.execute("SELECT convctx.recent_turns_json('types', 10)").fetchone()[0]
            self.assertIsInstance(history, list)
            self.assertEqual([h["question_neutral"] for h in history], list(self.TEXTS.values()))
            sizes = conn.execute(
                "SELECT octet_length(question_neutral) FROM convctx.recent_turns('types', 10)").fetchall()
            self.assertEqual([s[0] for s in sizes], [len(t.encode()) for t in self.TEXTS.values()])


class Errors(unittest.TestCase):
    def assertSqlstate(self, conn, query, params, sqlstate, pattern):
        with self.assertRaises(psycopg.Error) as caught:
            conn.execute(query, params)
        self.assertEqual(caught.exception.sqlstate, sqlstate, str(caught.exception))
        self.assertRegex(caught.exception.diag.message_primary or "", pattern)

    def test_every_documented_error_reaches_the_app(self):
        with connector("py_app")() as app:
            turn = app.execute("SELECT convctx.start_turn('errors', 'r1', 'Q')").fetchone()[0]
            app.execute("SELECT convctx.finalize_turn('errors', %s, 'A')", (turn,))
            app.execute("SELECT convctx.link_session('user-1', 'errors')")
            self.assertSqlstate(app, "SELECT convctx.link_session('user-2', 'errors')", None,
                                "CV001", "already linked to another identity")
            self.assertSqlstate(app, "SELECT convctx.finalize_turn('errors', %s, 'other')", (turn,),
                                "55000", "finalized")
            self.assertSqlstate(app, "SELECT convctx.start_turn('', 'r2', 'Q')", None, "22023", "session_id")
            self.assertSqlstate(app, "SELECT convctx.start_turn(NULL, 'r2', 'Q')", None, "22004",
                                "session_id must not be null")
            self.assertSqlstate(app, "SELECT convctx.finalize_turn('errors', %s, 'A')",
                                (uuid.UUID(int=1),), "P0002", "turn")
            self.assertSqlstate(app, "SELECT convctx.start_turn(%s, 'r', 'Q')", ("x" * 1025,), "54000", "too long")
        with psycopg.connect(dbname=DB, user="py_app", password=PASSWORD, autocommit=True,
                             options="-c convctx.tenant=globex") as elsewhere:
            self.assertSqlstate(elsewhere, "SELECT convctx.current_tenant()", None, "42501",
                                'permission denied for tenant "globex"')
        with connector("py_unbound")() as unbound:
            self.assertSqlstate(unbound, "SELECT convctx.current_tenant()", None, "42501", "not bound to a tenant")
        with connector("py_service")() as service:
            self.assertSqlstate(service, "SELECT convctx.use_tenant('acme')", None, "25P01", "transaction blocks")
            self.assertSqlstate(service, "SELECT convctx.current_tenant()", None, "42501",
                                "not set in this transaction")
        # the psycopg classes apps catch
        with connector("py_app")() as app:
            with self.assertRaises(errors.InsufficientPrivilege):
                app.execute("SELECT convctx.admin_stats()")
            with self.assertRaises(errors.ObjectNotInPrerequisiteState):
                app.execute("SELECT convctx.finalize_turn('errors', %s, 'other')", (turn,))
        self.assertEqual(sql("SELECT count(*) FROM convctx.turn WHERE session_id = 'errors'"), [(1,)])


def lock_session(tenant, session):
    """Hold the session's row lock as the superuser; close() or rollback() releases it."""
    holder = psycopg.connect(dbname=DB)
    holder.execute("SELECT 1 FROM convctx.session WHERE tenant_id = %s AND session_id = %s FOR UPDATE",
                   (tenant, session))
    return holder


def kill_waiter(user):
    """Terminate the backends of user that wait for a lock, once one does."""
    for _ in range(400):
        killed = sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                     " WHERE usename = %s AND wait_event_type = 'Lock'", (user,))
        if killed:
            return len(killed)
        time.sleep(0.025)
    raise AssertionError(f"no backend of {user} waited for a lock")


class KilledBackends(unittest.TestCase):
    def run_in_thread(self, fn):
        out = {}

        def target():
            try:
                out["result"] = fn()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                out["error"] = e
        t = threading.Thread(target=target)
        t.start()
        return t, out

    def test_retry_after_a_killed_backend_stores_one_turn(self):
        connect = connector("py_service")
        base = {"tenant": "acme", "session_id": "killed", "question": "Q"}
        handle_chat(connect, {**base, "request_id": "warm-up"}, answer_of)

        # killed while begin_turn waits for the session
        holder = lock_session("acme", "killed")
        t, out = self.run_in_thread(lambda: handle_chat(connect, {**base, "request_id": "r-start"}, answer_of))
        self.assertEqual(kill_waiter("py_service"), 1)
        holder.rollback()
        holder.close()
        t.join(60)
        self.assertNotIn("error", out)
        start_turn_id = out["result"][0]

        # killed while finalize_turn waits: the lock is taken while the model "thinks"
        holders = []

        def slow_model(history, question, context):
            holders.append(lock_session("acme", "killed"))
            return answer_of(history, question)
        t, out = self.run_in_thread(lambda: handle_chat(connect, {**base, "request_id": "r-finalize"}, slow_model))
        while not holders and t.is_alive():
            time.sleep(0.01)
        self.assertEqual(kill_waiter("py_service"), 1)
        holders[0].rollback()
        holders[0].close()
        t.join(60)
        self.assertNotIn("error", out)
        finalize_turn_id = out["result"][0]

        rows = sql("SELECT request_id, count(*), count(finalized_at), min(turn_id::text) FROM convctx.turn"
                   " WHERE tenant_id = 'acme' AND session_id = 'killed' GROUP BY 1 ORDER BY 1")
        self.assertEqual([r[:3] for r in rows], [("r-finalize", 1, 1), ("r-start", 1, 1), ("warm-up", 1, 1)])
        self.assertEqual(rows[0][3], str(finalize_turn_id))
        self.assertEqual(rows[1][3], str(start_turn_id))
        again = handle_chat(connect, {**base, "request_id": "r-start"}, lambda h, q, c: self.fail("asked again"))
        self.assertEqual(again[0], start_turn_id)


class PreparedStatements(unittest.TestCase):
    def test_automatic_preparation_over_many_calls(self):
        with connector("py_app", prepare_threshold=0)() as conn:
            for i in range(1, 201):
                turn = conn.execute("SELECT convctx.start_turn(%s, %s, %s)",
                                    ("prepared", f"r{i}", f"question {i}")).fetchone()[0]
                conn.execute("SELECT convctx.finalize_turn(%s, %s, %s)", ("prepared", turn, f"answer {i}"))
                history = conn.execute(
                    "SELECT question_neutral, answer_neutral FROM convctx.recent_turns(%s, %s)",
                    ("prepared", 3)).fetchall()
                self.assertEqual(history[-1], (f"question {i}", f"answer {i}"))
                self.assertEqual(len(history), min(i, 3))
            prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            statements = " ".join(p[0] for p in prepared)
            for fn in ("start_turn", "finalize_turn", "recent_turns"):
                self.assertRegex(statements, re.escape(f"convctx.{fn}("))


class ReadmeExcerpt(unittest.TestCase):
    def test_the_readme_python_is_the_example_code(self):
        top = os.path.join(os.path.dirname(__file__), "..", "..", "..")
        with open(os.path.join(top, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        with open(os.path.join(top, "examples", "python", "chat.py"), encoding="utf-8") as f:
            example = f.read()
        # the README links the example and shows no Python that is not the example's
        self.assertIn("(examples/python/chat.py)", readme)
        blocks = re.findall(r"^```python\n(.*?)^```$", readme, re.M | re.S)
        for b in blocks:
            self.assertIn(b, example)


if __name__ == "__main__":
    unittest.main()
