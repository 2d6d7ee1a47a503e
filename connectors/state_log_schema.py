"""The SQLite chat state's tables (:mod:`connectors.state_log`), and the columns added to a state file made by an
earlier version: what each table holds is in ``state_log``'s docstring."""

from __future__ import annotations

import sqlite3

TABLES = """
CREATE TABLE IF NOT EXISTS answers (
    platform TEXT NOT NULL,
    message_ref TEXT NOT NULL,
    thread_ref TEXT NOT NULL,
    scope TEXT NOT NULL,
    user TEXT NOT NULL,
    question TEXT NOT NULL,
    answer_json TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (platform, message_ref)
);
CREATE INDEX IF NOT EXISTS answers_thread ON answers (platform, thread_ref, at);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    platform TEXT NOT NULL,
    message_ref TEXT NOT NULL,
    scope TEXT NOT NULL,
    user TEXT NOT NULL,
    polarity TEXT NOT NULL CHECK (polarity IN ('up', 'down')),
    comment TEXT NOT NULL DEFAULT '',
    choice TEXT NOT NULL DEFAULT '',
    at TEXT NOT NULL,
    retracted_at TEXT,
    UNIQUE (platform, message_ref, user)
);
CREATE TABLE IF NOT EXISTS work_items (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    who TEXT NOT NULL DEFAULT '',
    tenant TEXT NOT NULL DEFAULT '',
    taken_at REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS work_items_open ON work_items (state, kind, created);
CREATE TABLE IF NOT EXISTS uploads (
    platform TEXT NOT NULL,
    file_ref TEXT NOT NULL,
    scope TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    user TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (platform, file_ref, scope)
);
CREATE INDEX IF NOT EXISTS uploads_doc ON uploads (platform, scope, doc_id);
CREATE TABLE IF NOT EXISTS assistant_threads (
    platform TEXT NOT NULL,
    thread_ref TEXT NOT NULL,
    user TEXT NOT NULL,
    context_channel TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (platform, thread_ref)
);
"""


# Columns of work_items added for fair takes: whose item it is, their tenant (a Slack team, a Teams tenant), and
# when it was last taken (a user's and a tenant's latest take order the next one).
_FAIR_COLUMNS = {"who": "TEXT NOT NULL DEFAULT ''", "tenant": "TEXT NOT NULL DEFAULT ''",
                 "taken_at": "REAL NOT NULL DEFAULT 0"}


def migrate(db: sqlite3.Connection) -> None:
    """Bring a state file made by an earlier version up to :data:`TABLES` (inside the caller's write transaction)."""
    # the claims of a version before the journal carried Teams' quick replies: a day's dedup, nothing to take over
    db.execute("DROP TABLE IF EXISTS seen_events")  # and its index, seen_events_at
    # a journal from before fair takes (who and tenant on each item): its items belong to nobody in particular
    have = {r[1] for r in db.execute("PRAGMA table_info(work_items)")}
    for name, decl in _FAIR_COLUMNS.items():
        if name not in have:
            db.execute(f"ALTER TABLE work_items ADD COLUMN {name} {decl}")
    db.execute("CREATE INDEX IF NOT EXISTS work_items_who ON work_items (who, taken_at)")
    db.execute("CREATE INDEX IF NOT EXISTS work_items_tenant ON work_items (tenant, taken_at)")
    db.execute("CREATE INDEX IF NOT EXISTS work_items_waiting ON work_items (who, state)")
    # a state file from before the 👎 form: its feedback rows have no choice
    if "choice" not in {r[1] for r in db.execute("PRAGMA table_info(feedback)")}:
        db.execute("ALTER TABLE feedback ADD COLUMN choice TEXT NOT NULL DEFAULT ''")
