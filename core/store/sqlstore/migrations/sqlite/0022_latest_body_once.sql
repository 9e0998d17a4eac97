-- An event's body is written once, into its history row (issue 10): the
-- latest state holds the columns it is looked up and ordered by and the
-- seq of its event, whose history row has the body. Every result used to
-- write its body twice, and the latest row's copy made the latest table's
-- B-tree pages hold a few rows each instead of dozens.
--
-- The latest state outlives pruned history: when the history row a latest
-- row refers to is deleted, the trigger below copies its body into the
-- latest row, so body is NULL exactly while the history row exists.
-- Readers go through latest_event_rows, which takes whichever holds it.
CREATE TABLE latest_events_0022 (
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    level      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    seq        INTEGER NOT NULL DEFAULT 0,
    body       BLOB,
    PRIMARY KEY (node, check_name)
) STRICT, WITHOUT ROWID;
INSERT INTO latest_events_0022 (node, check_name, id, level, started_at, seq, body)
    SELECT l.node, l.check_name, l.id, l.level, l.started_at, l.seq,
        CASE WHEN EXISTS (SELECT 1 FROM events e WHERE e.seq = l.seq AND e.id = l.id) THEN NULL ELSE l.body END
    FROM latest_events l;
DROP TABLE latest_events;
ALTER TABLE latest_events_0022 RENAME TO latest_events;

CREATE TRIGGER events_keep_latest_body AFTER DELETE ON events
FOR EACH ROW BEGIN
    UPDATE latest_events SET body = OLD.body
    WHERE node = OLD.node AND check_name = OLD.check_name AND seq = OLD.seq AND body IS NULL;
END;

CREATE VIEW latest_event_rows AS
    SELECT l.node, l.check_name, l.id, l.level, l.started_at, l.seq, COALESCE(l.body, e.body) AS body
    FROM latest_events l LEFT JOIN events e ON l.body IS NULL AND e.seq = l.seq;
