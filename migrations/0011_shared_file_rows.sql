-- File rows shared between snapshots, and manifests kept apart from the
-- snapshot's row.
--
-- `entries` holds each distinct (path, content, size, mode) once, whatever
-- number of snapshots list it: a snapshot that differs from a stored one in
-- a few files adds the rows of those files, not of every file. Its ids are
-- never reused, so that a list read while its snapshot is forgotten never
-- names another file.
-- `snapshot_files.entry_ids` lists a snapshot's entries in manifest order
-- (zigzag varint deltas of the ids, compressed as one zstd frame; written and
-- read by catalogue/files.rs), filled from `files` by the migration's runner.
--
-- `manifests` holds each snapshot's manifest as it is kept (catalogue/kept.rs:
-- whole, packed, or a delta against the manifest named by `base`, `depth`
-- deltas from one with no base), out of the snapshot's row, so that reading a row never walks
-- a manifest's overflow pages.

CREATE TABLE entries (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    path       TEXT    NOT NULL,
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    size       INTEGER NOT NULL,
    executable INTEGER NOT NULL CHECK (executable IN (0, 1)),
    UNIQUE (path, sha256, size, executable)
);

CREATE INDEX entries_sha256 ON entries (sha256, executable);
CREATE INDEX entries_size ON entries (size);

CREATE TABLE snapshot_files (
    snapshot_id INTEGER PRIMARY KEY REFERENCES snapshots (id) ON DELETE CASCADE,
    entry_ids   BLOB    NOT NULL
);

CREATE TABLE manifests (
    snapshot_id INTEGER PRIMARY KEY REFERENCES snapshots (id) ON DELETE CASCADE,
    base        TEXT    CHECK (base IS NULL OR length(base) = 64),
    depth       INTEGER NOT NULL CHECK (depth >= 0),
    kept        BLOB    NOT NULL
);

CREATE INDEX manifests_base ON manifests (base);

INSERT INTO entries (path, sha256, size, executable)
    SELECT path, sha256, size, executable FROM files
    GROUP BY path, sha256, size, executable ORDER BY min(snapshot_id), min(seq);

INSERT INTO manifests (snapshot_id, base, depth, kept)
    SELECT id, NULL, 0, manifest FROM snapshots;
