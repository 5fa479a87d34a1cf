//! The one way file tools reach files: a call's view of its workspace, in which the names the store
//! owns (context files and memory, [`super::virtual_files`]) are the store's documents and
//! everything else is the disk, through the jail.
//!
//! Routing used to be a step each tool remembered to take, and half of them did not: `Grep`,
//! `Glob`, `list_files`, `search`, `glob` and `NotebookEdit` saw the disk's copies, so a memory
//! written with `Write` could not be found with `Grep`, and `NotebookEdit` changed a disk file
//! `Read` never showed. So every file tool takes a [`Files`] for its call and nothing else:
//!
//! * reads, writes and edits of a routed name go to the store ([`Files::read_routed`],
//!   [`Files::write_routed`], [`Files::edit_routed`]);
//! * the disk is reached through [`Files::disk`], whose jail denies the routed names when there is
//!   a store, so a tool that forgets to route gets a refusal, never the disk's copy, and no
//!   spelling of a path (`sub/../SOUL.md`, a symlink to `memory/`) reaches it either;
//! * listings and searches go through a [`View`], which puts the store's documents where the
//!   jail hides the disk's copies. The search engine ([`super::find`]) is crate-private and called
//!   only from here.
//!
//! The façade decides *where* a name lives, never whether a path may be touched: deny prefixes,
//! protected paths, symlinks and hard links are the jail's rules, applied on every disk access.
//! `h21_arch_routing_file_tools_use_the_facade` fails when a tool reaches the jail, the router or
//! the search engine around this module.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use talon_core::CallContext;
use talon_fs::{DirEntry, EntryKind, FsError, Jail};

use super::find::{Found, GrepOptions, GrepReport, WalkOptions};
use super::virtual_files;
use super::workspace::FsConfig;

/// One call's files: the store's documents under routed names, the jail's disk elsewhere.
pub struct Files<'a> {
    fs: &'a FsConfig,
    ctx: &'a CallContext,
}

impl<'a> Files<'a> {
    pub(super) fn new(fs: &'a FsConfig, ctx: &'a CallContext) -> Self {
        Self { fs, ctx }
    }

    /// Reads a routed document; `None`: the path is on disk.
    pub async fn read_routed(&self, path: &str) -> Option<Result<String, String>> {
        virtual_files::read(self.fs.store.as_ref(), self.ctx, path).await
    }

    /// Replaces a routed document; `None`: the path is on disk.
    pub async fn write_routed(&self, path: &str, content: &str) -> Option<Result<String, String>> {
        virtual_files::write(self.fs.store.as_ref(), self.ctx, path, content).await
    }

    /// Changes a routed document atomically (`change` may run more than once when writers race);
    /// `None`: the path is on disk.
    pub async fn edit_routed<F>(&self, path: &str, change: F) -> Option<Result<String, String>>
    where
        F: Fn(&str) -> Result<String, String>,
    {
        virtual_files::edit(self.fs.store.as_ref(), self.ctx, path, change).await
    }

