-- The device and inode of each view's root directory, recorded when the view
-- is made, so that discard removes the view and not whatever was later put at
-- its path. Views recorded before this migration have none.

ALTER TABLE views ADD COLUMN root_dev INTEGER;
ALTER TABLE views ADD COLUMN root_ino INTEGER;
