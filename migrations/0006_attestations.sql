-- Who vouched for snapshots: one row per attestation kept beside a snapshot,
-- each the envelope bytes (one JSON line) of its file under `attestations/`,
-- named by their SHA-256, with the key id that signed it and when it was
-- made, so that `cestore recover` can rebuild them. Removed with their
-- snapshot.

CREATE TABLE attestations (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    id          TEXT    NOT NULL CHECK (length(id) = 64),
    keyid       TEXT    NOT NULL CHECK (length(keyid) = 64),
    at          TEXT    NOT NULL,
    envelope    TEXT    NOT NULL,
    PRIMARY KEY (snapshot_id, id)
) WITHOUT ROWID;
