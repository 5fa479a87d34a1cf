//! Where skills come from, and reading them.
//!
//! Four sources, the first with a name winning: the operator's skills — the global ones in
//! Talon's data directory (`<data>/skills/`, seed 003's tier 4) and the home's
//! (`~/.claude/skills/`) —, then skills published to the store (the user's own, then
//! everyone's), and last the call's workspace (`.claude/skills/<name>/`, read through the
//! call's jail like every file tool). A repository is written by anyone who can push to it, so
//! its skill never replaces the operator's or a published one of the same name (issue 35: it
//! did); the loser is recorded in [`Found::shadowed`] and `use_skill` says which one the model
//! got. A workspace skill's text is the repository's, not the operator's: the system prompt
//! lists it inside the untrusted-content fence. A skill is listed by name and description only;
//! its instructions and files are read when it is used.
//!
//! On disk a skill directory is read without following symbolic links (a link is skipped, so
//! a skill cannot reach a file outside its directory), with at most [`MAX_FILES`] files listed.
//! A directory whose `SKILL.md` does not parse is reported, never half-loaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use talon_core::CallContext;
use talon_fs::{EntryKind, Jail};

use super::skill_md::{self, MAX_SKILL_MD_BYTES, SkillMd};
use crate::fs::files::View;
use crate::fs::workspace::FsConfig;

/// The most files of one skill listed or published.
pub const MAX_FILES: usize = 500;
/// The largest skill file read by `use_skill`.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Directory depth walked inside a skill.
const MAX_DEPTH: usize = 8;
/// The workspace's skills directory.
pub const WORKSPACE_SKILLS: &str = ".claude/skills";

/// Where a skill was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `.claude/skills/` of the call's workspace.
    Workspace,
    /// `~/.claude/skills/`.
    Home(PathBuf),
    /// Published to the store by `owner` (`''`: everyone's).
    Published { owner: String },
    /// `<data>/skills/`.
    Global(PathBuf),
}

impl Source {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Home(_) => "home",
            Self::Published { owner } if owner.is_empty() => "published",
            Self::Published { .. } => "published (yours)",
            Self::Global(_) => "global",
        }
    }
}

/// One skill.
#[derive(Debug, Clone)]
pub struct Skill {
    pub md: SkillMd,
    pub source: Source,
    /// Its other files, relative to its directory, sorted.
    pub files: Vec<String>,
}

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct SkillsConfig {
    /// `~/.claude/skills`.
    pub home: Option<PathBuf>,
    /// `<data>/skills`.
    pub global: Option<PathBuf>,
}

/// The catalogue over every source.
#[derive(Debug, Clone)]
pub struct Skills {
    pub(crate) config: SkillsConfig,
    pub(crate) fs: Arc<FsConfig>,
    pub(crate) store: Option<talon_store::Store>,
}

/// What a search of the sources found: the skills, and the directories that are not skills
/// (with why).
#[derive(Debug, Default)]
pub struct Found {
    pub skills: Vec<Skill>,
    pub problems: Vec<String>,
    /// Skills not used because one of the same name from a stronger source won: (name, the
    /// loser's source).
    pub shadowed: Vec<(String, Source)>,
}

impl Found {
    fn add(&mut self, skill: Skill) {
        if self.skills.iter().any(|s| s.md.name == skill.md.name) {
            self.shadowed.push((skill.md.name, skill.source));
        } else {
            self.skills.push(skill);
        }
    }
}

impl Skills {
    /// The catalogue over `config`'s directories, the workspace of each call (through `fs`'s
    /// jail) and `store`'s published skills.
    pub fn new(config: SkillsConfig, fs: Arc<FsConfig>, store: Option<talon_store::Store>) -> Self {
        Self { config, fs, store }
    }

    /// Every skill the call may use, by source then name: the operator's (global, home), the
    /// published ones, then the workspace's.
    pub async fn all(&self, ctx: &CallContext) -> Found {
        let mut found = Found::default();
        if let Some(global) = &self.config.global {
            let (skills, problems) = disk_skills(global, |dir| Source::Global(dir.to_path_buf()));
            skills.into_iter().for_each(|s| found.add(s));
            found.problems.extend(problems);
        }
        if let Some(home) = &self.config.home {
            let (skills, problems) = disk_skills(home, |dir| Source::Home(dir.to_path_buf()));
            skills.into_iter().for_each(|s| found.add(s));
            found.problems.extend(problems);
        }
        if let Some(store) = &self.store {
            match store
                .published_skills(ctx.user.as_deref().unwrap_or_default())
                .await
            {
                Ok(published) => {
                    for p in published {
                        found.add(Skill {
                            md: published_md(&p),
                            source: Source::Published { owner: p.user },
                            files: p.files,
                        });
                    }
                }
                Err(e) => found
                    .problems
                    .push(format!("published skills are unavailable: {e}")),
            }
        }
        let files = self.fs.files(ctx);
        if let (Ok(jail), Ok(view)) = (files.disk(), files.view(Some(WORKSPACE_SKILLS)).await) {
            let (skills, problems) = workspace_skills(&view, &jail);
            skills.into_iter().for_each(|s| found.add(s));
            found.problems.extend(problems);
        }
        found
    }

