//! Claude Code's `TaskOutput` and `TaskStop` over one id space: a background `Bash` command's
//! id (what the built-in tools handle) or an agent run's id (`run-…`, what `Agent` with
//! `run_in_background` returns). The runtime registers these in place of the built-ins, with
//! the same inputs, and hands every shell id to the built-in tool unchanged.

use std::time::Duration;

use talon_core::{Authorized, CallContext, Tool, ToolOutput, ToolSpec};
use talon_tools::claude_code::task_output::{
    DEFAULT_WAIT_MS, MAX_WAIT_MS, TaskOutput, TaskOutputInput,
};
use talon_tools::claude_code::task_stop::{TaskStop, TaskStopInput};

use super::tools::{own_child, take_result};
use crate::runner::Runner;

/// The prefix of agent run ids.
const RUN_PREFIX: &str = "run-";

/// `TaskOutput` for shells and agent runs.
pub struct AgentTaskOutput {
    pub(super) shell: TaskOutput,
    pub(super) runner: Runner,
}

impl Tool for AgentTaskOutput {
    type Input = TaskOutputInput;

    fn spec(&self) -> ToolSpec {
        let mut spec = self.shell.spec();
        spec.description.push_str(
            " Also takes an agent's id (run-…, from Agent with run_in_background): waits for the \
             agent and returns its result.",
        );
        spec
    }

    async fn execute(&self, call: Authorized<TaskOutputInput>) -> ToolOutput {
        let input = call.input();
        let id = [&input.task_id, &input.bash_id, &input.shell_id]
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_default();
        if !id.starts_with(RUN_PREFIX) {
            return self.shell.execute(call).await;
        }
        let ms = input.timeout.unwrap_or(DEFAULT_WAIT_MS);
        if ms > MAX_WAIT_MS {
            return ToolOutput::own_error(format!(
                "timeout must be at most {MAX_WAIT_MS} milliseconds, got {ms}"
            ));
        }
        let wait = if input.block.unwrap_or(true) {
            Duration::from_millis(ms)
        } else {
            Duration::ZERO
        };
        agent_output(&self.runner, call.ctx(), &id, wait).await
    }
}

/// The state of the caller's agent run `id` after waiting at most `wait`: its result (taken,
/// so it is not announced again) once it ended.
async fn agent_output(runner: &Runner, ctx: &CallContext, id: &str, wait: Duration) -> ToolOutput {
    let run = match own_child(runner, ctx, Some(id)).await {
        Ok(run) => run,
        Err(e) => return e,
    };
    let run = match runner.wait_run(&run.id, wait).await {
        Ok(run) => run,
        Err(e) => return ToolOutput::own_error(e.to_string()),
    };
    if run.status.is_live() {
        return ToolOutput::own(format!(
            "Task {} (status: {}): the agent is still working.",
            run.id,
            run.status.as_str()
        ));
    }
    take_result(runner, &run).await
}

/// `TaskStop` for shells and agent runs.
pub struct AgentTaskStop {
    pub(super) shell: TaskStop,
    pub(super) runner: Runner,
}

impl Tool for AgentTaskStop {
    type Input = TaskStopInput;

    fn spec(&self) -> ToolSpec {
        let mut spec = self.shell.spec();
        spec.description
            .push_str(" Also stops an agent (run-…) and every run it started.");
        spec
    }

    async fn execute(&self, call: Authorized<TaskStopInput>) -> ToolOutput {
        let input = call.input();
        let id = [&input.task_id, &input.shell_id]
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_default();
        if !id.starts_with(RUN_PREFIX) {
            return self.shell.execute(call).await;
        }
        let run = match own_child(&self.runner, call.ctx(), Some(&id)).await {
            Ok(run) if run.status.is_live() => run,
            Ok(run) => {
                return ToolOutput::own_error(format!(
                    "agent {} has ended already ({})",
                    run.id,
                    run.status.as_str()
                ));
            }
            Err(e) => return e,
        };
        match self.runner.cancel_run(&run.id).await {
            Ok(_) => ToolOutput::own(format!("Task {} stopped successfully.", run.id)),
            Err(e) => ToolOutput::own_error(e.to_string()),
        }
    }
}

impl Runner {
    /// Puts `TaskOutput` and `TaskStop` over shells and agent runs in place of the built-ins
    /// over `shell`.
    pub fn register_task_tools(
        &self,
        registry: &talon_core::Registry,
        shell: &std::sync::Arc<talon_exec::Shell>,
    ) -> Result<(), talon_core::registry::RegistryError> {
        // Only where the built-ins are (a configuration can leave them out).
        registry
            .replace(AgentTaskOutput {
                shell: TaskOutput {
                    shell: std::sync::Arc::clone(shell),
                },
                runner: self.clone(),
            })
            .and_then(|_| {
                registry.replace(AgentTaskStop {
                    shell: TaskStop {
                        shell: std::sync::Arc::clone(shell),
                    },
                    runner: self.clone(),
                })
            })
            .map(|_| ())
    }
}
