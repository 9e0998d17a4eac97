-- The statistics tier: rollups of metrics and daily counts of logs and
-- events, kept for years after the raw data expired. Times are unix
-- nanoseconds of the bucket's start (UTC-aligned).

-- One row per resolution ('1h', '1d'), series and bucket. series is the
-- canonical key of labels (a JSON object including __name__); name copies
-- __name__ for queries by metric. avg = val_sum / val_count.
CREATE TABLE stat_rollups (
    resolution   TEXT    NOT NULL,
    series       TEXT    NOT NULL,
    bucket_start INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    labels       TEXT    NOT NULL,
    val_min      REAL    NOT NULL,
    val_max      REAL    NOT NULL,
    val_sum      REAL    NOT NULL,
    val_count    INTEGER NOT NULL,
    val_last     REAL    NOT NULL,
    PRIMARY KEY (resolution, series, bucket_start)
) STRICT, WITHOUT ROWID;
-- Queries by metric name and time.
CREATE INDEX stat_rollups_name ON stat_rollups (resolution, name, bucket_start);
-- Expiry by age.
CREATE INDEX stat_rollups_start ON stat_rollups (resolution, bucket_start);

-- Daily counts: kind is 'logs' or 'events', by is level, app or host.
CREATE TABLE stat_counts (
    kind      TEXT    NOT NULL,
    by_key    TEXT    NOT NULL,
    day       INTEGER NOT NULL,
    key       TEXT    NOT NULL,
    total     INTEGER NOT NULL,
    errors    INTEGER NOT NULL,
    warnings  INTEGER NOT NULL,
    PRIMARY KEY (kind, by_key, day, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX stat_counts_day ON stat_counts (day);

-- Progress marks of the statistics controller: buckets before a cursor are
-- final, so a restart resumes there instead of recomputing or skipping.
CREATE TABLE stat_cursors (
    name TEXT    NOT NULL PRIMARY KEY,
    at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
