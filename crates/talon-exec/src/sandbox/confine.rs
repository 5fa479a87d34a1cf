//! Inside `talon __sandbox-landlock`: the helper confines itself, then executes the command.
//!
//! Order: compute and open the Landlock rules (opening needs the helper's own rights), drop
//! every capability (a helper started by root would otherwise hand them on, as bwrap's
//! `--cap-drop ALL` prevents), restrict itself with Landlock (which sets `no_new_privs`),
//! install the seccomp filter of [`super::seccomp`], point `TMPDIR` at the private scratch
//! directory and `exec`. Anything that fails stops the helper with
//! [`HELPER_FAILED`](super::HELPER_FAILED) before the command runs: fail closed.
//!
//! The helper runs single-threaded, before any async runtime starts, so restricting "itself"
//! restricts the whole process, and everything the command starts inherits it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;

use super::HELPER_FAILED;
use super::landlock::{Confinement, SUBCOMMAND, abi};

/// The Landlock rights Talon asks for: ABI 7's (its file-system rights are ABI 5's, its scopes
/// ABI 6's). Older kernels enforce what they know (`CompatLevel::BestEffort`); newer rights are
/// left out on purpose until they are tested here.
const TARGET: ABI = ABI::V7;

/// Device files the command may read and write, like bwrap's minimal `/dev`.
const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Device files the command may read.
const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// What the ruleset grants, beyond listing directories everywhere.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Grants {
    /// Read and execute beneath.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath.
    pub write: Vec<PathBuf>,
}

/// Adds to `out` the paths that together cover `dir` minus the `excluded` paths: `dir` itself
/// when nothing excluded lies beneath it, nothing when it lies inside an excluded path, and
/// otherwise each entry of `dir`, split the same way. A symbolic link is granted only when its
/// target neither lies in nor contains an excluded path (Landlock follows it when opening).
/// A directory that cannot be read grants nothing.
fn split(dir: &Path, excluded: &[PathBuf], out: &mut Vec<PathBuf>) {
    if excluded.iter().any(|e| dir.starts_with(e)) {
        return;
    }
    if !excluded.iter().any(|e| e.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            if let Ok(target) = std::fs::canonicalize(&path)
                && !excluded
                    .iter()
                    .any(|e| target.starts_with(e) || e.starts_with(&target))
            {
                out.push(path);
            }
        } else {
            split(&path, excluded, out);
        }
    }
}

/// The paths `c` grants: `/` for reading minus the hidden paths and `/dev`; each writable root
/// (and the scratch directory) minus the hidden paths strictly inside it. A writable root that
/// lies inside a hidden path (a per-agent workspace in the data directory) stays writable: it
/// was granted explicitly.
pub(crate) fn grants(c: &Confinement) -> Grants {
    let canonical = |p: &PathBuf| std::fs::canonicalize(p).ok();
    let hidden: Vec<PathBuf> = c.hidden.iter().filter_map(canonical).collect();
    let mut excluded = hidden.clone();
    excluded.push(PathBuf::from("/dev"));
    let mut grants = Grants::default();
    split(Path::new("/"), &excluded, &mut grants.read);
    grants.read.extend(DEVICES_READ.iter().map(PathBuf::from));
    let roots = c.writable.iter().chain(&c.tmp).filter_map(canonical);
    for root in roots {
        let inside: Vec<PathBuf> = hidden
            .iter()
            .filter(|h| h.starts_with(&root) && **h != root)
            .cloned()
            .collect();
        split(&root, &inside, &mut grants.write);
    }
    grants.write.extend(DEVICES_RW.iter().map(PathBuf::from));
    grants
}

fn ruleset_error(e: impl std::fmt::Display) -> String {
    format!("Landlock: {e}")
}

/// Drops every capability when the helper has any (it was started by root): the bounding set
/// first, so that executing the command cannot regain them, then the ambient, effective,
/// permitted and inheritable sets. Returns whether there was anything to drop.
fn drop_capabilities() -> Result<bool, String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: a version-3 header and two data structs, as capget(2) requires.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(format!("capget: {}", std::io::Error::last_os_error()));
    }
    if data.iter().all(|d| d.permitted == 0 && d.inheritable == 0) {
        return Ok(false);
    }
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes a capability number; no memory is involved.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                break; // past the kernel's last capability
            }
            return Err(format!(
                "dropping capability {cap} from the bounding set: {e}"
            ));
        }
    }
    // SAFETY: clears the ambient set; no memory is involved.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let empty = [Data::default(); 2];
    // SAFETY: a version-3 header and two data structs, as capset(2) requires.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, empty.as_ptr()) } != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(true)
}

/// Takes from the calling process every access it does not need to turn bytes on standard input
/// into text on standard output: no new privileges, Landlock with every filesystem right, TCP and
/// scope handled and none granted (where the kernel has Landlock; best effort on older ones), and
/// the seccomp filter with the network off. For the parsers of untrusted bytes
/// (`talon_tools::untrusted_parse`); descriptors already open stay usable.
pub fn deny_all_access() -> Result<(), String> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
    }
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .and_then(|r| r.handle_access(AccessNet::from_all(TARGET)))
        .and_then(|r| r.scope(Scope::from_all(TARGET)))
        .and_then(|r| r.create())
        .map_err(ruleset_error)?;
    ruleset.restrict_self().map_err(ruleset_error)?;
    let program = super::seccomp::seccomp_program(false).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// Confines the calling (single-threaded) process as `c` says. Returns a one-line report of
