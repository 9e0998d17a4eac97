-- Provisioning, part 2 (issue 14), the cluster's side. A node's scheduling
-- state: cordoned and draining nodes take no new replicas; generation moves
-- on every reservation, release and change of schedulability, and a
-- placement commits only against the generation it was chosen at.
ALTER TABLE nodes ADD COLUMN cordoned   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN draining   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;

-- The Computes root placed on this cluster (desired spec and status in
-- body), each with its Assignment once the node stage placed it. deleting
-- is set when root no longer wants the compute; assign_gen is the value of
-- the assignments counter when its assignment last changed.
CREATE TABLE computes (
    name       TEXT    NOT NULL PRIMARY KEY,
    service    TEXT    NOT NULL,
    node       TEXT    NOT NULL DEFAULT '',
    deleting   INTEGER NOT NULL DEFAULT 0,
    assign_gen INTEGER NOT NULL DEFAULT 0,
    assignment BLOB,
    body       BLOB    NOT NULL
) STRICT;
CREATE INDEX computes_node ON computes (node, name);

-- One reservation per placed compute: the resources it holds on its node.
CREATE TABLE reservations (
    compute      TEXT    NOT NULL PRIMARY KEY,
    service      TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    vcpus        INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    disk_bytes   INTEGER NOT NULL,
    reserved_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX reservations_node ON reservations (node);
CREATE INDEX reservations_service ON reservations (service);

-- assignments moves on every change of any assignment; agents long-poll it.
INSERT INTO counters (name, value) VALUES ('assignments', 0);
