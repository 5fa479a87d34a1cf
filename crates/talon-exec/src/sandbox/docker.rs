//! The Docker backend's container spec: for fleets that confine commands in containers, with
//! GoClaw's container settings (their names and defaults, `[exec.docker]`).
//!
//! [`container_spec`] turns the same [`Policy`] every backend gets into the body of a Docker
//! Engine API `POST /containers/create` request: the workspace bound read-write at `workdir`
//! (GoClaw's `/workspace`), other writable roots at their own paths, the protected paths inside
//! them bound read-only again (missing ones pinned with `/dev/null`), hidden paths inside them
//! masked, a read-only root file system, tmpfs mounts, memory / CPU / pids limits, every
//! capability dropped, `no-new-privileges`, and no network unless the mode is `host`.
//!
//! No Docker Engine runs where Talon is developed, so only the spec is built and unit-tested;
//! running commands through an engine is not implemented. Selecting this backend therefore
//! refuses every command with the reason ([`unavailable`]) — it never falls back to another
//! backend or to the host.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::network::Network;
use super::protected::{Protection, protected_paths};
use super::{Policy, SandboxError};

/// `[exec.docker]`: GoClaw's sandbox container settings, with its names and defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerSettings {
    /// The engine's address (`unix://` only).
    pub host: String,
    /// The image commands run in.
    pub image: String,
    /// Where the workspace is mounted, and the commands' working directory.
    pub workdir: String,
    /// The workspace mount: `rw` (default), `ro`, or `none`.
    pub workspace_access: String,
    /// Memory limit, MiB (0: none).
    pub memory_mb: u64,
    /// CPU limit in CPUs (0: none).
    pub cpus: f64,
    /// Process limit (0: none).
    pub pids_limit: i64,
    /// Mount the image's root file system read-only.
    pub read_only_root: bool,
    /// Capabilities dropped.
    pub cap_drop: Vec<String>,
    /// tmpfs mounts, `PATH` or `PATH:OPTIONS`.
    pub tmpfs: Vec<String>,
    /// Size of a tmpfs mount whose options name none, MiB (0: Docker's default).
    pub tmpfs_size_mb: u64,
    /// The user commands run as (`1000:1000`, `nobody`; empty: the image's).
    pub user: String,
}

impl Default for DockerSettings {
    fn default() -> Self {
        Self {
            host: "unix:///var/run/docker.sock".into(),
            // GoClaw builds `goclaw-sandbox:bookworm-slim` from this base; Talon ships no image.
            image: "debian:bookworm-slim".into(),
            workdir: "/workspace".into(),
            workspace_access: "rw".into(),
            memory_mb: 512,
            cpus: 1.0,
            pids_limit: 256,
            read_only_root: true,
            cap_drop: vec!["ALL".into()],
            tmpfs: vec!["/tmp".into(), "/var/tmp".into(), "/run".into()],
            tmpfs_size_mb: 0,
            user: String::new(),
        }
    }
}

impl DockerSettings {
    /// Checks the values a spec cannot be built without.
    pub fn validate(&self) -> Result<(), String> {
        if !matches!(self.workspace_access.as_str(), "rw" | "ro" | "none") {
            return Err(format!(
                "exec.docker.workspace_access {:?}: use \"rw\", \"ro\" or \"none\"",
                self.workspace_access
            ));
        }
        if !self.workdir.starts_with('/') {
            return Err(format!(
                "exec.docker.workdir {:?} must be absolute",
                self.workdir
            ));
        }
        if self.image.trim().is_empty() {
            return Err("exec.docker.image must not be empty".into());
        }
        if !self.cpus.is_finite() || self.cpus < 0.0 {
            return Err(format!("exec.docker.cpus {} is not a CPU count", self.cpus));
        }
        Ok(())
    }

    /// The Unix socket of [`DockerSettings::host`].
    pub fn socket(&self) -> Result<PathBuf, String> {
        self.host
            .strip_prefix("unix://")
            .map(PathBuf::from)
            .ok_or_else(|| format!("engine address {} is not unix://PATH", self.host))
    }
}

/// Why the Docker backend refuses commands here: the engine is not reachable, or it is and
/// running commands through it is not implemented (only the spec is).
pub fn unavailable(settings: &DockerSettings) -> String {
    let host = &settings.host;
    match settings
        .socket()
        .and_then(|s| std::os::unix::net::UnixStream::connect(s).map_err(|e| e.to_string()))
    {
        Err(e) => format!("Docker backend: engine at {host} not reachable ({e})"),
        Ok(_) => format!(
            "Docker backend: the engine at {host} is reachable, but running commands through it \
             is not implemented yet (only the container spec is); use backend = \"bubblewrap\" \
             or \"landlock\""
        ),
    }
}

