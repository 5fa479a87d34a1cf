//! Running `talon` at a terminal: util-linux `script` gives it a pseudo-terminal, so what it
//! asks on `/dev/tty` and what the person would see can be checked.

use std::process::Stdio;

/// Runs `talon <args>` in `home` under a pseudo-terminal (util-linux `script`), typing `typed`
/// ahead (the terminal hands each prompt one line); what the terminal showed, and whether it
/// succeeded.
pub fn at_a_terminal(home: &std::path::Path, args: &str, typed: &[u8]) -> (String, bool) {
    use std::io::Write;
    let mut child = under_a_terminal(home, args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(typed).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.success(),
    )
}

/// `talon <args>` in `home` under a pseudo-terminal (util-linux `script`), stdin and stdout
/// piped.
pub fn under_a_terminal(home: &std::path::Path, args: &str) -> std::process::Command {
    let line = format!("{} {args}", super::talon().display());
    let mut cmd = std::process::Command::new("script");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TALON_DATA_DIR", super::data_dir(home))
        .current_dir(home)
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if let Some(config) = super::config_file(home) {
        cmd.env("TALON_CONFIG", config);
    }
    cmd
}
