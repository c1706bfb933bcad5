-- The catalogue's first schema: snapshots, their files, every ingest, and views.

CREATE TABLE snapshots (
    id                INTEGER PRIMARY KEY,
    digest            TEXT    NOT NULL UNIQUE CHECK (length(digest) = 64),
    name              TEXT    NOT NULL,
    version           TEXT    NOT NULL,
    schema_version    INTEGER NOT NULL,
    file_count        INTEGER NOT NULL,
    total_bytes       INTEGER NOT NULL,
    manifest          BLOB    NOT NULL,
    first_ingested_at TEXT    NOT NULL
);

CREATE INDEX snapshots_version ON snapshots (version);

-- One row per manifest entry, in manifest order (seq counts from 0).
CREATE TABLE files (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    path        TEXT    NOT NULL,
    sha256      TEXT    NOT NULL CHECK (length(sha256) = 64),
    size        INTEGER NOT NULL,
    executable  INTEGER NOT NULL CHECK (executable IN (0, 1)),
    PRIMARY KEY (snapshot_id, seq)
) WITHOUT ROWID;

CREATE INDEX files_sha256 ON files (sha256, executable);
CREATE INDEX files_path ON files (path);

-- Every ingest, repeats included. Keyed by digest text so that the history
-- outlives a removed snapshot.
CREATE TABLE ingests (
    id             INTEGER PRIMARY KEY,
    digest         TEXT    NOT NULL,
    at             TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    host           TEXT    NOT NULL,
    user           TEXT    NOT NULL,
    tool_version   TEXT    NOT NULL,
    new_objects    INTEGER NOT NULL,
    reused_objects INTEGER NOT NULL
);

CREATE INDEX ingests_digest ON ingests (digest, at);

-- Views made by checkout (kind 'checkout') and shared views made by path
-- (kind 'shared'), until they are discarded.
CREATE TABLE views (
    path        TEXT    PRIMARY KEY,
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id),
    kind        TEXT    NOT NULL CHECK (kind IN ('checkout', 'shared')),
    method      TEXT    NOT NULL,
    linked      INTEGER NOT NULL,
    copied      INTEGER NOT NULL,
    created_at  TEXT    NOT NULL
);

CREATE INDEX views_snapshot ON views (snapshot_id);
