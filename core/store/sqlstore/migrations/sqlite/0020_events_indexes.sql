-- Migration 0020 changes PostgreSQL's event indexes only; SQLite's were
-- narrowed in 0013.
SELECT 1;
