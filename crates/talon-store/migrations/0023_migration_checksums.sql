-- Talon schema v23 (issue 36).
-- Each applied migration's checksum (FNV-1a 64 of its SQL for this engine, in hex): a migration
-- edited after it was applied is refused at start instead of leaving two databases at "the
-- same" version with different schemas. Rows applied before this version get theirs recorded
-- by the first binary that knows it.
ALTER TABLE talon_migrations ADD COLUMN checksum TEXT NOT NULL DEFAULT '';
