-- Billing by reserved time (issue 14, item 10). One row per reservation a
-- compute held on a node, written in the transaction that reserves it
-- (started_at) and closed in the one that releases it (ended_at, NULL while
-- held), with the price per hour it accrues at. Rows are intervals, never
-- counters: a report sums what of each falls in its period.
CREATE TABLE billing_ledger (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    compute        TEXT    NOT NULL,
    service        TEXT    NOT NULL,
    flavor         TEXT    NOT NULL,
    node           TEXT    NOT NULL,
    cluster        TEXT    NOT NULL,
    price_per_hour REAL    NOT NULL,
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER
) STRICT;
CREATE INDEX billing_ledger_open ON billing_ledger (compute, node) WHERE ended_at IS NULL;
CREATE INDEX billing_ledger_period ON billing_ledger (started_at, ended_at);
