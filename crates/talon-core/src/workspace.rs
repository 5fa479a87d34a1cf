//! Where a call's files live: one shared directory, or one per agent and user.
//!
//! The seeds inject each call's workspace from its agent and user, so tools isolate users without
//! knowing about them. Entry points resolve [`Workspaces`] into [`crate::CallContext::workspace`]
//! before a call; tools only read that field. A gateway serving many callers must not default to
//! its own current directory (that would hand every HTTP caller the server's source tree), so it
//! uses [`Workspaces::PerAgentUser`] under its data directory.

use std::path::{Path, PathBuf};

/// The directory name used for calls that name no user.
pub const SHARED_USER_DIR: &str = "_shared";

/// How entry points pick a call's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workspaces {
    /// Every call works in this directory (`--workspace DIR`; the current directory for
    /// `talon mcp`, whose clients start it inside their project).
    Shared(PathBuf),
    /// `<root>/<agent>/<user>`, created (mode 0700) on first use; calls without a user share
    /// `<root>/<agent>/_shared`.
    PerAgentUser(PathBuf),
}

impl Workspaces {
    /// The workspace of a call by `agent` for `user`, creating a per-agent/user directory if
    /// needed. Agent keys and user ids become single path components: characters outside
    /// `[A-Za-z0-9._@-]`, a leading `_`, `.` or `~`, or more than 64 bytes make an id hex-encoded
    /// behind a `~`, so no id can climb out of the root or collide with another.
    pub fn resolve(&self, agent: &str, user: Option<&str>) -> std::io::Result<PathBuf> {
        match self {
            Workspaces::Shared(dir) => Ok(dir.clone()),
            Workspaces::PerAgentUser(root) => {
                let user = user.filter(|u| !u.is_empty());
                let dir = root
                    .join(component(agent))
                    .join(user.map_or_else(|| SHARED_USER_DIR.to_string(), component));
                ensure_private_dir(&dir)?;
                Ok(dir)
            }
        }
    }

    /// The fixed directory, if every call shares one.
    pub fn shared(&self) -> Option<&Path> {
        match self {
            Workspaces::Shared(dir) => Some(dir),
            Workspaces::PerAgentUser(_) => None,
        }
    }
}

/// A safe, injective path component for an agent key or user id.
pub fn component(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with(['.', '_', '~'])
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    if plain {
        return id.to_string();
    }
    // `~` never starts a plain component, so encoded ids cannot collide with plain ones; hex is
    // injective. Ids too long for one file name keep a hex prefix and a fingerprint of the rest.
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    if id.len() <= 120 {
        format!("~{hex}")
    } else {
        format!(
            "~~{}{}",
            &hex[..120],
            crate::events::fingerprint(id.as_bytes())
        )
    }
}

fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        _ => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_single_safe_components() {
        assert_eq!(component("alice"), "alice");
        assert_eq!(component("user.name@example.com"), "user.name@example.com");
        for hostile in [
            "..",
            ".",
            "../../etc",
            "a/b",
            "",
            "_shared",
            "~x",
            "é",
            "a\0b",
        ] {
            let c = component(hostile);
            assert!(c.starts_with('~'), "{hostile:?} -> {c}");
            assert!(!c.contains('/') && c != ".." && c != ".");
        }
        assert_ne!(component("a/b"), component("a\\b"));
        assert!(component(&"x".repeat(65)).starts_with('~'));
    }

    #[test]
    fn per_agent_user_directories_are_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = std::env::temp_dir().join(format!("talon-ws-{}", std::process::id()));
        let rule = Workspaces::PerAgentUser(root.clone());
        let alice = rule.resolve("default", Some("alice")).expect("created");
        assert_eq!(alice, root.join("default/alice"));
        let mode = std::fs::metadata(&alice)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let shared = rule.resolve("default", None).expect("created");
        assert_eq!(shared, root.join("default").join(SHARED_USER_DIR));
        let escaped = rule.resolve("default", Some("../../x")).expect("created");
        assert!(escaped.starts_with(root.join("default")));
        let _ = std::fs::remove_dir_all(&root);
        let fixed = Workspaces::Shared("/srv/ws".into());
        assert_eq!(
            fixed.resolve("a", Some("b")).expect("no io"),
            PathBuf::from("/srv/ws")
        );
    }
}
