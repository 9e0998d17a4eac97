-- Provisioning, part 4 (issue 16), the cluster's side. The Loadbalancers
-- root placed on this cluster (desired spec, VIP, backends and status in
-- body), each with its Assignment once it was placed on a node. A table of
-- their own rather than a kind column of computes: a load balancer holds
-- no reservation, has no replacement, drain or billing, and every one of
-- those paths reads computes. deleting is set when root no longer wants it.
CREATE TABLE loadbalancers (
    name       TEXT NOT NULL PRIMARY KEY,
    node       TEXT NOT NULL DEFAULT '',
    deleting   INTEGER NOT NULL DEFAULT 0,
    assignment BLOB,
    body       BLOB NOT NULL
) STRICT;
CREATE INDEX loadbalancers_node ON loadbalancers (node, name);
