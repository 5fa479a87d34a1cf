-- Talon schema v13: agent teams (seed 000 §8, seed 002 §8). A team has a lead and members; its
-- task board holds tasks with priorities and prerequisites (`team_task_deps`), claimed with a
-- lease by one member at a time; its mailbox holds messages per recipient, read once. Tasks and
-- messages belong to the user whose conversation posted them: another user's never show.

CREATE TABLE teams (
    name TEXT PRIMARY KEY,
    lead TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX teams_lead ON teams (lead);

CREATE TABLE team_members (
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    agent TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT '',
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (team, agent)
);
CREATE INDEX team_members_agent ON team_members (agent);

CREATE TABLE team_tasks (
    id BIGSERIAL PRIMARY KEY,
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    priority BIGINT NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('pending', 'blocked', 'in_progress', 'completed', 'failed', 'cancelled')),
    owner TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    dispatches BIGINT NOT NULL DEFAULT 0,
    result TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    lead_session TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT NOT NULL DEFAULT 0,
    search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', subject || ' ' || description)) STORED
);
CREATE INDEX team_tasks_board ON team_tasks (team, user_id, status, priority);

CREATE INDEX team_tasks_search ON team_tasks USING GIN (search);

CREATE TABLE team_task_deps (
    task BIGINT NOT NULL REFERENCES team_tasks (id) ON DELETE CASCADE,
    blocked_by BIGINT NOT NULL REFERENCES team_tasks (id) ON DELETE CASCADE,
    PRIMARY KEY (task, blocked_by)
);
CREATE INDEX team_task_deps_blocker ON team_task_deps (blocked_by);

CREATE TABLE team_messages (
    id BIGSERIAL PRIMARY KEY,
    team TEXT NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    sender TEXT NOT NULL,
    recipient TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    broadcast BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    read_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX team_messages_inbox ON team_messages (team, recipient, user_id, read_at);
