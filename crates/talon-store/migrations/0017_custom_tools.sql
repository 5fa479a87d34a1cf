-- Issue 27: shell tools defined at run time (`talon custom-tools`, the HTTP API). Environment
-- values are secrets: they live encrypted in the secret 'custom-tool/<name>'; only their names
-- are here. agent_key '' is a tool for every agent. Flags are 0/1 integers.
CREATE TABLE custom_tools (
    name TEXT PRIMARY KEY,
    agent_key TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL,
    parameters TEXT NOT NULL,
    command TEXT NOT NULL,
    working_dir TEXT NOT NULL DEFAULT '',
    timeout_secs BIGINT NOT NULL DEFAULT 60,
    env_names TEXT NOT NULL DEFAULT '[]',
    enabled BIGINT NOT NULL DEFAULT 1,
    created_by TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Bumped by every change, so a running gateway sees one with a cheap read (and, on
-- PostgreSQL, at once through NOTIFY talon_custom_tools).
CREATE TABLE custom_tools_revision (
    id BIGINT PRIMARY KEY,
    revision BIGINT NOT NULL
);
INSERT INTO custom_tools_revision (id, revision) VALUES (1, 0);
