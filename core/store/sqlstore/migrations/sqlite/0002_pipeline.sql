-- The event pipeline: ingest order, explanations, rules, alerts, outbox.

-- seq orders the pipeline's work; assigned from counters.event_seq in the
-- inserting transaction, so commit order is seq order.
ALTER TABLE events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN explanation BLOB;
ALTER TABLE events ADD COLUMN silenced_by TEXT NOT NULL DEFAULT '';
CREATE INDEX events_seq ON events (seq);
ALTER TABLE latest_events ADD COLUMN explanation BLOB;
ALTER TABLE latest_events ADD COLUMN silenced_by TEXT NOT NULL DEFAULT '';
INSERT INTO counters (name, value) VALUES ('event_seq', 0), ('rules_revision', 0), ('pipeline_cursor', 0);

-- Event rules and maintenance records; matched counts rule matches and
-- events a maintenance silenced.
CREATE TABLE objects (
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    matched    INTEGER NOT NULL DEFAULT 0,
    body       BLOB    NOT NULL,
    PRIMARY KEY (kind, name)
) STRICT, WITHOUT ROWID;

-- Occurrences and reissue windows per node/check.
CREATE TABLE pipeline_checks (
    node        TEXT    NOT NULL,
    check_name  TEXT    NOT NULL,
    occ_level   INTEGER NOT NULL,
    occ_count   INTEGER NOT NULL,
    issue_level INTEGER NOT NULL,
    issued_at   INTEGER NOT NULL,
    PRIMARY KEY (node, check_name)
) STRICT, WITHOUT ROWID;

CREATE TABLE aggregate_groups (
    rule TEXT NOT NULL,
    key  TEXT NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (rule, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE alerts (
    id         TEXT    NOT NULL PRIMARY KEY,
    key        TEXT    NOT NULL,
    state      INTEGER NOT NULL,
    level      INTEGER NOT NULL,
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    first_seen INTEGER NOT NULL,
    body       BLOB    NOT NULL
) STRICT;
-- At most one alert per key is not closed.
CREATE UNIQUE INDEX alerts_active_key ON alerts (key) WHERE state != 4;
CREATE INDEX alerts_state ON alerts (state, first_seen);

-- ApiHook deliveries waiting to be made (at least once).
CREATE TABLE hooks (
    key        TEXT    NOT NULL PRIMARY KEY,
    rule       TEXT    NOT NULL,
    event_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    hook       BLOB    NOT NULL,
    body       BLOB    NOT NULL
) STRICT;
