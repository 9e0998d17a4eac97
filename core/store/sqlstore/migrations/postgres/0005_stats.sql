-- The statistics tier: rollups of metrics and daily counts of logs and
-- events, kept for years after the raw data expired. Times are unix
-- nanoseconds of the bucket's start (UTC-aligned).

-- One row per resolution ('1h', '1d'), series and bucket. series is the
-- canonical key of labels (a JSON object including __name__); name copies
-- __name__ for queries by metric. avg = val_sum / val_count.
CREATE TABLE stat_rollups (
    resolution   TEXT COLLATE "C" NOT NULL,
    series       TEXT COLLATE "C" NOT NULL,
    bucket_start BIGINT NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    labels       TEXT COLLATE "C" NOT NULL,
    val_min      DOUBLE PRECISION NOT NULL,
    val_max      DOUBLE PRECISION NOT NULL,
    val_sum      DOUBLE PRECISION NOT NULL,
    val_count    BIGINT NOT NULL,
    val_last     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (resolution, series, bucket_start)
);
-- Queries by metric name and time.
CREATE INDEX stat_rollups_name ON stat_rollups (resolution, name, bucket_start);
-- Expiry by age.
CREATE INDEX stat_rollups_start ON stat_rollups (resolution, bucket_start);

-- Daily counts: kind is 'logs' or 'events', by is level, app or host.
CREATE TABLE stat_counts (
    kind      TEXT COLLATE "C" NOT NULL,
    by_key    TEXT COLLATE "C" NOT NULL,
    day       BIGINT NOT NULL,
    key       TEXT COLLATE "C" NOT NULL,
    total     BIGINT NOT NULL,
    errors    BIGINT NOT NULL,
    warnings  BIGINT NOT NULL,
    PRIMARY KEY (kind, by_key, day, key)
);
CREATE INDEX stat_counts_day ON stat_counts (day);

-- Progress marks of the statistics controller: buckets before a cursor are
-- final, so a restart resumes there instead of recomputing or skipping.
CREATE TABLE stat_cursors (
    name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    at   BIGINT NOT NULL
);
