-- Migration 0022 changes PostgreSQL's event indexes only; SQLite's were
-- narrowed in 0013.
SELECT 1;
