-- Talon schema v12: what a run's definition narrowed (a custom agent's permission mode, model
-- and turns), as JSON, so a run steered or resumed by another gateway keeps it: before, only
-- its tools were stored, and a resumed run ran with its agent's defaults.

ALTER TABLE agent_runs ADD COLUMN overrides TEXT NOT NULL DEFAULT '{}';
