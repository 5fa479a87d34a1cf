//! Setting Talon up: `talon init` (a commented talon.toml), `talon config show` (the effective
//! configuration with where each value came from, secrets masked) and `talon completions`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use talon_core::visible::visible;

use super::usage_error;

/// The file `talon init` writes: every section, commented, with the defaults.
pub const TEMPLATE: &str = include_str!("talon.example.toml");

/// `talon init [--path FILE] [--force]`.
pub fn init(path: Option<PathBuf>, force: bool) -> ExitCode {
    let Some(path) = path
        .or_else(|| std::env::var_os("TALON_CONFIG").map(PathBuf::from))
        .or_else(crate::config::default_path)
    else {
        return usage_error("no place for the configuration: HOME is not set; pass --path FILE");
    };
    if path.exists() && !force {
        return usage_error(format!(
            "{} exists; `talon config show` shows what it sets (--force replaces it)",
            path.display()
        ));
    }
    // The gateway's token line carries a fresh random token, ready to uncomment.
    let text = TEMPLATE.replace(
        "# token = \"<random>\"",
        &format!("# token = \"{}\"", new_token()),
    );
    match write_private(&path, &text) {
        Ok(()) => {
            println!("wrote {}", path.display());
            println!(
                "next: set a provider there ([providers.NAME] and [chat] provider), then `talon chat` or `talon serve`"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("talon: cannot write {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}

/// A random gateway token: 32 bytes from the operating system's generator, base64url (43
/// characters), comfortably past `talon_gateway::check_token_strength`.
pub fn new_token() -> String {
    use base64::Engine as _;
    let bytes: [u8; 32] = rand::random();
    format!(
        "tln_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Writes `text` to `path` readable by its owner only (Talon refuses a configuration others
/// can write), creating a private directory for it when there is none.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())
}

/// `talon config show [--json]`: every value set, by a file or a `TALON_*` variable, with its
/// source; everything else is the default.
pub fn show(explicit: Option<&Path>, data_dir: Option<&Path>, as_json: bool) -> ExitCode {
    let (figment, file) = match crate::config::sources(explicit) {
        Ok(found) => found,
        Err(e) => return usage_error(e),
    };
    // Checked as a start checks it (keys, values, policy, `[exec]`, MCP servers, where the file
    // and the data directory are), so `config show` also tells whether Talon would start.
    let config = match crate::config::load(explicit) {
        Ok((config, _)) => config,
        Err(e) => return usage_error(e),
    };
    let data_dir = crate::config::data_dir(data_dir);
    if let Err(e) = crate::runtime::check(&config, &crate::runtime::Overrides::default(), &data_dir)
    {
        return usage_error(e);
    }
    let set = match talon_runtime::config_redact::set_values(&figment) {
        Ok(set) => set,
        Err(e) => return usage_error(e),
    };
    if as_json {
        let values: Vec<_> = set
            .iter()
            .map(|v| serde_json::json!({"key": v.key, "value": v.value, "source": v.source}))
            .collect();
        println!("{}", serde_json::json!({"file": file, "values": values}));
        return ExitCode::SUCCESS;
    }
    match &file {
        Some(file) => println!("# configuration file: {}", file.display()),
        None => println!("# no configuration file (defaults and TALON_* variables)"),
    }
    if set.is_empty() {
        println!("# nothing is set: every value is the default");
    }
    for v in &set {
        println!(
            "{} = {}  # {}",
            visible(&v.key),
            visible(&v.value.to_string()),
            visible(&v.source)
        );
    }
    ExitCode::SUCCESS
}

/// `talon completions SHELL`: the shell's completion script on stdout.
pub fn completions(shell: clap_complete::Shell, command: &mut clap::Command) -> ExitCode {
    clap_complete::generate(shell, command, "talon", &mut std::io::stdout());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_is_a_valid_configuration() {
        use figment::providers::Format;
        let config: crate::config::Config =
            figment::Figment::from(figment::providers::Toml::string(TEMPLATE))
                .extract()
                .expect("talon init writes a configuration Talon reads");
        assert!(config.tools.profile.is_none());
    }
}
