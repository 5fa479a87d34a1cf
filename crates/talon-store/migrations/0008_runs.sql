-- Talon schema v8: agent runs (subagents, delegations, evaluate-loop rounds, quality-gate
-- reviews; later cron jobs and team tasks) and the outbox that delivers each child's result to
-- its parent exactly once. Times are Unix milliseconds.
--
-- Live runs (queued, running, waiting_approval) count against the limits; a run owned by a
-- gateway carries that gateway's id and a lease it renews, so a run whose gateway died is found
-- by its expired lease, never by a sweep at start-up.

CREATE TABLE agent_runs (
    id TEXT PRIMARY KEY,
    root_id TEXT NOT NULL,
    -- The run that started this one; '' when a person's turn did.
    parent_id TEXT NOT NULL DEFAULT '',
    -- Where the result is delivered, and the run's own session.
    parent_session TEXT NOT NULL,
    session_key TEXT NOT NULL,
    depth BIGINT NOT NULL,
    agent_key TEXT NOT NULL,
    tenant TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL DEFAULT '',
    origin TEXT NOT NULL,
    context_mode TEXT NOT NULL DEFAULT 'fresh',
    status TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    cancel_requested BIGINT NOT NULL DEFAULT 0,
    task TEXT NOT NULL,
    result TEXT NOT NULL DEFAULT '',
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX agent_runs_tenant_status ON agent_runs (tenant, status);
CREATE INDEX agent_runs_parent_status ON agent_runs (parent_id, status);
CREATE INDEX agent_runs_root ON agent_runs (root_id);
CREATE INDEX agent_runs_lease ON agent_runs (status, lease_until);

-- A finished child's result for its parent session, written in the same transaction as the
-- child's terminal status; marked delivered by the transaction that saves the turn showing it.
CREATE TABLE run_outbox (
    parent_session TEXT NOT NULL,
    child_id TEXT NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (parent_session, child_id)
);

CREATE INDEX run_outbox_pending ON run_outbox (parent_session, delivered_at);
