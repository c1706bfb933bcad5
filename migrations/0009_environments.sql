-- Environments: a fifth profile, `environment`, a named set of snapshot
-- digests. Its row names its members in snapshot_refs (as a task's names its
-- tree and dependency list), so that rm refuses to forget a member.
--
-- Only the CHECK of snapshots.profile changes: it admits one more value, a
-- change that leaves every stored row valid, so the table's definition is
-- edited in place as SQLite documents for loosening a CHECK constraint
-- ("Making Other Kinds Of Table Schema Changes"); the schema cookie is
-- bumped by the migration's runner in the same transaction.

PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql,
                     'CHECK (profile IN (''ce'', ''tree'', ''dependencies'', ''task''))',
                     'CHECK (profile IN (''ce'', ''tree'', ''dependencies'', ''task'', ''environment''))')
 WHERE type = 'table' AND name = 'snapshots';
PRAGMA writable_schema = OFF;
