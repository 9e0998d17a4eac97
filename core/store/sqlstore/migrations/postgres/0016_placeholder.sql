-- Placeholder: version 16 belongs to another branch of session 7 (the
-- billing branch uses 0017 and the versions must be gapless). Delete this
-- file when that branch's 0016 is merged.
SELECT 1;