/// what is enforced.
fn confine(c: &Confinement) -> Result<String, String> {
    let kernel = abi()?;
    let grants = grants(c);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .and_then(|r| r.scope(Scope::from_all(TARGET)))
        .map_err(ruleset_error)?;
    if !c.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(ruleset_error)?;
    }
    let root = PathFd::new("/").map_err(ruleset_error)?;
    let created = ruleset
        .create()
        .and_then(|r| r.add_rule(PathBeneath::new(root, AccessFs::ReadDir)))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                &grants.read,
                AccessFs::from_read(TARGET),
            ))
        })
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                &grants.write,
                AccessFs::from_all(TARGET),
            ))
        })
        .map_err(ruleset_error)?;
    let dropped = drop_capabilities()?;
    let status = created.restrict_self().map_err(ruleset_error)?;
    let enforced = match status.ruleset {
        RulesetStatus::FullyEnforced => "fully enforced",
        RulesetStatus::PartiallyEnforced => "partially enforced (older kernel)",
        RulesetStatus::NotEnforced => {
            return Err("Landlock: the ruleset is not enforced on this kernel".into());
        }
    };
    if !status.no_new_privs {
        return Err("no_new_privs could not be set".into());
    }
    let program = super::seccomp::seccomp_program(c.network).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
    let network = match (c.network, kernel >= 4) {
        (true, _) => "on",
        (false, true) => "off (inet sockets refused by seccomp, TCP by Landlock)",
        (false, false) => "off (inet sockets refused by seccomp)",
    };
    Ok(format!(
        "landlock: kernel ABI {kernel}, {enforced}; {} paths readable, {} writable; \
         capabilities {}; seccomp filter installed ({} instructions); network {network}",
        grants.read.len(),
        grants.write.len(),
        if dropped { "dropped" } else { "none held" },
        program.len(),
    ))
}

/// Runs the helper with the arguments that follow the subcommand name. Returns only when the
/// command could not be executed: [`HELPER_FAILED`] when confining failed, 127/126 as a shell
/// does when the program is missing or cannot run.
pub fn helper_main(args: &[OsString]) -> u8 {
    let fail = |message: String| {
        eprintln!("talon {SUBCOMMAND}: {message}; the command was not run");
        HELPER_FAILED
    };
    let (confinement, argv) = match Confinement::parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return fail(e),
    };
    let report = match confine(&confinement) {
        Ok(report) => report,
        Err(e) => return fail(e),
    };
    if confinement.report {
        eprintln!("{report}");
    }
    let Some((program, rest)) = argv.split_first() else {
        return fail("no command after --".into());
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    if let Some(tmp) = &confinement.tmp {
        command.env("TMPDIR", tmp);
    }
    let e = command.exec();
    eprintln!("{}: {e}", program.to_string_lossy());
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_are_split_around() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["a/data/x", "a/b", "c"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/file"), "x").unwrap();
        std::fs::write(root.join("a/secret.toml"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("a/data"), root.join("c/to-data")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("to-a")).unwrap();
        std::os::unix::fs::symlink(root.join("a/b"), root.join("to-b")).unwrap();
        let excluded = vec![root.join("a/data"), root.join("a/secret.toml")];
        let mut out = Vec::new();
        split(&root, &excluded, &mut out);
        out.sort();
        // `c` holds a link to the hidden data, but a link inside a granted tree grants
        // nothing: Landlock checks where the link leads. A link granted as a tree of its own
        // (`to-a`) would, so it is left out.
        let want: Vec<PathBuf> = ["a/b", "a/file", "c", "to-b"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(out, want);
        // Nothing hidden beneath: the root itself.
        let mut out = Vec::new();
        split(&root.join("c"), &[root.join("a/data")], &mut out);
        assert_eq!(out, vec![root.join("c")]);
        // Inside a hidden path: nothing.
        let mut out = Vec::new();
        split(&root.join("a/data/x"), &excluded, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn grants_keep_dev_and_hidden_paths_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, data) = (root.join("ws"), root.join("data"));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(data.join("workspaces/agent")).unwrap();
        std::fs::write(ws.join("talon.toml"), "x").unwrap();
        let c = Confinement {
            writable: vec![ws.clone(), data.join("workspaces/agent")],
            hidden: vec![data.clone(), ws.join("talon.toml"), root.join("missing")],
            network: false,
            tmp: None,
            report: false,
        };
        let g = grants(&c);
        for path in &g.read {
            assert!(!path.starts_with("/dev") || DEVICES_READ.contains(&path.to_str().unwrap()));
            assert!(!path.starts_with(&data), "{path:?}");
            assert_ne!(path, &ws.join("talon.toml"));
            assert!(!root.starts_with(path), "{path:?} covers the hidden paths");
        }
        assert!(g.read.contains(&PathBuf::from("/usr")), "{:?}", g.read);
        // The workspace is split around its hidden config file; the agent workspace inside
        // the data directory is granted whole.
        assert!(g.write.contains(&ws.join("sub")));
        assert!(!g.write.contains(&ws));
        assert!(!g.write.contains(&ws.join("talon.toml")));
        assert!(g.write.contains(&data.join("workspaces/agent")));
        assert!(g.write.contains(&PathBuf::from("/dev/null")));
    }
}
