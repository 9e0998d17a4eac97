-- One table for every kind of object (issue 10): checks join event rules
-- and maintenance records in objects, which gains the revision at which
-- each object last changed. The counts the pipeline adds to (rules'
-- matched events, maintenances' silenced ones) move to object_counts, so
-- that an object's row changes only when the object does. The checks table
-- is dropped: every row of it is in objects.
ALTER TABLE objects ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
INSERT INTO objects (kind, name, revision, created_at, updated_at, body)
    SELECT 'Check', name, revision, created_at, updated_at, body FROM checks;
DROP TABLE checks;

CREATE TABLE object_counts (
    kind  TEXT COLLATE "C" NOT NULL,
    name  TEXT COLLATE "C" NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (kind, name)
);
INSERT INTO object_counts (kind, name, count)
    SELECT kind, name, matched FROM objects WHERE matched <> 0;
ALTER TABLE objects DROP COLUMN matched;

-- objects_revision advances once per change of any objects;
-- 'revision:KIND' holds the objects_revision of the kind's last change.
-- They continue the old checks_revision and rules_revision, so agents and
-- pipelines see the revisions move on, never back.
INSERT INTO counters (name, value)
    SELECT 'objects_revision', MAX(value) FROM counters WHERE name IN ('checks_revision', 'rules_revision');
INSERT INTO counters (name, value)
    SELECT 'revision:Check', value FROM counters WHERE name = 'checks_revision';
INSERT INTO counters (name, value)
    SELECT 'revision:' || k.kind, c.value FROM counters c, (SELECT 'EventRule' AS kind UNION ALL SELECT 'Maintenance') k
    WHERE c.name = 'rules_revision';
DELETE FROM counters WHERE name IN ('checks_revision', 'rules_revision');
