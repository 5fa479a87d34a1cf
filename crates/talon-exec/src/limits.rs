//! Resource limits as shell builtins: the `ulimit` lines a host command's shell runs before the
//! command, so it can be started with `posix_spawn` (no pre-exec hook) and still never runs a
//! single instruction without its limits. `ulimit` without `-S`/`-H` sets both, so the command
//! cannot raise them again. A limit the host already holds lower stays (the line fails quietly).

use std::path::Path;

use crate::run::Limits;

/// `ulimit` commands (on the command's first line, so line numbers in its errors stay right) for
/// `limits` in the dialect of `shell` (bash counts file sizes in 1024-byte
/// blocks, POSIX shells such as dash in 512-byte blocks; dash takes one limit per `ulimit`).
pub(crate) fn shell_prefix(limits: &Limits, shell: &Path) -> String {
    let is_bash = shell.file_name().is_some_and(|n| n == "bash");
    let block = if is_bash { 1024 } else { 512 };
    let file_blocks = limits.file_size_mb.saturating_mul(1 << 20) / block;
    let data_kib = limits.memory_mb.saturating_mul(1024);
    format!(
        "ulimit -d {data_kib} 2>/dev/null; ulimit -t {cpu} 2>/dev/null; \\
         ulimit -f {file_blocks} 2>/dev/null; ulimit -n {files} 2>/dev/null; ",
        cpu = limits.cpu_secs,
        files = limits.open_files,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits_seen(shell: &str) -> String {
        let limits = Limits {
            memory_mb: 64,
            cpu_secs: 7,
            file_size_mb: 1,
            open_files: 99,
        };
        let script = format!(
            "{}ulimit -d; ulimit -t; ulimit -f; ulimit -n; ulimit -H -n; ulimit -n 200 2>/dev/null || echo locked",
            shell_prefix(&limits, Path::new(shell))
        );
        let out = std::process::Command::new(shell)
            .args(["-c", &script])
            .output()
            .expect("shell runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn dash_and_bash_hold_the_same_limits_and_cannot_raise_them() {
        assert_eq!(limits_seen("/bin/sh"), "65536\n7\n2048\n99\n99\nlocked\n");
        assert_eq!(limits_seen("/bin/bash"), "65536\n7\n1024\n99\n99\nlocked\n");
    }

    #[test]
    fn a_file_past_the_limit_is_cut_short() {
        let dir = tempfile::tempdir().expect("dir");
        let big = dir.path().join("big");
        let limits = Limits {
            file_size_mb: 1,
            ..Limits::default()
        };
        let script = format!(
            "{}head -c 3000000 /dev/zero > {}",
            shell_prefix(&limits, Path::new("/bin/sh")),
            big.display()
        );
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .status()
            .expect("runs");
        assert!(!status.success());
        let size = std::fs::metadata(&big).expect("file").len();
        assert_eq!(size, 1 << 20);
    }
}
