-- References between objects (issue 13): a Rack names its Floor, a
-- PhysicalResource its Rack and the resources its ports are cabled to.
-- Each row is one reference an object makes through one field, kept by
-- the transaction that stores the object; the index on the target answers
-- "who refers to this?" when it is deleted without scanning every object.
CREATE TABLE object_refs (
    kind        TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    field       TEXT COLLATE "C" NOT NULL,
    target_kind TEXT COLLATE "C" NOT NULL,
    target_name TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (kind, name, field, target_kind, target_name)
);
CREATE INDEX object_refs_target ON object_refs (target_kind, target_name);
