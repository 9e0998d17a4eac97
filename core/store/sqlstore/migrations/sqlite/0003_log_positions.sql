-- The last log line stored per node and tailed file (file_id is the agent's
-- "device:inode"), to drop resent and replayed lines. updated_at (unix
-- nanoseconds) lets stale files be forgotten.
CREATE TABLE log_positions (
    node       TEXT   NOT NULL,
    file_id    TEXT   NOT NULL,
    sequence   INTEGER NOT NULL,
    log_offset INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (node, file_id)
) STRICT, WITHOUT ROWID;
