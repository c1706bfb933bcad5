-- Which repository of a registry a push last found or put each blob in, so
-- that a later push of the same blob to another repository of that registry
-- can mount it from there instead of uploading it. A hint only: a mount the
-- registry refuses falls back to an upload.

CREATE TABLE remote_blobs (
    registry   TEXT NOT NULL,
    blob       TEXT NOT NULL CHECK (length(blob) = 64),
    repository TEXT NOT NULL,
    PRIMARY KEY (registry, blob)
) WITHOUT ROWID;
