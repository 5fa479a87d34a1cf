-- Talon schema v7: a session's owner, the end user whose turns it holds ('' for none: calls
-- that name no user). Session tools and the sessions API show a caller only the sessions of
-- its own user, and a turn never continues another user's session. Sessions stored before
-- this version have no owner.

ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';

CREATE INDEX sessions_owner ON sessions (agent_key, owner, updated_at);
