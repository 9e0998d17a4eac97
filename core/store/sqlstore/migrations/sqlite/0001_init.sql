-- unyo state store, SQLite. Timestamps are unix nanoseconds (0 = unset).
-- body holds the whole protobuf message; the other columns are copies for
-- filtering and ordering, and for nodes/clusters/checks the authoritative
-- value of fields the store itself maintains (state, timestamps, revision).

CREATE TABLE nodes (
    name           TEXT    NOT NULL PRIMARY KEY,
    state          INTEGER NOT NULL,
    registered_at  INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL,
    body           BLOB    NOT NULL
) STRICT;

CREATE TABLE checks (
    name       TEXT    NOT NULL PRIMARY KEY,
    revision   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    body       BLOB    NOT NULL
) STRICT;

-- Named counters; checks_revision advances on every change to checks.
CREATE TABLE counters (
    name  TEXT    NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT;
INSERT INTO counters (name, value) VALUES ('checks_revision', 0);

-- Every stored result; id is the agent's idempotency key.
CREATE TABLE events (
    id         TEXT    NOT NULL PRIMARY KEY,
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    level      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    body       BLOB    NOT NULL
) STRICT;
-- History of one node/check, and pruning per node/check. Without id in the
-- keys: indexes are most of what an insert writes, and ties in started_at,
-- which id breaks, are rare enough to sort.
CREATE INDEX events_node_check_started ON events (node, check_name, started_at);
-- History across everything, newest first.
CREATE INDEX events_started ON events (started_at);

-- The newest result per node and check. WITHOUT ROWID: rows live in the
-- primary key's B-tree, so an upsert writes one B-tree instead of two.
CREATE TABLE latest_events (
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    level      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    body       BLOB    NOT NULL,
    PRIMARY KEY (node, check_name)
) STRICT, WITHOUT ROWID;
CREATE INDEX latest_events_id ON latest_events (id);

CREATE TABLE clusters (
    name          TEXT    NOT NULL PRIMARY KEY,
    registered_at INTEGER NOT NULL,
    last_seen     INTEGER NOT NULL,
    body          BLOB    NOT NULL
) STRICT;

CREATE TABLE leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
