-- Credentials a server issued, one per kind and name: a node's (kind
-- 'node', at its cluster), a cluster's (kind 'cluster', at root) and root's
-- (kind 'root', at a cluster), kept as the SHA-256 of the token so that a
-- copy of the database does not let anyone act as them. Root also keeps the
-- token it presents to each cluster (kind 'root-to-cluster', named by the
-- cluster) in secret, since it must send it. created_at: unix nanoseconds.
CREATE TABLE credentials (
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    hash       TEXT    NOT NULL,
    secret     TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
) STRICT, WITHOUT ROWID;

CREATE INDEX credentials_hash ON credentials (hash);
