-- The event pipeline: ingest order, explanations, rules, alerts, outbox.

-- seq orders the pipeline's work; assigned from counters.event_seq in the
-- inserting transaction, whose row lock makes commit order seq order.
ALTER TABLE events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN explanation BYTEA;
ALTER TABLE events ADD COLUMN silenced_by TEXT NOT NULL DEFAULT '';
CREATE INDEX events_seq ON events (seq);
ALTER TABLE latest_events ADD COLUMN explanation BYTEA;
ALTER TABLE latest_events ADD COLUMN silenced_by TEXT NOT NULL DEFAULT '';
INSERT INTO counters (name, value) VALUES ('event_seq', 0), ('rules_revision', 0), ('pipeline_cursor', 0);

CREATE TABLE objects (
    kind       TEXT COLLATE "C" NOT NULL,
    name       TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    matched    BIGINT NOT NULL DEFAULT 0,
    body       BYTEA  NOT NULL,
    PRIMARY KEY (kind, name)
);

CREATE TABLE pipeline_checks (
    node        TEXT COLLATE "C" NOT NULL,
    check_name  TEXT COLLATE "C" NOT NULL,
    occ_level   INTEGER NOT NULL,
    occ_count   INTEGER NOT NULL,
    issue_level INTEGER NOT NULL,
    issued_at   BIGINT  NOT NULL,
    PRIMARY KEY (node, check_name)
);

CREATE TABLE aggregate_groups (
    rule TEXT COLLATE "C" NOT NULL,
    key  TEXT COLLATE "C" NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (rule, key)
);

CREATE TABLE alerts (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    key        TEXT COLLATE "C" NOT NULL,
    state      INTEGER NOT NULL,
    level      INTEGER NOT NULL,
    node       TEXT COLLATE "C" NOT NULL,
    check_name TEXT COLLATE "C" NOT NULL,
    first_seen BIGINT  NOT NULL,
    body       BYTEA   NOT NULL
);
CREATE UNIQUE INDEX alerts_active_key ON alerts (key) WHERE state != 4;
CREATE INDEX alerts_state ON alerts (state, first_seen);

CREATE TABLE hooks (
    key        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    rule       TEXT   NOT NULL,
    event_id   TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    hook       BYTEA  NOT NULL,
    body       BYTEA  NOT NULL
);
