//! `talon mock-provider --script FILE`: the scripted OpenAI- and Anthropic-compatible server, for
//! offline demos and tests. Prints the URL to use as a provider's `base_url` and serves until
//! Ctrl-C.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use talon_agent::mock::{Script, serve};

use super::usage_error;

pub async fn run(script: &Path, listen: &str) -> ExitCode {
    let script = match Script::from_file(script) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => return usage_error(format!("--listen {listen}: {e}")),
    };
    match listener.local_addr() {
        Ok(addr) => {
            // A reader that stopped listening must not stop the server.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "mock provider listening on http://{addr}\n  OpenAI-compatible: base_url = \"http://{addr}/v1\"\n  Anthropic:         base_url = \"http://{addr}\""
            );
            let _ = out.flush();
        }
        Err(e) => return usage_error(e),
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match serve(script, listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("talon mock-provider: {e}");
            ExitCode::from(1)
        }
    }
}
