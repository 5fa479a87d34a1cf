//! The host's credential stores, hidden from sandboxed commands by default.
//!
//! A sandboxed command sees a read-only view of the host, and a read-only view is enough to
//! steal: an SSH key, a cloud provider's credentials or a registry token read by a command ends
//! up in the model's context (and, with any network, anywhere). So the usual stores under the
//! home directory are hidden like Talon's own state ([`super::Policy::hidden`]): bubblewrap
//! mounts an empty tmpfs or `/dev/null` over them, Landlock grants no read on them, the Docker
//! spec mounts nothing outside the workspace and masks them inside it. When Talon runs as root,
//! `/etc/shadow` and `/etc/gshadow` are hidden too (root inside the sandbox still owns them).
//!
//! The operator adds paths with `[exec] hidden_paths` and shows one of the defaults again with
//! `[exec] unhidden_paths` (a command that needs `~/.npmrc`, say). Paths that do not exist are
//! skipped by every backend.

use std::path::{Path, PathBuf};

/// Credential stores under the home directory, hidden by default.
pub const HOME_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".npmrc",
    ".netrc",
    ".git-credentials",
    ".pgpass",
];

/// Files only root can read, hidden when Talon runs as root.
pub const ROOT_CREDENTIALS: &[&str] = &["/etc/shadow", "/etc/gshadow"];

/// The operator's changes to the default list (`[exec] hidden_paths` and `unhidden_paths`).
/// Paths are absolute or start with `~/` (the home directory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialHiding {
    /// Hidden besides the defaults.
    pub extra: Vec<PathBuf>,
    /// Defaults (or extras) shown again.
    pub unhidden: Vec<PathBuf>,
}

/// `path` with a leading `~` replaced by `home`; `None` when it needs a home and there is none.
fn expand(path: &Path, home: Option<&Path>) -> Option<PathBuf> {
    match path.strip_prefix("~") {
        Ok(rest) => home.map(|h| h.join(rest)),
        Err(_) => Some(path.to_path_buf()),
    }
}

impl CredentialHiding {
    /// Checks that every configured path is absolute or starts with `~/`: a relative path
    /// would depend on the directory Talon was started in.
    pub fn validate(&self) -> Result<(), String> {
        for (key, paths) in [
            ("hidden_paths", &self.extra),
            ("unhidden_paths", &self.unhidden),
        ] {
            if let Some(bad) = paths
                .iter()
                .find(|p| !p.is_absolute() && !p.starts_with("~"))
            {
                return Err(format!(
                    "exec.{key}: {} is relative; give an absolute path or one starting with ~/",
                    bad.display()
                ));
            }
        }
        Ok(())
    }

    /// The paths to hide for a user whose home is `home` (`root`: Talon runs as root).
    pub fn paths(&self, home: Option<&Path>, root: bool) -> Vec<PathBuf> {
        let unhidden: Vec<PathBuf> = self
            .unhidden
            .iter()
            .filter_map(|p| expand(p, home))
            .collect();
        let defaults = home
            .into_iter()
            .flat_map(|h| HOME_CREDENTIALS.iter().map(move |rel| h.join(rel)));
        let system = ROOT_CREDENTIALS.iter().filter(|_| root).map(PathBuf::from);
        let extra = self.extra.iter().filter_map(|p| expand(p, home));
        let mut paths: Vec<PathBuf> = Vec::new();
        for path in defaults.chain(system).chain(extra) {
            if !unhidden.contains(&path) && !paths.contains(&path) {
                paths.push(path);
            }
        }
        paths
    }

    /// [`Self::paths`] for this process: `$HOME`, and whether it runs as root.
    pub fn for_this_user(&self) -> Vec<PathBuf> {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h != Path::new("/"));
        // SAFETY: geteuid has no failure mode and touches no memory.
        let root = unsafe { nix::libc::geteuid() } == 0;
        self.paths(home.as_deref(), root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_extras_and_unhidden() {
        let home = Path::new("/home/u");
        let none = CredentialHiding::default();
        let paths = none.paths(Some(home), false);
        assert!(paths.contains(&home.join(".ssh")));
        assert!(paths.contains(&home.join(".config/gh")));
        assert!(!paths.contains(&PathBuf::from("/etc/shadow")));
        assert!(
            none.paths(Some(home), true)
                .contains(&PathBuf::from("/etc/shadow"))
        );
        // No home: only the system files.
        assert_eq!(none.paths(None, true).len(), ROOT_CREDENTIALS.len());
        let changed = CredentialHiding {
            extra: vec!["~/.vault-token".into(), "/srv/secrets".into()],
            unhidden: vec!["~/.npmrc".into()],
        };
        let paths = changed.paths(Some(home), false);
        assert!(paths.contains(&home.join(".vault-token")));
        assert!(paths.contains(&PathBuf::from("/srv/secrets")));
        assert!(!paths.contains(&home.join(".npmrc")));
        assert!(paths.contains(&home.join(".ssh")));
        assert!(changed.validate().is_ok());
        let relative = CredentialHiding {
            extra: vec!["secrets".into()],
            ..CredentialHiding::default()
        };
        assert!(relative.validate().unwrap_err().contains("hidden_paths"));
    }
}
