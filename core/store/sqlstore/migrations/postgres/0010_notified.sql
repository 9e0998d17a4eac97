-- What each notifying action (api_hook, plugin; by rule and place in the
-- rule) last sent per firing node/check, so that notifications follow
-- changes and repeat intervals across restarts and failovers.
CREATE TABLE pipeline_notified (
    rule       TEXT COLLATE "C" NOT NULL,
    action     INTEGER NOT NULL,
    node       TEXT COLLATE "C" NOT NULL,
    check_name TEXT COLLATE "C" NOT NULL,
    level      INTEGER NOT NULL,
    since      BIGINT  NOT NULL,
    sent_at    BIGINT  NOT NULL,
    PRIMARY KEY (node, check_name, rule, action)
);
