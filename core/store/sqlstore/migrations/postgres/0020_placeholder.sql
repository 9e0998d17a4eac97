-- Placeholder for migration 0020, which another branch of session 8 adds
-- (migrations run 1, 2, 3... without gaps). Drop this file when merging
-- that branch's 0020.
SELECT 1;
