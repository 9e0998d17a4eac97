-- Reserved for the identity work (per-node and per-cluster credentials),
-- which owns version 6; this placeholder keeps versions gapless on the rbac
-- branch and is replaced by identity's 0006 when both are merged.
SELECT 1;
