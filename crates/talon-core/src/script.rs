//! The analysis of a shell script argument, made once by the pipeline and carried to the tool.
//!
//! A tool whose argument is a shell script says so in its spec
//! ([`crate::ToolSpec::shell_script_arg`]). The pipeline's permission step (step 6) analyses
//! that argument with the [`ScriptAnalyzer`] it was built with, hands the analysis to the
//! permission checker and the approver ([`crate::permission::PermissionRequest::script`]), and
//! then to the tool ([`crate::Authorized::script`]): the command is parsed once per call, and
//! what the tool acts on (routing to credentialed execution, say) is what permission was decided
//! on. The parser lives above this crate (`talon-exec`), so the analysis travels type-erased and
//! the crates that know its type downcast it ([`ScriptAnalysis::get`]).
//!
//! Only the pipeline creates a [`ScriptAnalysis`]: a caller cannot hand a tool an analysis of
//! some other, harmless command. Its constructor is private to this crate (error E0624):
//!
//! ```compile_fail,E0624
//! use std::any::Any;
//! use std::sync::Arc;
//! use talon_core::{ScriptAnalysis, ScriptAnalyzer};
//! struct Harmless;
//! impl ScriptAnalyzer for Harmless {
//!     fn analyze(&self, _script: &str) -> Arc<dyn Any + Send + Sync> {
//!         Arc::new("ls")
//!     }
//! }
//! let forged = ScriptAnalysis::new(&Harmless, "rm -rf /");
//! ```

use std::any::Any;
use std::sync::Arc;

/// Analyses shell scripts for the pipeline (implemented above this crate, by the crate that
/// owns the parser).
pub trait ScriptAnalyzer: Send + Sync {
    /// The analysis of `script`; never fails (what cannot be parsed is part of the analysis).
    fn analyze(&self, script: &str) -> Arc<dyn Any + Send + Sync>;
}

/// The pipeline's analysis of one call's shell script argument. Cheap to clone.
#[derive(Clone)]
pub struct ScriptAnalysis {
    script: Arc<str>,
    analysis: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for ScriptAnalysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptAnalysis")
            .field("script", &self.script)
            .finish_non_exhaustive()
    }
}

impl ScriptAnalysis {
    /// Analyses `script` with `analyzer`. Crate-private: only the pipeline makes one.
    pub(crate) fn new(analyzer: &dyn ScriptAnalyzer, script: &str) -> Self {
        Self {
            script: Arc::from(script),
            analysis: analyzer.analyze(script),
        }
    }

    /// The script that was analysed (the argument as the tool receives it).
    pub fn script(&self) -> &str {
        &self.script
    }

    /// The analysis, if it is a `T` and was made of exactly `script`; `None` otherwise, and the
    /// caller then analyses `script` itself.
    pub fn get<T: Any>(&self, script: &str) -> Option<&T> {
        if *self.script != *script {
            return None;
        }
        self.analysis.downcast_ref::<T>()
    }
}
