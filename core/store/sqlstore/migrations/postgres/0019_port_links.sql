-- Per-port network namespaces (issue 15, item 3). Each reservation of a
-- compute on a node holds a link address from the node's 169.254.32.0/19
-- (slot 0..8191 is 169.254.32.0 + slot): written in the transaction that
-- writes the reservation, deleted in the one that releases it, so it
-- survives agent restarts and no two live ports of a node share one.
CREATE TABLE port_links (
    compute TEXT COLLATE "C" NOT NULL,
    node    TEXT COLLATE "C" NOT NULL,
    slot    INTEGER NOT NULL,
    PRIMARY KEY (compute, node),
    UNIQUE (node, slot)
);
-- Reservations made before this migration get theirs now.
INSERT INTO port_links (compute, node, slot)
    SELECT compute, node, ROW_NUMBER() OVER (PARTITION BY node ORDER BY compute) - 1 FROM reservations;
