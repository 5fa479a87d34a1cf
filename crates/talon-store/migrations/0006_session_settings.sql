-- Talon schema v6: per-session settings (the Config tool's `model`, `permissions.defaultMode`,
-- `autoCompactEnabled`), one row per setting so two settings changed at once never overwrite
-- each other. Values are JSON.

CREATE TABLE session_settings (
    session_key TEXT NOT NULL REFERENCES sessions (session_key) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at {{bigint}} NOT NULL,
    PRIMARY KEY (session_key, name)
);
