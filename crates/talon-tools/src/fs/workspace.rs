//! From a call's context to its jail: the workspace root, the deny prefixes and the extra roots
//! (skills directories) every file tool is confined to. File tools do not take the jail from here:
//! they take the call's [`Files`] façade ([`FsConfig::files`]), which routes the store's names
//! and hands out the jail for everything else.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use talon_core::CallContext;
use talon_fs::{FsError, Jail};

use super::files::Files;

/// An extra directory reachable by absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraRoot {
    pub path: PathBuf,
    pub writable: bool,
}

/// Workspaces seen so far: (path, whether the store's names are denied) → (device, inode, jail).
/// Bounded; cleared when full. Clones of one configuration share it, with or without a store,
/// so whether the jail denies the store's names is part of the key.
type JailCache = Arc<Mutex<HashMap<(PathBuf, bool), (u64, u64, Arc<Jail>)>>>;

/// Workspaces remembered before the cache starts over.
const MAX_CACHED_WORKSPACES: usize = 1024;

/// File-tool settings shared by both dialects.
#[derive(Debug, Clone, Default)]
pub struct FsConfig {
    /// Workspace-relative prefixes that are refused and hidden (`.talon` is always denied).
    pub deny: Vec<String>,
    /// Extra roots (seed 002's allowed prefixes for skills directories).
    pub extra_roots: Vec<ExtraRoot>,
    /// Absolute directories denied wherever a workspace contains them (Talon's data directory).
    pub deny_dirs: Vec<PathBuf>,
    /// The store behind the virtual files (context files, memory); none: everything is on disk.
    pub store: Option<talon_store::Store>,
    /// Let file tools open hard-linked files (`[fs] allow_hard_links`); refused by default.
    pub allow_hard_links: bool,
    /// Open jails by workspace, so a call does not re-open and canonicalise the root. An entry is
    /// reused only while the path still names the same directory (device and inode), so a
    /// workspace replaced on disk gets a fresh jail.
    cache: JailCache,
}

impl FsConfig {
    /// Settings with the given deny prefixes and extra roots.
    pub fn new(deny: Vec<String>, extra_roots: Vec<ExtraRoot>) -> Self {
        Self {
            deny,
            extra_roots,
            deny_dirs: Vec::new(),
            store: None,
            allow_hard_links: false,
            cache: JailCache::default(),
        }
    }
}

impl FsConfig {
    /// The file façade for one call: what every file tool reads, writes, lists and searches
    /// through.
    pub fn files<'a>(&'a self, ctx: &'a CallContext) -> Files<'a> {
        Files::new(self, ctx)
    }

    /// The jail for one call. The workspace comes from the call context (per user, per agent).
    /// With a store, it denies the names the store owns ([`super::virtual_files::shadowed`]).
    /// File tools get it through [`FsConfig::files`]; the command runtime takes it here for the
    /// working directory.
    pub(crate) fn jail(&self, ctx: &CallContext) -> Result<Arc<Jail>, String> {
        let Some(workspace) = ctx.workspace.as_ref() else {
            return Err("no workspace is configured for this call, so file tools cannot run; start Talon with --workspace DIR".into());
        };
        let identity = std::fs::metadata(workspace)
            .map(|m| (m.dev(), m.ino()))
            .ok();
        let key = (workspace.clone(), self.store.is_some());
        if let (Some((dev, ino)), Ok(cache)) = (identity, self.cache.lock())
            && let Some((d, i, jail)) = cache.get(&key)
            && (*d, *i) == (dev, ino)
        {
            return Ok(Arc::clone(jail));
        }
        let jail = Arc::new(self.open_jail(workspace)?);
        if let (Some((dev, ino)), Ok(mut cache)) = (identity, self.cache.lock()) {
            if cache.len() >= MAX_CACHED_WORKSPACES {
                cache.clear();
            }
            cache.insert(key, (dev, ino, Arc::clone(&jail)));
        }
        Ok(jail)
    }

    fn open_jail(&self, workspace: &std::path::Path) -> Result<Jail, String> {
        let mut deny = self.deny.clone();
        if self.store.is_some() {
            deny.extend(super::virtual_files::shadowed().map(str::to_string));
        }
        let mut jail = Jail::new(workspace, &deny)
            .map_err(|e| format!("the workspace cannot be opened: {e}"))?
            .allow_hard_links(self.allow_hard_links);
        for dir in &self.deny_dirs {
            jail = jail.deny_absolute(dir);
        }
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
