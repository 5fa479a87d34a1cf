//! `talon mock-provider --script FILE [--embedding-model DIR]`: the scripted OpenAI- and
//! Anthropic-compatible server, for offline demos and tests, with an OpenAI-compatible
//! `/v1/embeddings` (the local sentence model in DIR, else hashed words). Prints the URL to use
//! as a provider's `base_url` and serves until Ctrl-C.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use talon_agent::mock::{Script, serve};

use super::usage_error;

pub async fn run(script: &Path, listen: &str, embedding_model: Option<&Path>) -> ExitCode {
    let script = match Script::from_file(script) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let embedder = match embedding_model.map(load) {
        Some(Ok(e)) => Some(e),
        Some(Err(e)) => return usage_error(format!("--embedding-model: {e}")),
        None => None,
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
    match serve(script, embedder, listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("talon mock-provider: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(feature = "local-embeddings")]
fn load(dir: &Path) -> Result<std::sync::Arc<dyn talon_embed::Embedder>, String> {
    talon_embed::LocalEmbedder::load(dir, None)
        .map(|e| std::sync::Arc::new(e) as std::sync::Arc<dyn talon_embed::Embedder>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "local-embeddings"))]
fn load(_dir: &Path) -> Result<std::sync::Arc<dyn talon_embed::Embedder>, String> {
    Err("this talon was built without the local-embeddings feature".into())
}
