-- Every column a snapshot's row is listed or looked up by, in one index:
-- `list`, `show` and each lookup by digest read it alone. A row also holds
-- its manifest (megabytes for a runtime tree), and a column after the
-- manifest (`profile`, added later) is reached only by walking the
-- manifest's overflow pages; without this index, `list` read every stored
-- manifest whole.

CREATE INDEX snapshots_listing ON snapshots
    (digest, name, version, schema_version, file_count, total_bytes, first_ingested_at, profile);
