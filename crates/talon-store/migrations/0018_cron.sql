-- Talon schema v18: scheduled jobs (`cron`, `talon cron`, /v1/cron) and their run history.
-- Times are Unix milliseconds; 0 means "none".
--
-- A due job is claimed by one gateway: it writes its id and a lease (`lease_owner`,
-- `lease_until`) in the statement that picks the job, renews the lease while the job's run goes,
-- and releases it when it records the end. A gateway that dies stops renewing; the job is
-- claimed again once the lease has run out. Nothing is swept at start-up (GoClaw's start-up
-- sweep re-armed other instances' running jobs, so they ran twice).

CREATE TABLE cron_jobs (
    id TEXT PRIMARY KEY,
    -- The user who owns it ('' for calls naming no user); only they see and change it.
    user_id TEXT NOT NULL DEFAULT '',
    agent_key TEXT NOT NULL,
    name TEXT NOT NULL,
    -- at | every | cron, with the field that kind uses.
    schedule_kind TEXT NOT NULL,
    cron_expression TEXT NOT NULL DEFAULT '',
    interval_ms BIGINT NOT NULL DEFAULT 0,
    run_at BIGINT NOT NULL DEFAULT 0,
    -- IANA name; cron expressions and local `at` times are read in it.
    timezone TEXT NOT NULL DEFAULT 'UTC',
    -- The message the agent's run is given.
    payload TEXT NOT NULL,
    -- Where the result is delivered; '' for a session of the job's own.
    session_key TEXT NOT NULL DEFAULT '',
    delete_after_run BIGINT NOT NULL DEFAULT 0,
    enabled BIGINT NOT NULL DEFAULT 1,
    -- After downtime: run_once (one run, then the next future time) or skip.
    missed_policy TEXT NOT NULL DEFAULT 'run_once',
    next_run_at BIGINT NOT NULL DEFAULT 0,
    -- A run asked for now (`run` with mode force), whatever the schedule says.
    run_requested BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    -- The claim held now: when it was taken, the scheduled time it is for (0: a forced run),
    -- and the agent run started for it (a gateway that claims it after a crash finds it here).
    claimed_at BIGINT NOT NULL DEFAULT 0,
    claim_due BIGINT NOT NULL DEFAULT 0,
    run_id TEXT NOT NULL DEFAULT '',
    last_status TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    last_run_at BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (user_id, name)
);

-- What the claim and the scheduler's wake-up read: the earliest due job.
CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE enabled = 1 AND next_run_at > 0;
CREATE INDEX cron_jobs_requested ON cron_jobs (run_requested) WHERE run_requested > 0;

CREATE TABLE cron_runs (
    id {{serial_pk}},
    job_id TEXT NOT NULL REFERENCES cron_jobs (id) ON DELETE CASCADE,
    started_at BIGINT NOT NULL,
    ended_at BIGINT NOT NULL,
    -- ok | error | skipped | interrupted
    status TEXT NOT NULL,
    -- The run's answer or error, capped.
    result TEXT NOT NULL DEFAULT '',
    -- The agent run (`talon runs show`); '' when none ran.
    run_id TEXT NOT NULL DEFAULT ''
);

CREATE INDEX cron_runs_job ON cron_runs (job_id, id);
