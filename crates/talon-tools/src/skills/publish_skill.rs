//! `publish_skill`: registers a skill directory of the workspace in the store, for the calling
//! user. Publishing for everyone puts instructions into every user's system prompt: that is the
//! operator's act (`talon skills publish`), never a model's, so a call without a user is refused
//! (issue 35: it published for everyone).
//!
//! The directory is read through the call's jail like every file tool reads: a path outside
//! the workspace (GoClaw published any host directory given by absolute path) is refused there,
//! and so is a symbolic link or a hard-linked file inside the skill. `SKILL.md` must parse
//! ([`super::skill_md`]), its `name` must be the directory's, and the whole is bounded:
//! [`MAX_FILES`] files, [`MAX_SKILL_BYTES`] in all.

use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_fs::{EntryKind, Jail};

use super::catalog::{MAX_FILES, Skills, read_in_jail};
use super::skill_md;
use crate::fs::files::View;

/// The most a published skill may hold, all files together (GoClaw's limit).
pub const MAX_SKILL_BYTES: u64 = 20 * 1024 * 1024;
/// Directory depth walked.
const MAX_DEPTH: usize = 8;

/// A skill directory read: its `SKILL.md` and every other file (relative path, content).
pub type SkillDir = (skill_md::SkillMd, Vec<(String, Vec<u8>)>);

/// Input of [`PublishSkill`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishSkillInput {
    /// The skill's directory in the workspace (it holds SKILL.md), e.g. ".claude/skills/pdf-forms".
    pub path: String,
}

/// The `publish_skill` tool.
#[derive(Debug, Clone)]
pub struct PublishSkill {
    pub skills: Skills,
}

impl Tool for PublishSkill {
    type Input = PublishSkillInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "publish_skill",
            "Publish a skill directory of the workspace (SKILL.md with name and description \
             frontmatter, plus its files) so it can be found with skill_search in later \
             conversations.",
            SideEffect::Mutating,
        )
        .in_group("skills")
    }

    async fn execute(&self, call: Authorized<PublishSkillInput>) -> ToolOutput {
        let ctx = call.ctx();
        let Some(store) = &self.skills.store else {
            return ToolOutput::error("skills cannot be published without a store");
        };
        let dir = call.input().path.trim_end_matches('/').to_string();
        let files = self.skills.fs.files(ctx);
        let (jail, view) = match (files.disk(), files.view(Some(&dir)).await) {
            (Ok(jail), Ok(view)) => (jail, view),
            (Err(e), _) | (_, Err(e)) => return ToolOutput::error(e),
        };
        let read = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || read_skill_dir(&view, &jail, &dir)).await
        };
        let (md, files) = match read {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => return ToolOutput::error(format!("{dir}: {e}")),
            Err(e) => return ToolOutput::error(format!("reading {dir} failed: {e}")),
        };
        let Some(user) = ctx.user.clone().filter(|u| !u.is_empty()) else {
            return ToolOutput::error(
                "publish_skill publishes a skill for the calling user, and this call has no user; \
                 a skill for everyone is the operator's to publish (talon skills publish DIR)",
            );
        };
        let published = store_skill(store, &md, &files, &user).await;
        match published {
            Ok(version) => ToolOutput::text(format!(
                "Published skill {} (version {version}, {} file(s) besides SKILL.md), for user {user}.",
                md.name,
                files.len(),
            )),
            Err(e) => ToolOutput::error(format!("the skill could not be stored: {e}")),
        }
    }
}

/// Stores the skill read from a directory as the next version of `md.name` for `user` (`""`:
/// everyone), the one write the tool and `talon skills publish` share; the version stored.
pub async fn store_skill(
    store: &talon_store::Store,
    md: &skill_md::SkillMd,
    files: &[(String, Vec<u8>)],
    user: &str,
) -> Result<i64, talon_store::StoreError> {
    let frontmatter = serde_json::Value::Object(md.frontmatter.clone()).to_string();
    store
        .publish_skill(&talon_store::NewSkill {
            name: &md.name,
            user,
            description: &md.description,
            frontmatter: &frontmatter,
            instructions: &md.instructions,
            files,
        })
        .await
}

