//! `talon skills list|show|publish|remove`: the skills every source offers (the workspace, the
//! home directory, the store, the data directory), and the store's published ones managed.
//! `publish` reads a directory as `publish_skill` does (no link out of it, size limits, the
//! frontmatter checked) and publishes it for everyone, or for one user with `--user`. What
//! skill authors wrote is printed with control characters made visible.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use talon_core::CallContext;
use talon_core::visible::visible;
use talon_tools::skills::catalog::Skills;

use super::{fail, usage_error};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills there are (name, source, description).
    List {
        /// The workspace whose `.claude/skills` counts (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Include this user's published skills.
        #[arg(long)]
        user: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One skill: where it is from, its frontmatter, files, uses and instructions.
    Show {
        /// The skill's name.
        name: String,
        /// The workspace whose `.claude/skills` counts (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Include this user's published skills.
        #[arg(long)]
        user: Option<String>,
    },
    /// Publish a skill directory (it holds SKILL.md) to the store.
    Publish {
        /// The skill's directory.
        dir: PathBuf,
        /// Only for this user (default: everyone).
        #[arg(long)]
        user: Option<String>,
    },
    /// Remove a published skill.
    Remove {
        /// The skill's name.
        name: String,
        /// The user it was published for (default: everyone's).
        #[arg(long)]
        user: Option<String>,
    },
}

pub async fn run(config: Config, data_dir: &Path, command: SkillsCommand) -> ExitCode {
    let store = match crate::store::open(&config, data_dir).await {
        Ok(store) => store,
        Err(e) => return fail(e),
    };
    let builtin = config.builtin(data_dir);
    let skills = Skills::new(builtin.skills, Arc::new(builtin.fs), Some(store.clone()));
    let ctx = |workspace: Option<PathBuf>, user: Option<String>| {
        let mut ctx = CallContext::new("cli:skills");
        ctx.workspace = workspace.or_else(|| std::env::current_dir().ok());
        ctx.user = user;
        ctx
    };
    match command {
        SkillsCommand::List {
            workspace,
            user,
            json,
        } => {
            let found = skills.all(&ctx(workspace, user)).await;
            for problem in &found.problems {
                eprintln!("talon: skipped {}", visible(problem));
            }
            if json {
                let list: Vec<serde_json::Value> = found
                    .skills
                    .iter()
                    .map(|s| {
                        serde_json::json!({"name": s.md.name, "description": s.md.description,
                            "source": s.source.label(), "tags": s.md.tags, "files": s.files})
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(list));
            } else if found.skills.is_empty() {
                println!("no skills");
            } else {
                for s in &found.skills {
                    println!(
                        "{}\t{}\t{}",
                        s.md.name,
                        s.source.label(),
                        visible(&s.md.description)
                    );
                }
            }
            ExitCode::SUCCESS
        }
        SkillsCommand::Show {
            name,
            workspace,
            user,
        } => match skills.get_noted(&ctx(workspace, user), &name).await {
            Ok((skill, note)) => {
                let uses = store
                    .skill_use_counts()
                    .await
                    .ok()
                    .and_then(|c| c.into_iter().find(|(n, _)| *n == name))
                    .map_or(0, |(_, n)| n);
                println!(
                    "{} ({}), used {uses} time(s)",
                    skill.md.name,
                    skill.source.label()
                );
                println!(
                    "frontmatter: {}",
                    visible(&serde_json::Value::Object(skill.md.frontmatter.clone()).to_string())
                );
                if !skill.files.is_empty() {
                    println!("files: {}", visible(&skill.files.join(", ")));
                }
                if let Some(note) = note {
                    println!("{note}");
                }
                println!("\n{}", visible(&skill.md.instructions));
                ExitCode::SUCCESS
            }
            Err(e) => usage_error(visible(&e)),
        },
        SkillsCommand::Publish { dir, user } => publish(&store, &dir, user.as_deref()).await,
        SkillsCommand::Remove { name, user } => {
            match store
                .remove_skill(user.as_deref().unwrap_or_default(), &name)
                .await
            {
                Ok(true) => {
                    println!("removed skill {}", visible(&name));
                    ExitCode::SUCCESS
                }
                Ok(false) => usage_error(format!(
                    "no published skill {}{}; `talon skills list` lists them",
                    visible(&name),
                    user.map(|u| format!(" of user {}", visible(&u)))
                        .unwrap_or_default()
                )),
                Err(e) => fail(e),
            }
        }
    }
}

async fn publish(store: &talon_store::Store, dir: &Path, user: Option<&str>) -> ExitCode {
    let (md, files) = match talon_tools::skills::publish_skill::read_skill_dir_on_disk(dir).await {
        Ok(read) => read,
        Err(e) => return usage_error(format!("{}: {}", dir.display(), visible(&e))),
    };
    let user = user.unwrap_or_default();
    match talon_tools::skills::publish_skill::store_skill(store, &md, &files, user).await {
        Ok(version) => {
            println!(
                "published skill {} (version {version}, {} file(s)) for {}",
                md.name,
                files.len(),
                if user.is_empty() { "everyone" } else { user }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
