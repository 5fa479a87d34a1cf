//! Choosing the backend (`[exec] backend`): bubblewrap where it works, Landlock + seccomp where
//! bubblewrap cannot create namespaces, Docker only when asked for. Whatever is chosen must
//! work: a backend that cannot run refuses the command with the reason, and `auto` never ends
//! on "no sandbox".

use std::path::Path;

use super::docker::{self, DockerSettings};
use super::landlock::Landlock;
use super::{Bubblewrap, Sandbox, SandboxError};

/// Which backend confines commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Bubblewrap if its probe passes, else Landlock if the kernel has it and a helper program
    /// is configured, else refuse.
    #[default]
    Auto,
    /// Namespaces and bind mounts (the strongest here).
    Bubblewrap,
    /// Landlock + seccomp through Talon's helper, for hosts without user namespaces.
    Landlock,
    /// A container per command (spec only; refuses commands, see [`super::docker`]).
    Docker,
}

impl Backend {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Bubblewrap => "bubblewrap",
            Self::Landlock => "landlock",
            Self::Docker => "docker",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "bubblewrap" | "bwrap" => Ok(Self::Bubblewrap),
            "landlock" => Ok(Self::Landlock),
            "docker" => Ok(Self::Docker),
            other => Err(format!(
                "unknown sandbox backend {other:?}: use \"auto\" (the default), \"bubblewrap\", \"landlock\" or \"docker\""
            )),
        }
    }
}

/// The backend chosen for a configuration, and why (for `talon doctor`).
#[derive(Debug)]
pub struct Selected {
    /// The backend that wraps commands.
    pub sandbox: Box<dyn Sandbox>,
    /// Why this one: configured, or what `auto` found (so an operator can see a fallback).
    pub why: String,
}

/// The reason inside an error, without the "the command was not run" suffix.
pub fn reason(error: &SandboxError) -> String {
    match error {
        SandboxError::Unavailable(why) | SandboxError::Policy(why) | SandboxError::Network(why) => {
            why.clone()
        }
    }
}

/// Refuses the Landlock backend for a shell that several people's commands share: it confines
/// files and the network but cannot hide one user's processes (their full command lines under
/// `/proc`) from another's. Bubblewrap gives every session its own PID namespace.
pub fn refuse_shared_landlock(selected: &Selected, shared: bool) -> Result<(), SandboxError> {
    if shared && selected.sandbox.name() == "landlock" {
        return Err(SandboxError::Unavailable(format!(
            "the Landlock backend cannot keep the users of one gateway apart (each could read the              others' running command lines under /proc), so `talon serve` does not run commands              with it ({}). Make bubblewrap work here (talon doctor says how), or, if one person              uses this gateway, set [exec] landlock_single_user = true",
            selected.why
        )));
    }
    Ok(())
}

fn landlock(helper: Option<&Path>) -> Result<Landlock, SandboxError> {
    let helper = helper.ok_or_else(|| {
        SandboxError::Unavailable(
            "the Landlock backend needs Talon's helper program (the talon binary), and none is configured"
                .into(),
        )
    })?;
    Landlock::probe(helper)
}

/// The backend `backend` names, probed; `helper` is Talon's binary (for Landlock) and `docker`
/// the container settings.
pub fn select(
    backend: Backend,
    helper: Option<&Path>,
    docker: &DockerSettings,
) -> Result<Selected, SandboxError> {
    match backend {
        Backend::Bubblewrap => Bubblewrap::probe().map(|b| Selected {
            sandbox: Box::new(b),
            why: "configured (backend = \"bubblewrap\") and its probe passed".into(),
        }),
        Backend::Landlock => landlock(helper).map(|l| Selected {
            why: format!(
                "configured (backend = \"landlock\"); kernel Landlock ABI {}",
                l.abi()
            ),
            sandbox: Box::new(l),
        }),
        Backend::Docker => Err(SandboxError::Unavailable(docker::unavailable(docker))),
        Backend::Auto => match Bubblewrap::probe() {
            Ok(b) => Ok(Selected {
                sandbox: Box::new(b),
                why: "backend = \"auto\": bubblewrap's probe passed".into(),
            }),
            Err(b) => match landlock(helper) {
                Ok(l) => Ok(Selected {
                    why: format!(
                        "backend = \"auto\": bubblewrap is unavailable ({}), Landlock ABI {} works",
                        reason(&b),
                        l.abi()
                    ),
                    sandbox: Box::new(l),
                }),
                Err(l) => Err(SandboxError::Unavailable(format!(
                    "no sandbox backend works here — bubblewrap: {}; landlock: {}",
                    reason(&b),
                    reason(&l)
                ))),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for b in [
            Backend::Auto,
            Backend::Bubblewrap,
            Backend::Landlock,
            Backend::Docker,
        ] {
            assert_eq!(b.name().parse::<Backend>(), Ok(b));
        }
        assert!("nsjail".parse::<Backend>().is_err());
    }

    #[test]
    fn landlock_without_a_helper_and_docker_refuse() {
        let err = select(Backend::Landlock, None, &DockerSettings::default()).unwrap_err();
        assert!(reason(&err).contains("helper"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let docker = DockerSettings {
            host: format!("unix://{}/none.sock", dir.path().display()),
            ..DockerSettings::default()
        };
        let err = select(Backend::Docker, None, &docker).unwrap_err();
        assert!(reason(&err).contains("not reachable"), "{err}");
    }
}
