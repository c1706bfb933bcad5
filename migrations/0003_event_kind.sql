-- What each event of the ingest log was: an ingest from a source tree, an
-- adoption from a registry or a bundle, a row rebuilt by `cestore recover`,
-- or an object repaired by an ingest. Events before this migration were all
-- ingests or adoptions, told apart by their source.

ALTER TABLE ingests ADD COLUMN event TEXT NOT NULL DEFAULT 'ingest';
