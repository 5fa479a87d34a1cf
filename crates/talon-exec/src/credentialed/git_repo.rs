//! The repository a credentialed `git` acts on, pinned and checked before it runs.
//!
//! git runs programs its configuration names (`core.fsmonitor`, `core.hooksPath`, aliases with
//! `!`, `core.sshCommand`, `credential.helper`, `*.textconv`, filter drivers, …) and reads that
//! configuration from the repository it finds. An outside review made a repository in a
//! subdirectory of the workspace with such a key, pointed `credentialed_exec`'s `working_dir`
//! at it, and read the stored `http.extraHeader` back (issue 35). So:
//!
//! * **pinned**: the only repository credentialed git may act on is the workspace's own
//!   (`<workspace>/.git`, a directory), whose configuration commands cannot write (the sandbox
//!   keeps `.git` read-only as a unit and the file tools refuse it). A working directory inside
//!   another repository of the workspace is refused; git is told exactly which repository to use
//!   (`GIT_DIR`, `GIT_WORK_TREE`), or, without one, not to look above the workspace
//!   (`GIT_CEILING_DIRECTORIES`);
//! * **checked**: that repository's configuration is read (without includes) and any key that
//!   runs a program, loads more configuration or changes where git connects is refused by name;
//! * **neutralised**: system and global configuration are not read, and every key that runs a
//!   program is overridden on the command line (`-c`), which wins over every file.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Refusal;

/// The workspace's repository, as git will be told to use it.
#[derive(Debug, Clone)]
pub(crate) struct Pinned {
    pub git_dir: PathBuf,
    pub work_tree: PathBuf,
    /// The URLs its remotes and submodules name (git's network commands reach them).
    pub remote_urls: Vec<String>,
}

/// `-c` overrides given before every credentialed git command.
pub(crate) const OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.sshCommand=ssh",
    "core.gitProxy=",
    "core.askPass=",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "credential.helper=",
    "diff.external=",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
];

/// Environment that keeps git to the pinned repository and Talon's overrides.
pub(crate) fn environment(
    pinned: Option<&Pinned>,
    workspace: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("GIT_CONFIG_NOSYSTEM".to_string(), "1".to_string()),
        ("GIT_CONFIG_GLOBAL".to_string(), "/dev/null".to_string()),
        ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
    ];
    match (pinned, workspace) {
        (Some(p), _) => {
            env.push(("GIT_DIR".into(), p.git_dir.display().to_string()));
            env.push(("GIT_WORK_TREE".into(), p.work_tree.display().to_string()));
        }
        (None, Some(ws)) => {
            let ceiling = ws.parent().unwrap_or(ws);
            env.push((
                "GIT_CEILING_DIRECTORIES".into(),
                ceiling.display().to_string(),
            ));
        }
        (None, None) => {}
    }
    env
}

/// Whether a configuration key (lower case) runs a program, loads configuration or changes where
/// git connects or whom it trusts.
fn dangerous(key: &str, value: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    let (section, last) = (parts[0], *parts.last().unwrap_or(&""));
    match section {
        "alias" | "include" | "includeif" | "credential" | "pager" | "url" => return true,
        "filter" => return matches!(last, "clean" | "smudge" | "process"),
        "diff" => return matches!(last, "textconv" | "command" | "external"),
        "merge" => return last == "driver",
        "gpg" => return last == "program",
        "remote" => return matches!(last, "uploadpack" | "receivepack" | "proxy" | "vcs"),
        "http" => {
            return matches!(
                last,
                "proxy"
                    | "sslverify"
                    | "sslcainfo"
                    | "sslcapath"
                    | "sslcert"
                    | "sslkey"
                    | "cookiefile"
                    | "curloptresolve"
            );
        }
        _ => {}
    }
    match key {
        "core.fsmonitor" => !matches!(
            value.to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "0"
        ),
        "core.hookspath"
        | "core.sshcommand"
        | "core.gitproxy"
        | "core.askpass"
        | "core.editor"
        | "core.pager"
        | "core.worktree"
        | "sequence.editor"
        | "uploadpack.packobjectshook"
        | "ssh.variant"
        | "protocol.allow" => true,
        _ => key.starts_with("protocol.") && last == "allow",
    }
}

