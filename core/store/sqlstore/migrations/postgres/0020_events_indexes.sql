-- The event path writes less per result (issue 10).
--
-- The history indexes lose id from their keys, as SQLite's did in 0013:
-- a UUID in every entry made them twice as wide, and an insert writes
-- every index of the table. Ties in started_at, which id breaks, are rare
-- enough to sort (an incremental sort on top of the index).
DROP INDEX events_node_check_started;
CREATE INDEX events_node_check_started ON events (node, check_name, started_at);
DROP INDEX events_started;
CREATE INDEX events_started ON events (started_at);

-- Rows the pipeline rewrites in place, once or more per pass, and whose
-- indexed columns those writes do not change: free room in their pages
-- lets PostgreSQL update them there (a HOT update), without a new entry
-- in every index and without the dead tuple waiting for vacuum.
ALTER TABLE latest_events SET (fillfactor = 70);
ALTER TABLE pipeline_checks SET (fillfactor = 70);
ALTER TABLE alerts SET (fillfactor = 80);