    /// The bytes of file `path` (at most `max_bytes`) and its name: a routed document's text,
    /// or a file on disk read through the jail, as every file tool reads. For tools that send a
    /// file somewhere (a channel message's media).
    pub async fn read_bytes(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<(String, Vec<u8>), String> {
        use std::io::Read as _;
        let name_of = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "file".into())
        };
        if let Some(text) = self.read_routed(path).await {
            let text = text?;
            if text.len() as u64 > max_bytes {
                return Err(format!("{path} is over {max_bytes} bytes"));
            }
            return Ok((name_of(Path::new(path)), text.into_bytes()));
        }
        let jail = self.disk()?;
        let located = jail.locate(path).map_err(|e| format!("{path}: {e}"))?;
        let opened = jail
            .open_read(&located)
            .map_err(|e| format!("{path}: {e}"))?;
        if opened.is_dir() {
            return Err(format!("{path} is a directory; give a file"));
        }
        let size = u64::try_from(opened.stat.st_size).unwrap_or(u64::MAX);
        if size > max_bytes {
            return Err(format!(
                "{path} is {size} bytes; files of at most {max_bytes} bytes can be sent"
            ));
        }
        let mut bytes = Vec::new();
        opened
            .file
            .take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{path}: {e}"))?;
        Ok((name_of(&opened.real_abs), bytes))
    }

    /// The jail for files on disk. With a store it denies every routed name.
    pub fn disk(&self) -> Result<Arc<Jail>, String> {
        self.fs.jail(self.ctx)
    }

    /// A view for listing and searching from `path` (the workspace root when `None`). The store's
    /// documents are loaded only when the path can contain some: the root, a routed name, or a
    /// path whose place cannot be told before the jail resolves it.
    pub async fn view(&self, path: Option<&str>) -> Result<View, String> {
        let jail = self.disk()?;
        let mut view = View {
            jail,
            workspace: self.ctx.workspace.clone(),
            routing: self.fs.store.is_some(),
            documents: Vec::new(),
        };
        let needs_documents = view.routing
            && match view.relative(path.unwrap_or(".")) {
                Some(rel) => rel.as_os_str().is_empty() || view.is_routed(&rel),
                None => true,
            };
        if needs_documents {
            let root = view.jail.root().to_path_buf();
            view.documents = virtual_files::documents(self.fs.store.as_ref(), self.ctx)
                .await?
                .into_iter()
                .map(|(rel, text)| Document {
                    abs: root.join(&rel),
                    rel: PathBuf::from(rel),
                    text: Arc::from(text),
                })
                .collect();
        }
        Ok(view)
    }
}

/// A document of the store, where it appears in the workspace.
struct Document {
    rel: PathBuf,
    abs: PathBuf,
    text: Arc<str>,
}

/// What a tool's path argument names: a directory or a file, on disk or in the store.
#[derive(Debug, Clone)]
pub struct Target {
    /// Absolute path (as the kernel resolved it, for disk files).
    pub abs: PathBuf,
    pub is_dir: bool,
    /// Modification time on disk (the epoch for the store's documents).
    pub mtime: SystemTime,
    routed: Option<Arc<str>>,
}

impl Target {
    /// The target as the one file to search.
    pub fn as_found(&self) -> Found {
        Found {
            path: self.abs.clone(),
            mtime: self.mtime,
            routed: self.routed.clone(),
        }
    }
}

/// The workspace as one call sees it, for listing and searching: the jail's disk with the store's
/// documents in place of the names the jail denies for them.
pub struct View {
    jail: Arc<Jail>,
    /// The call's workspace as configured (absolute paths may use it rather than the canonical
    /// root, as routed reads accept).
    workspace: Option<PathBuf>,
    routing: bool,
    documents: Vec<Document>,
}

impl View {
    /// The workspace root's canonical path.
    pub fn root(&self) -> &Path {
        self.jail.root()
    }

