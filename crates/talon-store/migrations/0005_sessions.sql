-- Talon schema v5: agent sessions and their messages.
-- Times are Unix milliseconds. A turn's messages are written in one transaction when the turn
-- ends, so a crash never leaves half a turn: the session's state says 'running' while a turn is
-- under way, and a turn found 'running' by a starting gateway is marked 'interrupted'.

CREATE TABLE sessions (
    session_key TEXT PRIMARY KEY,
    agent_key TEXT NOT NULL,
    tenant TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'idle',
    -- The state before the turn now running began (a 'running' one was interrupted).
    prev_state TEXT NOT NULL DEFAULT '',
    turns {{bigint}} NOT NULL DEFAULT 0,
    input_tokens {{bigint}} NOT NULL DEFAULT 0,
    output_tokens {{bigint}} NOT NULL DEFAULT 0,
    last_stop TEXT NOT NULL DEFAULT '',
    -- Compaction: a summary of every message up to and including seq summary_through.
    summary TEXT NOT NULL DEFAULT '',
    summary_through {{bigint}} NOT NULL DEFAULT 0,
    created_at {{bigint}} NOT NULL,
    updated_at {{bigint}} NOT NULL
);

CREATE INDEX sessions_agent ON sessions (agent_key, updated_at);

-- One row per message, in order; the message is the neutral JSON form (role, text, tool calls,
-- tool results), never a provider's wire format.
CREATE TABLE session_messages (
    session_key TEXT NOT NULL REFERENCES sessions (session_key) ON DELETE CASCADE,
    seq {{bigint}} NOT NULL,
    turn {{bigint}} NOT NULL,
    message TEXT NOT NULL,
    created_at {{bigint}} NOT NULL,
    PRIMARY KEY (session_key, seq)
);
