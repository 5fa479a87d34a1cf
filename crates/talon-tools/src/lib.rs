//! Talon's built-in tools, one module per tool, grouped as the seeds group them.
//!
//! Each module holds the tool's model-facing spec beside its implementation. The Claude Code
//! dialect (`Read`, `TodoWrite`, …) lives in [`claude_code`]; GoClaw-dialect tools live in their
//! seed group's module ([`automation`], …). Later issues add `fs`, `runtime`, `web`, `memory`, ….

pub mod automation;
pub mod claude_code;

use talon_core::Registry;
use talon_core::registry::RegistryError;

/// Registers every built-in tool this build provides.
pub fn register_builtin(registry: &Registry) -> Result<(), RegistryError> {
    registry.register(automation::datetime::Datetime)?;
    registry.register(claude_code::todo_write::TodoWrite::default())?;
    Ok(())
}