fn utf8<'a>(what: &str, path: &'a Path) -> Result<&'a str, SandboxError> {
    path.to_str()
        .ok_or_else(|| SandboxError::Policy(format!("{what} {} is not UTF-8", path.display())))
}

/// Where host `path` appears in the container: under `workdir` for the workspace, at its own
/// path for another writable root, nowhere otherwise.
fn in_container(path: &Path, policy: &Policy, settings: &DockerSettings) -> Option<PathBuf> {
    let mut roots = policy.writable_roots.iter();
    if let Some(ws) = roots.next()
        && settings.workspace_access != "none"
        && let Ok(rel) = path.strip_prefix(ws)
    {
        let workdir = Path::new(&settings.workdir);
        return Some(if rel.as_os_str().is_empty() {
            workdir.to_path_buf()
        } else {
            workdir.join(rel)
        });
    }
    roots
        .find(|root| path.starts_with(root))
        .map(|_| path.to_path_buf())
}

/// The tmpfs options of one `PATH[:OPTIONS]` entry: its own, else the default size; with
/// `noexec,nosuid,nodev` added unless it says `noexec` itself (as GoClaw does).
fn tmpfs_entry(entry: &str, size_mb: u64) -> (String, String) {
    let (path, options) = entry.split_once(':').unwrap_or((entry, ""));
    let mut options: Vec<String> = options
        .split(',')
        .filter(|o| !o.is_empty())
        .map(str::to_string)
        .collect();
    if size_mb > 0 && !options.iter().any(|o| o.starts_with("size=")) {
        options.push(format!("size={size_mb}m"));
    }
    if !options.iter().any(|o| o == "noexec") {
        options.extend(["noexec", "nosuid", "nodev"].map(String::from));
    }
    (path.to_string(), options.join(","))
}

