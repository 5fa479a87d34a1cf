-- Talon schema v13: agent teams (seed 000 §8, seed 002 §8). A team has a lead and members; its
-- task board holds tasks with priorities and prerequisites (`team_task_deps`), claimed with a
-- lease by one member at a time; its mailbox holds messages per recipient, read once. Tasks and
-- messages belong to the user whose conversation posted them: another user's never show.

CREATE TABLE teams (
    name TEXT PRIMARY KEY,
    lead TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

CREATE INDEX teams_lead ON teams (lead);

CREATE TABLE team_members (
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    agent TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT '',
    joined_at {{bigint}} NOT NULL,
    PRIMARY KEY (team, agent)
);
CREATE INDEX team_members_agent ON team_members (agent);

CREATE TABLE team_tasks (
    id {{serial_pk}},
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    priority {{bigint}} NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('pending', 'blocked', 'in_progress', 'completed', 'failed', 'cancelled')),
    owner TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    lease_until {{bigint}} NOT NULL DEFAULT 0,
    dispatches {{bigint}} NOT NULL DEFAULT 0,
    result TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    lead_session TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL DEFAULT '',
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL,
-- @sqlite
    finished_at INTEGER NOT NULL DEFAULT 0
-- @postgres
    finished_at BIGINT NOT NULL DEFAULT 0,
    search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', subject || ' ' || description)) STORED
-- @end
);
CREATE INDEX team_tasks_board ON team_tasks (team, user_id, status, priority);

-- @sqlite
CREATE VIRTUAL TABLE team_tasks_fts USING fts5 (subject, description, content = 'team_tasks', content_rowid = 'id');
CREATE TRIGGER team_tasks_ai AFTER INSERT ON team_tasks BEGIN
    INSERT INTO team_tasks_fts (rowid, subject, description) VALUES (new.id, new.subject, new.description);
END;
CREATE TRIGGER team_tasks_ad AFTER DELETE ON team_tasks BEGIN
    INSERT INTO team_tasks_fts (team_tasks_fts, rowid, subject, description) VALUES ('delete', old.id, old.subject, old.description);
END;
CREATE TRIGGER team_tasks_au AFTER UPDATE OF subject, description ON team_tasks BEGIN
    INSERT INTO team_tasks_fts (team_tasks_fts, rowid, subject, description) VALUES ('delete', old.id, old.subject, old.description);
    INSERT INTO team_tasks_fts (rowid, subject, description) VALUES (new.id, new.subject, new.description);
END;
-- @postgres
CREATE INDEX team_tasks_search ON team_tasks USING GIN (search);
-- @end

CREATE TABLE team_task_deps (
    task {{bigint}} NOT NULL REFERENCES team_tasks (id) ON DELETE CASCADE,
    blocked_by {{bigint}} NOT NULL REFERENCES team_tasks (id) ON DELETE CASCADE,
    PRIMARY KEY (task, blocked_by)
);
CREATE INDEX team_task_deps_blocker ON team_task_deps (blocked_by);

CREATE TABLE team_messages (
    id {{serial_pk}},
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    sender TEXT NOT NULL,
    recipient TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    broadcast {{bigint}} NOT NULL DEFAULT 0,
    created_at {{bigint}} NOT NULL,
    read_at {{bigint}} NOT NULL DEFAULT 0
);
CREATE INDEX team_messages_inbox ON team_messages (team, recipient, user_id, read_at);
