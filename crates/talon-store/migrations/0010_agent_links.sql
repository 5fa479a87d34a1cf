-- Talon schema v10: agent links, the permission to delegate (seed 000 §7). A link is a directed
-- edge: `outbound` lets only its source delegate to its target, `bidirectional` lets each
-- delegate to the other. `max_concurrent` caps the live delegations over the link; `settings`
-- holds per-user allow and deny lists ({"allow_users": [...], "deny_users": [...]}).

CREATE TABLE agent_links (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('outbound', 'bidirectional')),
    max_concurrent BIGINT NOT NULL DEFAULT 3,
    settings TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (source, target)
);

CREATE INDEX agent_links_target ON agent_links (target);
