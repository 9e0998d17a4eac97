-- Issued API tokens and the audit log. Times are unix nanoseconds; 0 means
-- unset.

-- A token is found by the SHA-256 of its secret (hex); the secret itself is
-- never stored. body is the unyo.v1.Token message (role, scopes, creator).
CREATE TABLE tokens (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    digest       TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER NOT NULL,
    last_used_at INTEGER NOT NULL,
    body         BLOB    NOT NULL
) STRICT;
-- A name is one live token; a revoked token keeps its name in the list.
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

-- One row per write; body is the unyo.v1.AuditRecord message.
CREATE TABLE audit_log (
    id    TEXT    NOT NULL PRIMARY KEY,
    at    INTEGER NOT NULL,
    who   TEXT    NOT NULL,
    kind  TEXT    NOT NULL,
    body  BLOB    NOT NULL
) STRICT;
CREATE INDEX audit_log_at ON audit_log (at);