/// The body of `POST /containers/create` that runs `argv` in `cwd` with `env`, confined by
/// `policy` and `settings` (see the module documentation).
pub fn container_spec(
    settings: &DockerSettings,
    policy: &Policy,
    cwd: &Path,
    argv: &[OsString],
    env: &[(String, OsString)],
) -> Result<Value, SandboxError> {
    settings.validate().map_err(SandboxError::Policy)?;
    let network = match &policy.network {
        Network::None => false,
        Network::Host => true,
        Network::Proxy { .. } => {
            return Err(SandboxError::Network(
                "network = \"proxy\" is not available with the Docker backend".into(),
            ));
        }
    };
    let cmd = argv
        .iter()
        .map(|a| {
            a.to_str()
                .map(str::to_string)
                .ok_or_else(|| SandboxError::Policy(format!("argument {a:?} is not UTF-8")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let env = env
        .iter()
        .map(|(k, v)| {
            v.to_str()
                .map(|v| format!("{k}={v}"))
                .ok_or_else(|| SandboxError::Policy(format!("variable {k} is not UTF-8")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let workdir = in_container(cwd, policy, settings)
        .ok_or_else(|| {
            SandboxError::Policy(format!(
                "working directory {} is not inside a mounted root",
                cwd.display()
            ))
        })?
        .to_string_lossy()
        .into_owned();

    let mut binds: Vec<String> = Vec::new();
    let mut tmpfs = Map::new();
    let mut mounted = Vec::new();
    for (i, root) in policy.writable_roots.iter().enumerate() {
        let mode = if i == 0 {
            match settings.workspace_access.as_str() {
                "none" => continue,
                access => access,
            }
        } else {
            "rw"
        };
        let target = in_container(root, policy, settings).unwrap_or_else(|| root.clone());
        binds.push(format!(
            "{}:{}:{mode}",
            utf8("writable root", root)?,
            utf8("mount point", &target)?
        ));
        mounted.push(root);
    }
    for root in mounted {
        for protection in protected_paths(root) {
            let (source, path, mode) = match &protection {
                // Its own mount, so it cannot be renamed or removed.
                Protection::Anchor(path) => (utf8("protected path", path)?, path, "rw"),
                Protection::ReadOnly(path) => (utf8("protected path", path)?, path, "ro"),
                Protection::Pin(path) => ("/dev/null", path, "ro"),
                // Pinning it would break git on the host; the engine path has no clean-up yet.
                Protection::Absent(_) => continue,
            };
            if let Some(target) = in_container(path, policy, settings) {
                binds.push(format!(
                    "{source}:{}:{mode}",
                    utf8("protected path", &target)?
                ));
            }
        }
    }
    for hidden in &policy.hidden {
        let Some(target) = in_container(hidden, policy, settings) else {
            continue; // the container never sees host paths outside its mounts
        };
        let target = utf8("hidden path", &target)?.to_string();
        if hidden.is_dir() {
            tmpfs.insert(target, json!("ro,size=1m,noexec,nosuid,nodev"));
        } else if hidden.exists() {
            binds.push(format!("/dev/null:{target}:ro"));
        }
    }
    for entry in &settings.tmpfs {
        let (path, options) = tmpfs_entry(entry, settings.tmpfs_size_mb);
        tmpfs.insert(path, json!(options));
    }

    let mut host = Map::new();
    host.insert("Binds".into(), json!(binds));
    host.insert("ReadonlyRootfs".into(), json!(settings.read_only_root));
    host.insert("Tmpfs".into(), Value::Object(tmpfs));
    if settings.memory_mb > 0 {
        host.insert(
            "Memory".into(),
            json!(settings.memory_mb.saturating_mul(1 << 20)),
        );
    }
    if settings.cpus > 0.0 {
        // Saturates for absurd values; validate() rejected negative and non-finite ones.
        host.insert("NanoCpus".into(), json!((settings.cpus * 1e9) as i64));
    }
    if settings.pids_limit > 0 {
        host.insert("PidsLimit".into(), json!(settings.pids_limit));
    }
    host.insert("CapDrop".into(), json!(settings.cap_drop));
    host.insert("SecurityOpt".into(), json!(["no-new-privileges"]));
    host.insert(
        "NetworkMode".into(),
        json!(if network { "bridge" } else { "none" }),
    );
    host.insert("Init".into(), json!(true));

    let mut spec = Map::new();
    spec.insert("Image".into(), json!(settings.image));
    spec.insert("Cmd".into(), json!(cmd));
    spec.insert("WorkingDir".into(), json!(workdir));
    spec.insert("Env".into(), json!(env));
    if !settings.user.is_empty() {
        spec.insert("User".into(), json!(settings.user));
    }
    spec.insert("Labels".into(), json!({"talon.sandbox": "true"}));
    spec.insert("NetworkDisabled".into(), json!(!network));
    spec.insert("AttachStdout".into(), json!(true));
    spec.insert("AttachStderr".into(), json!(true));
    spec.insert("HostConfig".into(), Value::Object(host));
    Ok(Value::Object(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        cache: PathBuf,
        data: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, cache, data) = (root.join("ws"), root.join("cache"), root.join("data"));
        for d in [&ws, &cache, &data] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        std::fs::write(ws.join("talon.toml"), "token = 1").unwrap();
        Fixture {
            _dir: dir,
            ws,
            cache,
            data,
        }
    }

    fn policy(f: &Fixture, network: Network) -> Policy {
        Policy {
            writable_roots: vec![f.ws.clone(), f.cache.clone()],
            hidden: vec![
                f.data.clone(),
                f.ws.join("talon.toml"),
                f.ws.join("secrets"),
            ],
            network,
            ..Policy::default()
        }
    }

    fn spec(f: &Fixture, settings: &DockerSettings, network: Network) -> Value {
        container_spec(
            settings,
            &policy(f, network),
            &f.ws.join(".git"),
            &["/bin/sh".into(), "-c".into(), "echo hi".into()],
            &[("PATH".into(), "/usr/bin:/bin".into())],
        )
        .unwrap()
    }

    #[test]
    fn the_default_spec_matches_goclaws_settings() {
        let f = fixture();
        let s = spec(&f, &DockerSettings::default(), Network::None);
        let ws = f.ws.display();
        let cache = f.cache.display();
        assert_eq!(s["Image"], "debian:bookworm-slim");
        assert_eq!(s["Cmd"], json!(["/bin/sh", "-c", "echo hi"]));
        assert_eq!(s["WorkingDir"], "/workspace/.git");
        assert_eq!(s["Env"], json!(["PATH=/usr/bin:/bin"]));
        assert!(s.get("User").is_none());
        assert_eq!(s["NetworkDisabled"], true);
        let host = &s["HostConfig"];
        let binds: Vec<&str> = host["Binds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap())
            .collect();
        assert_eq!(binds[0], format!("{ws}:/workspace:rw"));
        assert_eq!(binds[1], format!("{cache}:{cache}:rw"));
        assert!(binds.contains(&format!("{ws}/.git/hooks:/workspace/.git/hooks:ro").as_str()));
        assert!(binds.contains(&"/dev/null:/workspace/.git/config:ro"));
        assert!(binds.contains(&"/dev/null:/workspace/.mcp.json:ro"));
        assert!(binds.contains(&format!("/dev/null:{cache}/.bashrc:ro").as_str()));
        // Hidden paths inside a mount are masked; the data directory is never mounted.
        assert!(binds.contains(&"/dev/null:/workspace/talon.toml:ro"));
        assert!(!binds.iter().any(|b| b.contains("/data")), "{binds:?}");
        assert_eq!(host["ReadonlyRootfs"], true);
        assert_eq!(
            host["Tmpfs"],
            json!({
                "/workspace/secrets": "ro,size=1m,noexec,nosuid,nodev",
                "/tmp": "noexec,nosuid,nodev",
                "/var/tmp": "noexec,nosuid,nodev",
                "/run": "noexec,nosuid,nodev",
            })
        );
        assert_eq!(host["Memory"], 512u64 << 20);
        assert_eq!(host["NanoCpus"], 1_000_000_000i64);
        assert_eq!(host["PidsLimit"], 256);
        assert_eq!(host["CapDrop"], json!(["ALL"]));
        assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]));
        assert_eq!(host["NetworkMode"], "none");
        assert_eq!(host["Init"], true);
    }

    #[test]
    fn settings_change_the_spec() {
        let f = fixture();
        let settings = DockerSettings {
            image: "ghcr.io/acme/tools:1".into(),
            workdir: "/src".into(),
            workspace_access: "ro".into(),
            memory_mb: 0,
            cpus: 2.5,
            pids_limit: 0,
            read_only_root: false,
            tmpfs: vec!["/tmp:size=64m".into(), "/scratch:exec".into()],
            tmpfs_size_mb: 16,
            user: "1000:1000".into(),
            ..DockerSettings::default()
        };
        let s = spec(&f, &settings, Network::Host);
        assert_eq!(s["WorkingDir"], "/src/.git");
        assert_eq!(s["User"], "1000:1000");
        assert_eq!(s["NetworkDisabled"], false);
        let host = &s["HostConfig"];
        assert_eq!(host["Binds"][0], format!("{}:/src:ro", f.ws.display()));
        assert_eq!(host["NetworkMode"], "bridge");
        assert_eq!(host["ReadonlyRootfs"], false);
        assert_eq!(host["NanoCpus"], 2_500_000_000i64);
        assert!(host.get("Memory").is_none() && host.get("PidsLimit").is_none());
        assert_eq!(host["Tmpfs"]["/tmp"], "size=64m,noexec,nosuid,nodev");
        assert_eq!(
            host["Tmpfs"]["/scratch"],
            "exec,size=16m,noexec,nosuid,nodev"
        );
    }

    #[test]
    fn what_cannot_be_expressed_is_refused() {
        let f = fixture();
        let run = |settings: &DockerSettings, cwd: &Path, network: Network| {
            container_spec(settings, &policy(&f, network), cwd, &["true".into()], &[])
        };
        let d = DockerSettings::default();
        assert!(run(&d, &f.data, Network::None).is_err(), "cwd outside");
        let proxy = Network::Proxy {
            socket: "/s".into(),
            helper: "/h".into(),
        };
        assert!(matches!(
            run(&d, &f.ws, proxy),
            Err(SandboxError::Network(_))
        ));
        for bad in [
            DockerSettings {
                workspace_access: "maybe".into(),
                ..d.clone()
            },
            DockerSettings {
                workdir: "rel".into(),
                ..d.clone()
            },
            DockerSettings {
                cpus: -1.0,
                ..d.clone()
            },
        ] {
            assert!(run(&bad, &f.ws, Network::None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_absent_engine_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let settings = DockerSettings {
            host: format!("unix://{}/docker.sock", dir.path().display()),
            ..DockerSettings::default()
        };
        let why = unavailable(&settings);
        assert!(
            why.starts_with(&format!(
                "Docker backend: engine at unix://{}/docker.sock not reachable",
                dir.path().display()
            )),
            "{why}"
        );
    }
}
