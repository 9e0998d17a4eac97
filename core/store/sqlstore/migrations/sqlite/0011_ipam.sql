-- IP address management (issue 13): each row is one address of a network
-- (a Network object's name, or a node's "node-local/NODE") as a number,
-- held by holder since allocated_at. A release sets released_at and the
-- end of the address's quarantine, reusable_at; the row blocks the address
-- until then and is reused (overwritten) by a later allocation. While
-- held, released_at and reusable_at are 0; a holder holds at most one
-- address per network, which makes a retried allocation idempotent.
CREATE TABLE ip_allocations (
    network      TEXT    NOT NULL,
    address      INTEGER NOT NULL,
    holder       TEXT    NOT NULL,
    allocated_at INTEGER NOT NULL,
    released_at  INTEGER NOT NULL DEFAULT 0,
    reusable_at  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (network, address)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX ip_allocations_holder ON ip_allocations (network, holder) WHERE released_at = 0;

-- Per network, where the next allocation starts looking; its row is also
-- what allocations, and changes and deletes of the network, lock first, so
-- that root replicas on one PostgreSQL take turns per network.
CREATE TABLE ip_cursors (
    network TEXT    NOT NULL PRIMARY KEY,
    next    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
