-- Explanations move out of the event rows into a table of their own, keyed
-- by the event's seq and written once: the pipeline inserts one row per
-- processed event (appended to the end of the table's B-tree) instead of
-- rewriting the event's history row and its latest row after the fact.
-- latest_events gains the seq of the event it holds, to find its
-- explanation; events is keyed by seq, so that the pipeline reads it in
-- key order and an insert writes one index fewer.
CREATE TABLE explanations (
    seq         INTEGER NOT NULL PRIMARY KEY,
    silenced_by TEXT    NOT NULL DEFAULT '',
    explanation BLOB    NOT NULL
) STRICT;

ALTER TABLE latest_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE latest_events SET seq = COALESCE((SELECT seq FROM events WHERE events.id = latest_events.id AND events.seq > 0), 0);
-- Latest rows whose history was pruned keep their explanation under a
-- negative seq of their own, below those events stored before the pipeline
-- existed (seq 0) take below.
UPDATE latest_events SET seq = -(SELECT COALESCE(MAX(rowid), 0) FROM events) - (
    SELECT n FROM (SELECT node, check_name, ROW_NUMBER() OVER (ORDER BY node, check_name) AS n FROM latest_events WHERE seq = 0) AS r
    WHERE r.node = latest_events.node AND r.check_name = latest_events.check_name)
WHERE seq = 0;

INSERT INTO explanations (seq, silenced_by, explanation)
    SELECT seq, silenced_by, explanation FROM events WHERE explanation IS NOT NULL AND seq > 0
    ON CONFLICT (seq) DO NOTHING;
INSERT INTO explanations (seq, silenced_by, explanation)
    SELECT seq, silenced_by, explanation FROM latest_events WHERE explanation IS NOT NULL AND seq < 0;

CREATE TABLE events_by_seq (
    seq        INTEGER NOT NULL PRIMARY KEY,
    id         TEXT    NOT NULL,
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    level      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    body       BLOB    NOT NULL
) STRICT;
INSERT INTO events_by_seq (seq, id, node, check_name, level, started_at, body)
    SELECT CASE WHEN seq > 0 THEN seq ELSE -rowid END, id, node, check_name, level, started_at, body
    FROM events ORDER BY seq, rowid;
DROP TABLE events;
ALTER TABLE events_by_seq RENAME TO events;
-- The agent's idempotency key.
CREATE UNIQUE INDEX events_id ON events (id);
-- History of one node/check, and pruning per node/check. Without id in the
-- keys: indexes are most of what an insert writes, and ties in started_at,
-- which id breaks, are rare enough to sort.
CREATE INDEX events_node_check_started ON events (node, check_name, started_at);
-- History across everything, newest first.
CREATE INDEX events_started ON events (started_at);

ALTER TABLE latest_events DROP COLUMN explanation;
ALTER TABLE latest_events DROP COLUMN silenced_by;
-- Found by id only when an event's history was pruned (GetEvent): not
-- worth an index write on every result.
DROP INDEX latest_events_id;