    /// `input` relative to the workspace root, without `.`; `None` for a path outside it or one
    /// with `..` (only the kernel can say where that leads; the jail does).
    fn relative(&self, input: &str) -> Option<PathBuf> {
        let path = Path::new(input);
        let rel = if path.is_absolute() {
            path.strip_prefix(self.jail.root()).ok().or_else(|| {
                self.workspace
                    .as_deref()
                    .and_then(|ws| path.strip_prefix(ws).ok())
            })?
        } else {
            path
        };
        let mut out = PathBuf::new();
        for c in rel.components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                _ => return None,
            }
        }
        Some(out)
    }

    /// True if a workspace-relative path lies under a name the store owns.
    fn is_routed(&self, rel: &Path) -> bool {
        self.routing
            && rel.components().next().is_some_and(|first| {
                virtual_files::shadowed().any(|name| first.as_os_str() == name)
            })
    }

    /// The workspace-relative path of `input` when it names the store's part of the workspace.
    fn routed_rel(&self, input: &str) -> Option<PathBuf> {
        self.relative(input).filter(|rel| self.is_routed(rel))
    }

    /// Resolves a tool's path argument to a directory or file. A routed name that holds no
    /// document, and no document beneath it, does not exist.
    pub fn target(&self, input: &str) -> Result<Target, FsError> {
        if let Some(rel) = self.routed_rel(input) {
            let abs = self.root().join(&rel);
            if let Some(doc) = self.documents.iter().find(|d| d.rel == rel) {
                return Ok(Target {
                    abs,
                    is_dir: false,
                    mtime: SystemTime::UNIX_EPOCH,
                    routed: Some(Arc::clone(&doc.text)),
                });
            }
            if self.documents.iter().any(|d| d.rel.starts_with(&rel)) {
                return Ok(Target {
                    abs,
                    is_dir: true,
                    mtime: SystemTime::UNIX_EPOCH,
                    routed: None,
                });
            }
            return Err(FsError::NotFound { path: abs });
        }
        let located = self.jail.locate(input)?;
        let opened = self.jail.open_read(&located)?;
        let mtime = opened
            .file
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        Ok(Target {
            is_dir: opened.is_dir(),
            abs: opened.real_abs,
            mtime,
            routed: None,
        })
    }

    /// How `input` is shown to the model: its absolute path (not resolved).
    pub fn shown(&self, input: &str) -> Result<PathBuf, FsError> {
        match self.routed_rel(input) {
            Some(rel) => Ok(self.root().join(rel)),
            None => self.jail.locate(input).map(|l| self.jail.display(&l)),
        }
    }

    /// A directory's entries, sorted by name: the disk's (without denied names), and at the
    /// workspace root and under routed names the store's documents.
    pub fn list(&self, input: &str) -> Result<Vec<DirEntry>, FsError> {
        let (mut entries, rel) = match self.routed_rel(input) {
            Some(rel) => {
                if self.documents.iter().any(|d| d.rel == rel) {
                    return Err(FsError::NotADirectory {
                        path: self.root().join(rel),
                    });
                }
                if !self.documents.iter().any(|d| d.rel.starts_with(&rel)) {
                    return Err(FsError::NotFound {
                        path: self.root().join(rel),
                    });
                }
                (Vec::new(), rel)
            }
            None => {
                let located = self.jail.locate(input)?;
                let entries = self.jail.list(&located)?;
                if !self.routing || self.jail.display(&located) != self.root() {
                    return Ok(entries);
                }
                (entries, PathBuf::new())
            }
        };
        for doc in &self.documents {
            let Ok(rest) = doc.rel.strip_prefix(&rel) else {
                continue;
            };
            let mut parts = rest.components();
            let Some(name) = parts.next() else { continue };
            let name = name.as_os_str().to_string_lossy().into_owned();
            let is_dir = parts.next().is_some();
            if is_dir && entries.iter().any(|e: &DirEntry| e.name == name) {
                continue;
            }
            entries.push(DirEntry {
                name,
                kind: if is_dir {
                    EntryKind::Dir
                } else {
                    EntryKind::File
                },
                size: if is_dir { 0 } else { doc.text.len() as u64 },
                mtime_ns: 0,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// [`Self::find`] on the blocking threads (walking the tree is blocking I/O), the view
    /// handed back with the answer. `None` only when the runtime is shutting down.
    pub async fn find_off_thread(
        self,
        options: WalkOptions,
    ) -> Option<(Self, Result<Vec<Found>, String>)> {
        super::blocking(move || {
            let found = self.find(&options);
            (self, found)
        })
        .await
    }

    /// Every file under `options.base` that passes the filters, in no particular order: the
    /// walk's, and the store's documents beneath the base.
    pub fn find(&self, options: &WalkOptions) -> Result<Vec<Found>, String> {
        let base_rel = options
            .base
            .strip_prefix(self.root())
            .ok()
            .map(Path::to_path_buf);
        match base_rel {
            Some(base) if self.is_routed(&base) => {
                super::find::filter_documents(options, self.beneath(&base))
            }
            Some(base) if base.as_os_str().is_empty() => {
                let mut found = super::find::find_files(&self.jail, options)?;
                found.extend(super::find::filter_documents(options, self.beneath(&base))?);
                Ok(found)
            }
            _ => super::find::find_files(&self.jail, options),
        }
    }

    /// The store's documents at or beneath `base` (workspace-relative), as (absolute path, text).
    fn beneath<'s>(&'s self, base: &'s Path) -> impl Iterator<Item = (&'s Path, &'s Arc<str>)> {
        self.documents
            .iter()
            .filter(move |d| d.rel.starts_with(base))
            .map(|d| (d.abs.as_path(), &d.text))
    }

    /// Searches `files` (found by [`View::find`] or [`Target::as_found`]).
    pub fn grep(&self, files: Vec<Found>, options: &GrepOptions) -> Result<GrepReport, String> {
        super::find::grep(&self.jail, files, options)
    }
}