/// A skill directory anywhere on disk (the operator's `talon skills publish`), read as the
/// tool reads one, with its parent as the workspace: nothing outside the directory is read.
pub async fn read_skill_dir_on_disk(dir: &std::path::Path) -> Result<SkillDir, String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err("give the skill's directory, not /".into());
    };
    let mut ctx = talon_core::CallContext::new("cli:skills-publish");
    ctx.workspace = Some(parent.to_path_buf());
    let fs = crate::fs::workspace::FsConfig::new(Vec::new(), Vec::new());
    let files = fs.files(&ctx);
    let name = name.to_string_lossy();
    let (jail, view) = (files.disk()?, files.view(Some(&name)).await?);
    read_skill_dir(&view, &jail, &name)
}

/// `SKILL.md` and every other file of the skill directory `dir` (in the call's workspace,
/// listed through its file façade and read through its jail), validated.
pub fn read_skill_dir(view: &View, jail: &Jail, dir: &str) -> Result<SkillDir, String> {
    let located = jail.locate(dir).map_err(|e| e.to_string())?;
    let name = located
        .rel()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = read_in_jail(jail, &format!("{dir}/SKILL.md"))?;
    let text = String::from_utf8(text).map_err(|_| "SKILL.md is not UTF-8 text".to_string())?;
    let md = skill_md::parse(&text)?;
    if md.name != name {
        return Err(format!(
            "SKILL.md names the skill {:?} but its directory is {name:?}: they must match",
            md.name
        ));
    }
    let mut paths = Vec::new();
    walk(view, dir, "", 0, &mut paths)?;
    let mut read = Vec::new();
    let mut total = text.len() as u64;
    for path in paths.into_iter().filter(|p| p != "SKILL.md") {
        let located = jail
            .locate(&format!("{dir}/{path}"))
            .map_err(|e| format!("{path}: {e}"))?;
        let opened = jail
            .open_read(&located)
            .map_err(|e| format!("{path}: {e}"))?;
        let size = u64::try_from(opened.stat.st_size).unwrap_or(u64::MAX);
        total = total.saturating_add(size);
        if total > MAX_SKILL_BYTES {
            return Err(format!(
                "the skill is larger than {} MiB in all; leave large data out of it",
                MAX_SKILL_BYTES / (1024 * 1024)
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        std::io::Read::read_to_end(&mut std::io::Read::take(opened.file, size + 1), &mut bytes)
            .map_err(|e| format!("{path}: {e}"))?;
        read.push((path, bytes));
    }
    Ok((md, read))
}

/// Every file under `dir/rel`; a link or special file is an error (a skill's files must be
/// inside its directory).
fn walk(
    listing: &View,
    dir: &str,
    rel: &str,
    depth: usize,
    files: &mut Vec<String>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("{rel}: nested deeper than {MAX_DEPTH} directories"));
    }
    let here = if rel.is_empty() {
        dir.to_string()
    } else {
        format!("{dir}/{rel}")
    };
    for entry in listing.list(&here).map_err(|e| format!("{here}: {e}"))? {
        let path = if rel.is_empty() {
            entry.name.clone()
        } else {
            format!("{rel}/{}", entry.name)
        };
        match entry.kind {
            EntryKind::Dir => walk(listing, dir, &path, depth + 1, files)?,
            EntryKind::File => {
                if files.len() >= MAX_FILES {
                    return Err(format!("the skill has more than {MAX_FILES} files"));
                }
                files.push(path);
            }
            EntryKind::Symlink => {
                return Err(format!(
                    "{path} is a symbolic link; a skill's files must be inside its directory"
                ));
            }
            EntryKind::Other => return Err(format!("{path} is not a regular file")),
        }
    }
    Ok(())
}
