-- Replacement instances, drains and automatic cordon/drain (issue 14,
-- items 6 and 8). A compute may hold a second, next instance on another
-- node while its current one runs (a drain, a surge update): its own
-- assignment (next_assignment, on next_node, which that node's agent
-- receives) and its own reservation, so reservations are keyed by
-- (compute, node). next_revision is the spec revision the next instance
-- runs.
ALTER TABLE computes ADD COLUMN next_node       TEXT    NOT NULL DEFAULT '';
ALTER TABLE computes ADD COLUMN next_assignment BLOB;
ALTER TABLE computes ADD COLUMN next_revision   INTEGER NOT NULL DEFAULT 0;
CREATE INDEX computes_next_node ON computes (next_node, name);

CREATE TABLE reservations_new (
    compute      TEXT    NOT NULL,
    service      TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    vcpus        INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    disk_bytes   INTEGER NOT NULL,
    reserved_at  INTEGER NOT NULL,
    PRIMARY KEY (compute, node)
) STRICT;
INSERT INTO reservations_new SELECT compute, service, node, vcpus, memory_bytes, disk_bytes, reserved_at FROM reservations;
DROP TABLE reservations;
ALTER TABLE reservations_new RENAME TO reservations;
CREATE INDEX reservations_node ON reservations (node);
CREATE INDEX reservations_service ON reservations (service);

-- A node's drain (a NodeDrain) and its automatic cordon/drain settings (a
-- NodeAuto), kept beside the body the agent writes.
ALTER TABLE nodes ADD COLUMN drain BLOB;
ALTER TABLE nodes ADD COLUMN auto  BLOB;