/// Reads `file` as git configuration (no includes): `(key, value)` pairs, keys in lower case.
fn read_config(git: &Path, file: &Path) -> Result<Vec<(String, String)>, Refusal> {
    let out = Command::new(git)
        .args(["config", "--no-includes", "--list", "-z", "--file"])
        .arg(file)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .map_err(|e| Refusal::Repository(format!("cannot read {}: {e}", file.display())))?;
    if !out.status.success() {
        return Err(Refusal::Repository(format!(
            "{} is not valid git configuration: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let text = String::from_utf8_lossy(entry);
            let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
            (key.to_ascii_lowercase(), value.to_string())
        })
        .collect())
}

/// Finds the repository git would use from `cwd`, pins it, and checks its configuration.
pub(crate) fn pin(git: &Path, workspace: &Path, cwd: &Path) -> Result<Option<Pinned>, Refusal> {
    let mut dir = Some(cwd);
    let mut found = None;
    while let Some(d) = dir {
        if std::fs::symlink_metadata(d.join(".git")).is_ok() {
            found = Some(d.to_path_buf());
            break;
        }
        if d == workspace {
            break;
        }
        dir = d.parent().filter(|p| p.starts_with(workspace));
    }
    let Some(root) = found else {
        return Ok(None);
    };
    if root != workspace {
        return Err(Refusal::Repository(format!(
            "{} is a repository of its own inside the workspace, and its configuration was written where commands write; credentialed git acts only on the workspace's own repository ({}/.git), whose configuration commands cannot change. Run it from the workspace, or without a repository",
            root.display(),
            workspace.display()
        )));
    }
    let git_dir = root.join(".git");
    let meta = std::fs::symlink_metadata(&git_dir)
        .map_err(|e| Refusal::Repository(format!("{}: {e}", git_dir.display())))?;
    if !meta.is_dir() {
        return Err(Refusal::Repository(format!(
            "{} is not a directory (a link or a gitdir file points elsewhere); credentialed git acts only on a repository held in the workspace itself",
            git_dir.display()
        )));
    }
    let config = read_config(git, &git_dir.join("config"))?;
    let refused: Vec<&str> = config
        .iter()
        .filter(|(k, v)| dangerous(k, v))
        .map(|(k, _)| k.as_str())
        .collect();
    if !refused.is_empty() {
        return Err(Refusal::Repository(format!(
            "the repository's configuration ({}) sets {}, which can run a program, load other configuration or send the credentials elsewhere; an operator removes {} before git runs here with stored credentials",
            git_dir.join("config").display(),
            refused.join(", "),
            if refused.len() == 1 { "it" } else { "them" }
        )));
    }
    let mut remote_urls: Vec<String> = config
        .iter()
        .filter(|(k, _)| {
            k.starts_with("remote.") && (k.ends_with(".url") || k.ends_with(".pushurl"))
        })
        .map(|(_, v)| v.clone())
        .collect();
    let modules = root.join(".gitmodules");
    if modules.is_file() {
        remote_urls.extend(
            read_config(git, &modules)?
                .into_iter()
                .filter(|(k, _)| k.starts_with("submodule.") && k.ends_with(".url"))
                .map(|(_, v)| v),
        );
    }
    Ok(Some(Pinned {
        git_dir,
        work_tree: root,
        remote_urls,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_run_programs_or_redirect_are_dangerous() {
        for (key, value) in [
            ("core.fsmonitor", "./hook.sh"),
            ("core.hookspath", "h"),
            ("alias.y", "!env"),
            ("filter.lfs.smudge", "x"),
            ("diff.pdf.textconv", "x"),
            ("url.https://evil.test/.insteadof", "https://github.com/"),
            ("http.proxy", "http://evil.test"),
            ("http.https://github.com/.sslverify", "false"),
            ("include.path", "../x"),
            ("includeif.gitdir:/x.path", "y"),
            ("credential.helper", "store"),
            ("remote.origin.uploadpack", "x"),
            ("protocol.ext.allow", "always"),
        ] {
            assert!(dangerous(key, value), "{key}");
        }
        for (key, value) in [
            ("core.fsmonitor", "false"),
            ("core.bare", "false"),
            ("remote.origin.url", "https://github.com/o/r"),
            ("branch.main.remote", "origin"),
            ("user.name", "x"),
        ] {
            assert!(!dangerous(key, value), "{key}");
        }
    }
}
