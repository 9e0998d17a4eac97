-- Replacement instances, drains and automatic cordon/drain (issue 14,
-- items 6 and 8). A compute may hold a second, next instance on another
-- node while its current one runs (a drain, a surge update): its own
-- assignment (next_assignment, on next_node, which that node's agent
-- receives) and its own reservation, so reservations are keyed by
-- (compute, node). next_revision is the spec revision the next instance
-- runs.
ALTER TABLE computes ADD COLUMN next_node       TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE computes ADD COLUMN next_assignment BYTEA;
ALTER TABLE computes ADD COLUMN next_revision   BIGINT NOT NULL DEFAULT 0;
CREATE INDEX computes_next_node ON computes (next_node, name);

ALTER TABLE reservations DROP CONSTRAINT reservations_pkey;
ALTER TABLE reservations ADD PRIMARY KEY (compute, node);

-- A node's drain (a NodeDrain) and its automatic cordon/drain settings (a
-- NodeAuto), kept beside the body the agent writes.
ALTER TABLE nodes ADD COLUMN drain BYTEA;
ALTER TABLE nodes ADD COLUMN auto  BYTEA;
