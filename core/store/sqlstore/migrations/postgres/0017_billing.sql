-- Billing by reserved time (issue 14, item 10). One row per reservation a
-- compute held on a node, written in the transaction that reserves it
-- (started_at) and closed in the one that releases it (ended_at, NULL while
-- held), with the price per hour it accrues at. Rows are intervals, never
-- counters: a report sums what of each falls in its period.
CREATE TABLE billing_ledger (
    id             BIGSERIAL PRIMARY KEY,
    compute        TEXT COLLATE "C" NOT NULL,
    service        TEXT COLLATE "C" NOT NULL,
    flavor         TEXT COLLATE "C" NOT NULL,
    node           TEXT COLLATE "C" NOT NULL,
    cluster        TEXT COLLATE "C" NOT NULL,
    price_per_hour DOUBLE PRECISION NOT NULL,
    started_at     BIGINT NOT NULL,
    ended_at       BIGINT
);
CREATE INDEX billing_ledger_open ON billing_ledger (compute, node) WHERE ended_at IS NULL;
CREATE INDEX billing_ledger_period ON billing_ledger (started_at, ended_at);
