-- What migration 0011 moved: the per-snapshot file rows and the manifest
-- column of the snapshot's row.

DROP TABLE files;
ALTER TABLE snapshots DROP COLUMN manifest;
