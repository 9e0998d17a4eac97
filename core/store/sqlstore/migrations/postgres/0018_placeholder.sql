-- Placeholder for migration 0018, which another branch of session 8 adds
-- (migrations run 1, 2, 3... without gaps). Drop this file when merging
-- that branch's 0018.
SELECT 1;
