-- Talon schema v2: shell execution. Times are Unix milliseconds.

-- "Allow always" answers: whole normalised commands, per agent (never a program name).
CREATE TABLE exec_allowed_commands (
    agent_key TEXT NOT NULL,
    command TEXT NOT NULL,
    created_at {{bigint}} NOT NULL,
    PRIMARY KEY (agent_key, command)
);

-- Credentialed exec: binaries that run directly (no shell) with stored credentials in their
-- environment. The environment itself is a secret named 'cli-credential/<binary_name>'.
CREATE TABLE cli_credentials (
    binary_name TEXT PRIMARY KEY,
    binary_path TEXT NOT NULL,
    env_names TEXT NOT NULL DEFAULT '[]',
    deny_args TEXT NOT NULL DEFAULT '[]',
    deny_verbose TEXT NOT NULL DEFAULT '[]',
    timeout_seconds {{bigint}} NOT NULL DEFAULT 30,
    tips TEXT NOT NULL DEFAULT '',
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

-- Which agents may use a credentialed binary.
CREATE TABLE cli_credential_grants (
    binary_name TEXT NOT NULL REFERENCES cli_credentials(binary_name) ON DELETE CASCADE,
    agent_key TEXT NOT NULL,
    created_at {{bigint}} NOT NULL,
    PRIMARY KEY (binary_name, agent_key)
);
