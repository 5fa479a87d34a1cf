//! The environment a command gets: an allowlist, never Talon's own.
//!
//! GoClaw copies the whole process environment and scrubs a list of known credential names, so
//! any secret it does not know about (a new provider's key, the database URL) reaches every
//! command. Talon starts from nothing and passes only the names below plus the ones the operator
//! lists; names that look like Talon's own settings or credentials are refused even when listed
//! (credentialed exec is the way to give a command a secret).

use std::ffi::OsString;

/// Passed to every command when set in Talon's environment.
pub const BASE_NAMES: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ",
];

/// Why a configured name cannot be passed to commands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "exec.env_passthrough: {name:?} cannot be passed to commands ({reason}); give a command a credential with credentialed_exec instead"
)]
pub struct EnvError {
    pub name: String,
    pub reason: &'static str,
}

/// The names passed to commands: [`BASE_NAMES`] and the operator's extra names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildEnv {
    names: Vec<String>,
}

impl Default for ChildEnv {
    fn default() -> Self {
        Self {
            names: BASE_NAMES.iter().map(|n| (*n).to_string()).collect(),
        }
    }
}

/// Why `name` must never reach a command, if it must not.
fn forbidden(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("TALON_") {
        return Some("Talon's own settings and secrets stay in Talon");
    }
    if upper == "DATABASE_URL" || upper.ends_with("_DATABASE_URL") {
        return Some("it holds the database's credentials");
    }
    const SECRET_SUFFIXES: &[&str] = &[
        "_API_KEY",
        "_APIKEY",
        "_TOKEN",
        "_SECRET",
        "_PASSWORD",
        "_PRIVATE_KEY",
        "_ACCESS_KEY",
        "_SECRET_KEY",
    ];
    if SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s)) {
        return Some("the name says it holds a credential");
    }
    if name.is_empty() || name.contains(['=', '\0']) {
        return Some("not a valid variable name");
    }
    None
}

impl ChildEnv {
    /// [`BASE_NAMES`] plus `extra`; an error names the first forbidden entry.
    pub fn with_extra<S: AsRef<str>>(extra: &[S]) -> Result<Self, EnvError> {
        let mut env = Self::default();
        for name in extra {
            let name = name.as_ref();
            if let Some(reason) = forbidden(name) {
                return Err(EnvError {
                    name: name.to_string(),
                    reason,
                });
            }
            if !env.names.iter().any(|n| n == name) {
                env.names.push(name.to_string());
            }
        }
        Ok(env)
    }

    /// The allowed names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The allowed variables with their values in this process (unset ones are skipped).
    pub fn vars(&self) -> Vec<(String, OsString)> {
        self.names
            .iter()
            .filter_map(|n| std::env::var_os(n).map(|v| (n.clone(), v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_cannot_be_listed() {
        for name in [
            "TALON_DATABASE_URL",
            "talon_gateway__token",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "DATABASE_URL",
            "AWS_SECRET_ACCESS_KEY",
            "A=B",
            "",
        ] {
            let err = ChildEnv::with_extra(&[name]).expect_err(name);
            assert_eq!(err.name, name);
        }
        let env = ChildEnv::with_extra(&["CARGO_HOME", "PATH"]).expect("fine");
        assert_eq!(env.names().iter().filter(|n| *n == "PATH").count(), 1);
        assert!(env.names().iter().any(|n| n == "CARGO_HOME"));
    }
}
