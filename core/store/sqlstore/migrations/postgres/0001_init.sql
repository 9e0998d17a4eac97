-- unyo state store, PostgreSQL. Timestamps are unix nanoseconds (0 = unset).
-- body holds the whole protobuf message; the other columns are copies for
-- filtering and ordering, and for nodes/clusters/checks the authoritative
-- value of fields the store itself maintains (state, timestamps, revision).
-- Names use the "C" collation so that they sort bytewise, as on SQLite,
-- whatever the database's locale.

CREATE TABLE nodes (
    name           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    state          INTEGER NOT NULL,
    registered_at  BIGINT  NOT NULL,
    last_heartbeat BIGINT  NOT NULL,
    body           BYTEA   NOT NULL
);

CREATE TABLE checks (
    name       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    revision   BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    body       BYTEA  NOT NULL
);

-- Named counters; checks_revision advances on every change to checks.
CREATE TABLE counters (
    name  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('checks_revision', 0);

-- Every stored result; id is the agent's idempotency key.
CREATE TABLE events (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    node       TEXT COLLATE "C" NOT NULL,
    check_name TEXT COLLATE "C" NOT NULL,
    level      INTEGER NOT NULL,
    started_at BIGINT  NOT NULL,
    body       BYTEA   NOT NULL
);
-- History of one node/check, and pruning per node/check.
CREATE INDEX events_node_check_started ON events (node, check_name, started_at DESC, id DESC);
-- History across everything, newest first.
CREATE INDEX events_started ON events (started_at DESC, id DESC);

-- The newest result per node and check.
CREATE TABLE latest_events (
    node       TEXT COLLATE "C" NOT NULL,
    check_name TEXT COLLATE "C" NOT NULL,
    id         TEXT COLLATE "C" NOT NULL,
    level      INTEGER NOT NULL,
    started_at BIGINT  NOT NULL,
    body       BYTEA   NOT NULL,
    PRIMARY KEY (node, check_name)
);
CREATE INDEX latest_events_id ON latest_events (id);

CREATE TABLE clusters (
    name          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    registered_at BIGINT NOT NULL,
    last_seen     BIGINT NOT NULL,
    body          BYTEA  NOT NULL
);

CREATE TABLE leases (
    name       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);
