-- Files by length: an ingest asks whether any stored file has a large
-- file's length before it reads it (none: its object is surely missing, and
-- it is copied rather than read twice). Without this index each question
-- scanned every file row of every snapshot.

CREATE INDEX files_size ON files (size);
