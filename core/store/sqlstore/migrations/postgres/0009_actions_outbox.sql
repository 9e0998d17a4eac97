-- The hook outbox carries webhooks and action plugin runs: it is the
-- actions outbox.
ALTER TABLE hooks RENAME TO actions_outbox;
