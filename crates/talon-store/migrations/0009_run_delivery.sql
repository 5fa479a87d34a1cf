-- Talon schema v9: asynchronous runs.
--
-- A run remembers the agent of the session its result goes to (whose turn announces it) and how
-- often it was taken over from a gateway that died (a run is resumed once, then ended `lost`),
-- and the tools it may use (a JSON array; never more than its parent's), so a gateway that
-- resumes it gives it the same ones; and how many model requests it made (budgets per root run).
-- An outbox row is claimed, with a lease, by the gateway announcing it, so two gateways never
-- announce the same result and a result whose announcer died is announced by another.

ALTER TABLE agent_runs ADD COLUMN parent_agent TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_runs ADD COLUMN takeovers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agent_runs ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_runs ADD COLUMN model_requests BIGINT NOT NULL DEFAULT 0;
ALTER TABLE run_outbox ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE run_outbox ADD COLUMN claim_until BIGINT NOT NULL DEFAULT 0;

-- Runs are counted and listed per parent session (the limits, `subagents list`, the prompt).
CREATE INDEX agent_runs_parent_session ON agent_runs (parent_session, status);
