"""One chat request with convctx through psycopg 3.

test/clients/python runs this file; copy it into your app. connect() returns
a new psycopg.Connection (autocommit=True; behind pgbouncer before 1.21 also
prepare_threshold=None).
"""
import psycopg
from psycopg import errors

# After these the request runs again with the SAME request id: the server may
# or may not have committed, and convctx makes the rerun safe (begin_turn
# returns the same turn, finalize_turn accepts the same answer again).
RETRYABLE = (psycopg.OperationalError, errors.SerializationFailure, errors.DeadlockDetected,
             errors.LockNotAvailable)


def with_retry(connect, fn, attempts=5):
    """fn(conn) on a fresh connection, again on a new one after a retryable error."""
    for attempt in range(1, attempts + 1):
        try:
            with connect() as conn:
                return fn(conn)
        except RETRYABLE:
            if attempt == attempts:
                raise


def in_tenant(conn, tenant, fn):
    """fn(conn) in one transaction that acts for tenant, and only in it."""
    with conn.transaction():
        conn.execute("SELECT convctx.use_tenant(%s)", (tenant,))
        return fn(conn)


# req: dict with tenant, session_id, request_id, question, identity_id
# (optional); answer(history, question, context) calls the model. Two calls,
# each its own transaction, each naming the tenant (no use_tenant needed
# behind a pooler). Returns (turn_id, answer, history); a repeated request
# returns the stored answer.
def handle_chat(connect, req, answer, history_turns=10):
    turn_id, stored, history, context = with_retry(connect, lambda conn: conn.execute(
        "SELECT turn_id, answer_neutral, history, context FROM convctx.begin_turn(%s, %s, %s, %s, %s, %s)",
        (req["session_id"], req["request_id"], req["question"], history_turns,
         req.get("identity_id"), req["tenant"])).fetchone())
    if stored is not None:  # answered before: this is a retry
        return turn_id, stored, history
    text = answer(history, req["question"], context)  # outside any transaction
    with_retry(connect, lambda conn: conn.execute(
        "SELECT convctx.finalize_turn(%s, %s, %s, tenant => %s)",
        (req["session_id"], turn_id, text, req["tenant"])))
    return turn_id, text, history


# The sidebar: identity_id's conversations, newest first, page_size at a
# time; pass the cursor of the last row for the next page (None first).
def list_conversations(connect, tenant, identity_id, cursor=None, page_size=20):
    return with_retry(connect, lambda c: in_tenant(c, tenant, lambda conn: conn.execute(
        "SELECT session_id, title, last_activity_at, live_turns, cursor"
        "  FROM convctx.list_conversations(%s, %s, %s)", (identity_id, cursor, page_size)).fetchall()))
