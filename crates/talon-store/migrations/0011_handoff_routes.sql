-- Talon schema v11: handoff routes (seed 000 §10). A row routes a chat — a channel and the
-- session key a person talks in — to another agent, in a session of its own, until that agent
-- (or the one that handed off) clears it. It lives in the store so every gateway routes alike.

CREATE TABLE handoff_routes (
    channel TEXT NOT NULL,
    chat TEXT NOT NULL,
    from_agent TEXT NOT NULL,
    target_agent TEXT NOT NULL,
    target_session TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (channel, chat)
);

CREATE INDEX handoff_routes_target ON handoff_routes (target_session);
