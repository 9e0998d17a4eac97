-- Explanations move out of the event rows into a table of their own, keyed
-- by the event's seq and written once: the pipeline inserts one row per
-- processed event instead of updating (in PostgreSQL: copying) the event's
-- history row and its latest row after the fact. latest_events gains the
-- seq of the event it holds, to find its explanation.
CREATE TABLE explanations (
    seq         BIGINT NOT NULL PRIMARY KEY,
    silenced_by TEXT   NOT NULL DEFAULT '',
    explanation BYTEA  NOT NULL
);

ALTER TABLE latest_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE latest_events AS l SET seq = e.seq FROM events AS e WHERE e.id = l.id AND e.seq > 0;
-- Latest rows whose history was pruned keep their explanation under a
-- negative seq of their own, which no event takes.
UPDATE latest_events AS l SET seq = -r.n
    FROM (SELECT node, check_name, ROW_NUMBER() OVER (ORDER BY node, check_name) AS n FROM latest_events WHERE seq = 0) AS r
    WHERE r.node = l.node AND r.check_name = l.check_name;

INSERT INTO explanations (seq, silenced_by, explanation)
    SELECT seq, silenced_by, explanation FROM events WHERE explanation IS NOT NULL AND seq > 0
    ON CONFLICT (seq) DO NOTHING;
INSERT INTO explanations (seq, silenced_by, explanation)
    SELECT seq, silenced_by, explanation FROM latest_events WHERE explanation IS NOT NULL AND seq < 0;

ALTER TABLE events DROP COLUMN explanation, DROP COLUMN silenced_by;
ALTER TABLE latest_events DROP COLUMN explanation, DROP COLUMN silenced_by;
-- Found by id only when an event's history was pruned (GetEvent): not
-- worth an index write on every result.
DROP INDEX latest_events_id;