    /// The regular `.md` files directly in the workspace's `dir` (`.claude/agents`), listed and
    /// read through the call's jail as skills are (a link out of the workspace, a device or a
    /// file larger than `max_bytes` is left out), with their paths, in name order.
    pub async fn workspace_markdown(
        &self,
        ctx: &CallContext,
        dir: &str,
        max_bytes: u64,
    ) -> Vec<(String, String)> {
        let files = self.fs.files(ctx);
        let (Ok(jail), Ok(view)) = (files.disk(), files.view(Some(dir)).await) else {
            return Vec::new();
        };
        let Ok(mut entries) = view.list(dir) else {
            return Vec::new();
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
            .iter()
            .filter(|e| e.kind == EntryKind::File && e.name.ends_with(".md"))
            .filter_map(|e| {
                let path = format!("{dir}/{}", e.name);
                let bytes = read_capped_in_jail(&jail, &path, max_bytes).ok()?;
                Some((path, String::from_utf8(bytes).ok()?))
            })
            .collect()
    }

    /// The skill `name` and, when a weaker source had one of the same name too, a note saying
    /// which one this is and which was left out.
    pub async fn get_noted(
        &self,
        ctx: &CallContext,
        name: &str,
    ) -> Result<(Skill, Option<String>), String> {
        let found = self.all(ctx).await;
        let skill = pick(&found, name)?;
        let note = found
            .shadowed
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, source)| source.label())
            .next()
            .map(|loser| {
                format!(
                    "Note: this is the {} skill {name:?}; a {loser} skill of the same name exists and was not used (the operator's and published skills win over a repository's).",
                    skill.source.label()
                )
            });
        Ok((skill, note))
    }

    /// The text of `path`, one of `skill`'s files.
    pub async fn file(
        &self,
        ctx: &CallContext,
        skill: &Skill,
        path: &str,
    ) -> Result<String, String> {
        if !skill.files.iter().any(|f| f == path) {
            return Err(format!(
                "the skill {} has no file {path:?}; its files: {}",
                skill.md.name,
                if skill.files.is_empty() {
                    "none".to_string()
                } else {
                    skill.files.join(", ")
                }
            ));
        }
        let bytes = match &skill.source {
            Source::Workspace => {
                let jail = self.fs.files(ctx).disk()?;
                read_in_jail(
                    &jail,
                    &format!("{WORKSPACE_SKILLS}/{}/{path}", skill.md.name),
                )?
            }
            Source::Home(dir) | Source::Global(dir) => read_on_disk(&dir.join(path))?,
            Source::Published { owner } => {
                let store = self.store.as_ref().ok_or("the store is unavailable")?;
                store
                    .skill_file(owner, &skill.md.name, path)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{path} is gone from the skill"))?
            }
        };
        String::from_utf8(bytes)
            .map_err(|_| format!("{path} is not text; skills' binary files cannot be shown"))
    }
}

/// A published skill's parts as the `SKILL.md` they were validated from.
fn published_md(p: &talon_store::StoredSkill) -> SkillMd {
    let frontmatter: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&p.frontmatter).unwrap_or_default();
    let tags = frontmatter
        .get("tags")
        .and_then(|t| t.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    SkillMd {
        name: p.name.clone(),
        description: p.description.clone(),
        tags,
        frontmatter,
        instructions: p.instructions.clone(),
    }
}

