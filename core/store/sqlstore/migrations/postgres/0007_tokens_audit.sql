-- Issued API tokens and the audit log. Times are unix nanoseconds; 0 means
-- unset.

-- A token is found by the SHA-256 of its secret (hex); the secret itself is
-- never stored. body is the unyo.v1.Token message (role, scopes, creator).
CREATE TABLE tokens (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name         TEXT COLLATE "C" NOT NULL,
    digest       TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    revoked_at   BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    body         BYTEA  NOT NULL
);
-- A name is one live token; a revoked token keeps its name in the list.
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

-- One row per write; body is the unyo.v1.AuditRecord message.
CREATE TABLE audit_log (
    id    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    at    BIGINT NOT NULL,
    who   TEXT COLLATE "C" NOT NULL,
    kind  TEXT COLLATE "C" NOT NULL,
    body  BYTEA  NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
