//! One parse of a shell command per call.
//!
//! `exec` and `Bash` declare their `command` argument a shell script
//! ([`talon_core::ToolSpec::shell_script_arg`]). The pipeline's permission step analyses it with
//! [`ShellAnalyzer`], the checker ([`super::approvals`]) decides on that analysis, and the tool
//! receives the same analysis ([`talon_core::Authorized::script`]) for routing to credentialed
//! execution: what runs with credentials is what permission was decided on, and a 10 KiB script
//! is not parsed three or four times.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

use talon_core::{ScriptAnalysis, ScriptAnalyzer};
use talon_exec::analysis::{Analysis, analyze};

/// The analyzer a pipeline running `exec` or `Bash` is built with
/// ([`talon_core::PipelineBuilder::script_analyzer`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShellAnalyzer;

impl ScriptAnalyzer for ShellAnalyzer {
    fn analyze(&self, script: &str) -> Arc<dyn Any + Send + Sync> {
        Arc::new(analyze(script))
    }
}

/// The analysis of `script`: the one the pipeline carried, when it was made of exactly this
/// script by [`ShellAnalyzer`]; otherwise (a pipeline built without an analyzer) a fresh parse.
pub fn analysis_of<'a>(carried: Option<&'a ScriptAnalysis>, script: &str) -> Cow<'a, Analysis> {
    match carried.and_then(|c| c.get::<Analysis>(script)) {
        Some(analysis) => Cow::Borrowed(analysis),
        None => Cow::Owned(analyze(script)),
    }
}
