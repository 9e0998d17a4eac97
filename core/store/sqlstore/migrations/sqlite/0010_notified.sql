-- What each notifying action (api_hook, plugin; by rule and place in the
-- rule) last sent per firing node/check, so that notifications follow
-- changes and repeat intervals across restarts and failovers.
CREATE TABLE pipeline_notified (
    rule       TEXT    NOT NULL,
    action     INTEGER NOT NULL,
    node       TEXT    NOT NULL,
    check_name TEXT    NOT NULL,
    level      INTEGER NOT NULL,
    since      INTEGER NOT NULL,
    sent_at    INTEGER NOT NULL,
    PRIMARY KEY (node, check_name, rule, action)
) STRICT, WITHOUT ROWID;
