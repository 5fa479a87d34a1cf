//! The credentialed-exec service's typed operations: registering a CLI (`gh`, `aws`, …) that
//! agents run with stored credentials, from the preset named like it, with every check a
//! registration passes (its name, the program's path, its refusal rules, where its credentials
//! may go). `talon cli-credentials` reads the command line and stdin and prints; what is checked
//! and stored is decided here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use talon_exec::credentialed::{self, PRESETS, Preset};
use talon_store::{CliCredential, CliCredentialSpec, DEFAULT_CLI_TIMEOUT_SECS, Store, StoreError};

/// Why a registration was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The request is wrong; the message says how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// The program is registered already and the request does not replace it.
    #[error("{name} is already registered; pass --replace to change it, or remove it first")]
    Exists { name: String },
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for CredentialError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid { .. } | StoreError::NotFound { .. } => {
                CredentialError::Invalid(e.to_string())
            }
            e => CredentialError::Store(e),
        }
    }
}

impl CredentialError {
    /// Whether the caller's request was at fault (a usage error), not the service.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CredentialError::Store(_))
    }
}

/// What a registration asks for; `None` and empty lists take the preset's.
#[derive(Debug, Default)]
pub struct Registration {
    /// The program: a bare name (found on `PATH`) or an absolute path.
    pub name: String,
    /// The preset to start from; by default the one named like the program.
    pub preset: Option<String>,
    /// Start from no preset.
    pub no_preset: bool,
    pub path: Option<PathBuf>,
    /// Added to the preset's.
    pub deny_args: Vec<String>,
    /// Added to the preset's.
    pub deny_verbose: Vec<String>,
    pub destinations: Vec<String>,
    pub timeout: Option<u64>,
    pub tips: Option<String>,
    /// Change a registered program (its env values stay unless new ones are given).
    pub replace: bool,
}

/// A registration stored.
#[derive(Debug)]
pub struct Registered {
    pub spec: CliCredentialSpec,
    pub preset: Option<&'static Preset>,
    /// An existing registration was changed.
    pub updated: bool,
}

/// The program's name as commands call it, or why it cannot be one.
pub fn binary_name(name: &str) -> Result<String, CredentialError> {
    credentialed::normalize_binary_name(name).map_err(|e| CredentialError::Invalid(e.to_string()))
}

fn invalid(e: impl std::fmt::Display) -> CredentialError {
    CredentialError::Invalid(e.to_string())
}

/// Registers (or with `replace` changes) the program `r` names, with the credentials `env`.
pub async fn register(
    store: &Store,
    r: &Registration,
    env: &BTreeMap<String, String>,
) -> Result<Registered, CredentialError> {
    let name = binary_name(&r.name)?;
    let preset: Option<&'static Preset> = match (&r.preset, r.no_preset) {
        (Some(p), _) => Some(credentialed::preset(p).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            invalid(format!(
                "unknown preset {p:?}; presets: {}",
                names.join(", ")
            ))
        })?),
        (None, false) => credentialed::preset(&name),
        (None, true) => None,
    };
    let named_path = r
        .name
        .starts_with('/')
        .then(|| PathBuf::from(r.name.trim()));
    let path = match r.path.clone().or(named_path) {
        Some(path) => path,
        None => find_on_path(&name).ok_or_else(|| {
            invalid(format!(
                "{name} is not on PATH; give its absolute path with --path"
            ))
        })?,
    };
    credentialed::verify_binary_path(&name, &path, &[]).map_err(invalid)?;
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut deny_args = preset.map(|p| strings(p.deny_args)).unwrap_or_default();
    deny_args.extend(r.deny_args.iter().cloned());
    let mut deny_verbose = preset.map(|p| strings(p.deny_verbose)).unwrap_or_default();
    deny_verbose.extend(r.deny_verbose.iter().cloned());
    credentialed::check_patterns(&name, &deny_args, &deny_verbose).map_err(invalid)?;
    for destination in &r.destinations {
        credentialed::destinations::Destination::parse(destination).map_err(invalid)?;
    }
    let spec = CliCredentialSpec {
        binary_name: name.clone(),
        binary_path: path.display().to_string(),
        deny_args,
        deny_verbose,
        timeout_seconds: r
            .timeout
            .or(preset.map(|p| p.timeout_secs))
            .unwrap_or(DEFAULT_CLI_TIMEOUT_SECS),
        tips: r
            .tips
            .clone()
            .or(preset.map(|p| p.tips.to_string()))
            .unwrap_or_default(),
        destinations: r.destinations.clone(),
    };
    let exists = store.cli_credential(&name).await?.is_some();
    let result = if exists && r.replace {
        let new_env = (!env.is_empty()).then_some(env);
        store.update_cli_credential(&spec, new_env).await
    } else {
        store.add_cli_credential(&spec, env).await
    };
    result.map_err(|e| match e {
        StoreError::Invalid { .. } if exists => CredentialError::Exists { name },
        e => e.into(),
    })?;
    Ok(Registered {
        spec,
        preset,
        updated: exists,
    })
}

/// The first executable `name` in an absolute directory of `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `NAME=VALUE` entries (`what` names them in errors). An entry is never echoed in an error:
/// it may be a bare secret.
pub fn parse_pairs<'a>(
    what: &str,
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<String, String>, CredentialError> {
    let mut pairs = BTreeMap::new();
    for line in lines {
        let Some((name, value)) = line.split_once('=') else {
            return Err(invalid(format!(
                "{what} is not NAME=VALUE (the entry is not shown, it may hold a secret)"
            )));
        };
        let name = name.trim();
        if pairs.insert(name.to_string(), value.to_string()).is_some() {
            return Err(invalid(format!("{name} is given twice")));
        }
    }
    Ok(pairs)
}

/// The preset a registration still follows: one named like it whose rules it keeps.
pub fn preset_of(c: &CliCredential) -> Option<&'static str> {
    let p = credentialed::preset(&c.spec.binary_name)?;
    let has = |list: &[String], wanted: &[&str]| wanted.iter().all(|w| list.iter().any(|x| x == w));
    (has(&c.spec.deny_args, p.deny_args) && has(&c.spec.deny_verbose, p.deny_verbose))
        .then_some(p.name)
}
