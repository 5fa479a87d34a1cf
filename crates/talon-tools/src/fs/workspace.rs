//! From a call's context to its jail: the workspace root, the deny prefixes and the extra roots
//! (skills directories) every file tool is confined to.

use std::path::PathBuf;

use talon_core::CallContext;
use talon_fs::{FsError, Jail};

/// An extra directory reachable by absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraRoot {
    pub path: PathBuf,
    pub writable: bool,
}

/// File-tool settings shared by both dialects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsConfig {
    /// Workspace-relative prefixes that are refused and hidden (`.talon` is always denied).
    pub deny: Vec<String>,
    /// Extra roots (seed 002's allowed prefixes for skills directories).
    pub extra_roots: Vec<ExtraRoot>,
}

impl FsConfig {
    /// The jail for one call. The workspace comes from the call context (per user, per agent).
    pub fn jail(&self, ctx: &CallContext) -> Result<Jail, String> {
        let Some(workspace) = ctx.workspace.as_ref() else {
            return Err("no workspace is configured for this call, so file tools cannot run; start Talon with --workspace DIR".into());
        };
        let mut jail = Jail::new(workspace, &self.deny)
            .map_err(|e| format!("the workspace cannot be opened: {e}"))?;
        for root in &self.extra_roots {
            jail = jail.allow_root(&root.path, root.writable).map_err(|e| {
                format!(
                    "the extra root {} cannot be opened: {e}",
                    root.path.display()
                )
            })?;
        }
        Ok(jail)
    }
}

/// True for errors that mean "not there" (used to pick dialect messages).
pub fn is_not_found(e: &FsError) -> bool {
    matches!(e, FsError::NotFound { .. })
}
