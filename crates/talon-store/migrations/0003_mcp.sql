-- Talon schema v3: bridged MCP servers, who may use them, and requests for access.
-- Times are Unix milliseconds; flags are 0/1 integers (one Rust type reads both engines).

-- Servers added at runtime (servers in talon.toml are not stored). Header and environment
-- values are secrets: they live encrypted in the secret 'mcp-server/<name>'; only their names
-- are here.
CREATE TABLE mcp_servers (
    name TEXT PRIMARY KEY,
    transport TEXT NOT NULL,
    command TEXT NOT NULL DEFAULT '',
    args TEXT NOT NULL DEFAULT '[]',
    url TEXT NOT NULL DEFAULT '',
    cwd TEXT NOT NULL DEFAULT '',
    env_names TEXT NOT NULL DEFAULT '[]',
    header_names TEXT NOT NULL DEFAULT '[]',
    tool_prefix TEXT NOT NULL DEFAULT '',
    startup_timeout_secs {{bigint}} NOT NULL DEFAULT 30,
    tool_timeout_secs {{bigint}} NOT NULL DEFAULT 60,
    max_output_chars {{bigint}} NOT NULL DEFAULT 100000,
    enabled {{bigint}} NOT NULL DEFAULT 1,
    required {{bigint}} NOT NULL DEFAULT 0,
    require_grant {{bigint}} NOT NULL DEFAULT 0,
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

-- Per-agent and per-user grants. Servers from talon.toml have no row in mcp_servers, so the
-- server name is not a foreign key; removing a stored server removes its grants.
CREATE TABLE mcp_grants (
    server_name TEXT NOT NULL,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('agent', 'user')),
    subject TEXT NOT NULL,
    enabled {{bigint}} NOT NULL DEFAULT 1,
    tool_allow TEXT NOT NULL DEFAULT '[]',
    tool_deny TEXT NOT NULL DEFAULT '[]',
    granted_by TEXT NOT NULL DEFAULT '',
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL,
    PRIMARY KEY (server_name, subject_kind, subject)
);

CREATE TABLE mcp_access_requests (
-- @sqlite
    id INTEGER PRIMARY KEY AUTOINCREMENT,
-- @postgres
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
-- @end
    server_name TEXT NOT NULL,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('agent', 'user')),
    subject TEXT NOT NULL,
    tool_allow TEXT NOT NULL DEFAULT '[]',
    reason TEXT NOT NULL DEFAULT '',
    requested_by TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    reviewed_by TEXT NOT NULL DEFAULT '',
    review_note TEXT NOT NULL DEFAULT '',
    created_at {{bigint}} NOT NULL,
    reviewed_at {{bigint}}
);
CREATE INDEX mcp_access_requests_status ON mcp_access_requests (status, id);

-- Bumped by every change to the three tables above, so running gateways notice changes made
-- by other processes with one cheap read.
CREATE TABLE mcp_revision (
    id {{bigint}} PRIMARY KEY CHECK (id = 1),
    revision {{bigint}} NOT NULL
);
INSERT INTO mcp_revision (id, revision) VALUES (1, 0);
