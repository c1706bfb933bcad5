-- Where snapshots' bytes came from: one row per source record an ingest or
-- an adoption kept, each the bytes of its file under `sources/` (named by
-- their SHA-256), so that `cestore recover` can rebuild them. Removed with
-- their snapshot.

CREATE TABLE sources (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    id          TEXT    NOT NULL CHECK (length(id) = 64),
    at          TEXT    NOT NULL,
    entry       TEXT    NOT NULL,
    PRIMARY KEY (snapshot_id, id)
) WITHOUT ROWID;

-- The digest of the snapshot a git tree makes, by a key that fixes what the
-- walk reads (the commit's root tree, the directory, the version and the
-- checkout settings): a tree id never changes meaning, so a cached digest
-- never goes stale.

CREATE TABLE git_tree_digests (
    key    TEXT PRIMARY KEY CHECK (length(key) = 64),
    digest TEXT NOT NULL CHECK (length(digest) = 64)
) WITHOUT ROWID;
