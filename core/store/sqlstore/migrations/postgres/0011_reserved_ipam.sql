-- Placeholder on the inventory branch only: number 0011 belongs to the ipam
-- branch, whose file replaces this one when both are merged.
SELECT 1;