fn read_on_disk(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} is {} bytes; skill files are shown up to {MAX_FILE_BYTES}",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The skills in `root/<name>/SKILL.md` on disk (symbolic links skipped).
fn disk_skills(root: &Path, source: impl Fn(&Path) -> Source) -> (Vec<Skill>, Vec<String>) {
    let (mut skills, mut problems) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(root) else {
        return (skills, problems);
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let md = match read_on_disk(&dir.join("SKILL.md"))
            .and_then(|b| String::from_utf8(b).map_err(|_| "SKILL.md is not UTF-8".into()))
            .and_then(|t| skill_md::parse(&t))
        {
            Ok(md) => md,
            Err(e) => {
                problems.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        let mut files = Vec::new();
        walk_disk(&dir, Path::new(""), 0, &mut files);
        files.retain(|f| f != "SKILL.md");
        skills.push(Skill {
            md,
            source: source(&dir),
            files,
        });
    }
    (skills, problems)
}

fn walk_disk(dir: &Path, rel: &Path, depth: usize, files: &mut Vec<String>) {
    if depth > MAX_DEPTH || files.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir.join(rel)) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = rel.join(entry.file_name());
        if kind.is_dir() {
            walk_disk(dir, &path, depth + 1, files);
        } else if kind.is_file() && files.len() < MAX_FILES {
            files.push(path.to_string_lossy().into_owned());
        }
    }
}

/// The skills in the workspace's `.claude/skills/`, listed through the call's file façade and
/// read through its jail.
fn workspace_skills(view: &View, jail: &Jail) -> (Vec<Skill>, Vec<String>) {
    let (mut skills, mut problems) = (Vec::new(), Vec::new());
    let Ok(entries) = view.list(WORKSPACE_SKILLS) else {
        return (skills, problems);
    };
    for entry in entries.iter().filter(|e| e.kind == EntryKind::Dir) {
        let dir = format!("{WORKSPACE_SKILLS}/{}", entry.name);
        let md = match read_in_jail(jail, &format!("{dir}/SKILL.md"))
            .and_then(|b| String::from_utf8(b).map_err(|_| "SKILL.md is not UTF-8".into()))
            .and_then(|t| skill_md::parse(&t))
        {
            Ok(md) => md,
            Err(e) => {
                problems.push(format!("{dir}: {e}"));
                continue;
            }
        };
        let mut paths = Vec::new();
        walk_listed(view, &dir, "", 0, &mut paths);
        paths.retain(|f| f != "SKILL.md");
        skills.push(Skill {
            md,
            source: Source::Workspace,
            files: paths,
        });
    }
    (skills, problems)
}

/// The regular files under `dir/rel` in the workspace (links and other kinds skipped).
fn walk_listed(listing: &View, dir: &str, rel: &str, depth: usize, files: &mut Vec<String>) {
    if depth > MAX_DEPTH || files.len() >= MAX_FILES {
        return;
    }
    let here = if rel.is_empty() {
        dir.to_string()
    } else {
        format!("{dir}/{rel}")
    };
    let Ok(entries) = listing.list(&here) else {
        return;
    };
    for entry in entries {
        let path = if rel.is_empty() {
            entry.name.clone()
        } else {
            format!("{rel}/{}", entry.name)
        };
        match entry.kind {
            EntryKind::Dir => walk_listed(listing, dir, &path, depth + 1, files),
            EntryKind::File if files.len() < MAX_FILES => files.push(path),
            _ => {}
        }
    }
}

/// A file's bytes through the jail (at most [`MAX_SKILL_MD_BYTES`] for `SKILL.md`, else
/// [`MAX_FILE_BYTES`]).
pub(crate) fn read_in_jail(jail: &Jail, path: &str) -> Result<Vec<u8>, String> {
    let limit = if path.ends_with("SKILL.md") {
        MAX_SKILL_MD_BYTES as u64
    } else {
        MAX_FILE_BYTES
    };
    read_capped_in_jail(jail, path, limit)
}

/// A file's bytes through the jail, at most `limit` of them.
fn read_capped_in_jail(jail: &Jail, path: &str, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let located = jail.locate(path).map_err(|e| format!("{path}: {e}"))?;
    let opened = jail
        .open_read(&located)
        .map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    opened
        .file
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{path} is larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// The skill `name` among `found`, or why not (with the names there are).
fn pick(found: &Found, name: &str) -> Result<Skill, String> {
    let names: Vec<&str> = found.skills.iter().map(|s| s.md.name.as_str()).collect();
    found
        .skills
        .iter()
        .find(|s| s.md.name == name)
        .cloned()
        .ok_or_else(|| {
            if names.is_empty() {
                format!("there is no skill {name:?}: no skills are installed")
            } else {
                format!(
                    "there is no skill {name:?}; the skills are: {}. skill_search finds them by what they do",
                    names.join(", ")
                )
            }
        })
}
