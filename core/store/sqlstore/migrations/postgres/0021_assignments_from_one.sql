-- The assignments counter starts at 1, so that generation 0 always means
-- "never fetched": an agent's long poll can then wait on every answer,
-- including a cluster's that never assigned anything.
UPDATE counters SET value = 1 WHERE name = 'assignments' AND value = 0;
