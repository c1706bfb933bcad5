-- Snapshots of the tree kinds beside the CE plugin's: each row names its
-- profile (read from its manifest's bytes); a dependency list's row keeps its
-- content digest (sandbox_dependency_content_digest), indexed so that a
-- snapshot is found by it too; a task's row names the two manifests it is
-- made of (its tree and its dependency list) in snapshot_refs, so that rm
-- refuses to forget one a recorded task names.

ALTER TABLE snapshots ADD COLUMN profile TEXT NOT NULL DEFAULT 'ce'
    CHECK (profile IN ('ce', 'tree', 'dependencies', 'task'));
ALTER TABLE snapshots ADD COLUMN content_digest TEXT
    CHECK (content_digest IS NULL OR length(content_digest) = 64);

CREATE INDEX snapshots_content_digest ON snapshots (content_digest)
    WHERE content_digest IS NOT NULL;

CREATE TABLE snapshot_refs (
    task_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    digest  TEXT    NOT NULL CHECK (length(digest) = 64),
    PRIMARY KEY (task_id, digest)
) WITHOUT ROWID;

CREATE INDEX snapshot_refs_digest ON snapshot_refs (digest);
