-- An event's body is written once, into its history row (issue 10): the
-- latest state holds the columns it is looked up and ordered by and the
-- seq of its event, whose history row has the body. Every result used to
-- write its body twice (on PostgreSQL, into a new version of the latest
-- row each time).
--
-- The latest state outlives pruned history: when the history row a latest
-- row refers to is deleted, the trigger below copies its body into the
-- latest row, so body is NULL exactly while the history row exists.
-- Readers go through latest_event_rows, which takes whichever holds it.
ALTER TABLE latest_events ALTER COLUMN body DROP NOT NULL;
UPDATE latest_events AS l SET body = NULL FROM events AS e WHERE e.seq = l.seq AND e.id = l.id;

CREATE FUNCTION events_keep_latest_body() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE latest_events SET body = OLD.body
    WHERE node = OLD.node AND check_name = OLD.check_name AND seq = OLD.seq AND body IS NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_keep_latest_body AFTER DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_keep_latest_body();

CREATE VIEW latest_event_rows AS
    SELECT l.node, l.check_name, l.id, l.level, l.started_at, l.seq, COALESCE(l.body, e.body) AS body
    FROM latest_events l LEFT JOIN events e ON l.body IS NULL AND e.seq = l.seq;
