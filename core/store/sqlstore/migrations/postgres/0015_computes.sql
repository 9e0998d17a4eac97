-- Provisioning, part 2 (issue 14), the cluster's side. A node's scheduling
-- state: cordoned and draining nodes take no new replicas; generation moves
-- on every reservation, release and change of schedulability, and a
-- placement commits only against the generation it was chosen at.
ALTER TABLE nodes ADD COLUMN cordoned   BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN draining   BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;

-- The Computes root placed on this cluster (desired spec and status in
-- body), each with its Assignment once the node stage placed it. deleting
-- is set when root no longer wants the compute; assign_gen is the value of
-- the assignments counter when its assignment last changed.
CREATE TABLE computes (
    name       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    service    TEXT COLLATE "C" NOT NULL,
    node       TEXT COLLATE "C" NOT NULL DEFAULT '',
    deleting   BIGINT  NOT NULL DEFAULT 0,
    assign_gen BIGINT  NOT NULL DEFAULT 0,
    assignment BYTEA,
    body       BYTEA  NOT NULL
);
CREATE INDEX computes_node ON computes (node, name);

-- One reservation per placed compute: the resources it holds on its node.
CREATE TABLE reservations (
    compute      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    service      TEXT COLLATE "C" NOT NULL,
    node         TEXT COLLATE "C" NOT NULL,
    vcpus        BIGINT  NOT NULL,
    memory_bytes BIGINT  NOT NULL,
    disk_bytes   BIGINT  NOT NULL,
    reserved_at  BIGINT  NOT NULL
);
CREATE INDEX reservations_node ON reservations (node);
CREATE INDEX reservations_service ON reservations (service);

-- assignments moves on every change of any assignment; agents long-poll it.
INSERT INTO counters (name, value) VALUES ('assignments', 0);
