//! Helpers of the chat tests: `talon mock-provider` as a child process, HTTP requests from
//! synchronous tests, and `talon chat` runs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

/// A running `talon mock-provider`, killed when dropped.
pub struct Mock {
    child: Child,
    pub url: String,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn mock_provider(home: &Path, script: &Value) -> Mock {
    mock_provider_with(home, script, &[])
}

/// [`mock_provider`] with more arguments (`--embedding-model DIR`).
pub fn mock_provider_with(home: &Path, script: &Value, args: &[&std::ffi::OsStr]) -> Mock {
    let path = home.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut child = super::command(home)
        .args(["mock-provider", "--script"])
        .arg(&path)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("mock provider listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    Mock {
        child,
        url,
        _stdout: stdout,
    }
}

/// One HTTP request (no body: GET): the status and the response body as text.
pub fn exchange(url: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> (u16, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut request = match body {
            Some(body) => client.post(url).json(body),
            None => client.get(url),
        };
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request
            .timeout(std::time::Duration::from_secs(120))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    })
}

/// One HTTP request (no body: GET), the response body as text.
pub fn http(url: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> String {
    exchange(url, body, headers).1
}

/// One HTTP request (no body: GET): the status and the body as JSON (a JSON string when it is
/// not JSON).
pub fn status_json(url: &str, body: Option<&Value>) -> (u16, Value) {
    let (status, text) = exchange(url, body, &[]);
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// One `method` request with a JSON `body` (PUT, DELETE, …): the status and the body as JSON.
pub fn method_json(method: &str, url: &str, body: &Value) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, text) = runtime.block_on(async {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = reqwest::Client::new()
            .request(method, url)
            .json(body)
            .timeout(std::time::Duration::from_secs(120))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub fn requests(mock: &Mock) -> Vec<Value> {
    serde_json::from_str(&http(&format!("{}/_mock/requests", mock.url), None, &[])).unwrap()
}

pub fn chat(home: &Path, args: &[&str]) -> (String, String, i32) {
    chat_with_input(home, args, "")
}

/// `talon chat ARGS` with `input` on its stdin (not a terminal).
pub fn chat_with_input(home: &Path, args: &[&str], input: &str) -> (String, String, i32) {
    let out = super::output_with_input(
        super::command(home)
            .env("MOCK_KEY", "sk-mock-secret-123456")
            .arg("chat")
            .args(args),
        input,
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Listens to `url` (server-sent events) on a thread until an event named `until` arrives (or
/// 20 s pass); returns once the subscription is open, with a handle yielding what was read.
pub fn listen(url: String, until: &'static str) -> std::thread::JoinHandle<String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut response = reqwest::get(&url).await.unwrap();
            ready_tx.send(()).unwrap();
            let mut seen = String::new();
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
            while !seen.contains(&format!("event: {until}")) {
                match tokio::time::timeout_at(deadline, response.chunk()).await {
                    Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                    _ => break,
                }
            }
            seen
        })
    });
    ready_rx.recv().unwrap();
    handle
}

pub fn post(url: &str, body: &Value, headers: &[(&str, &str)]) -> String {
    http(url, Some(body), headers)
}

/// A running `support/independent_provider.py` (a model server sharing no code with Talon),
/// killed when dropped.
pub struct Independent {
    child: Child,
    /// Its root URL (`{url}/v1` for the OpenAI API).
    pub url: String,
    /// Where it logs every request body, a JSON line each.
    pub log: std::path::PathBuf,
}

impl Drop for Independent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Independent {
    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Starts the independent model server in `home`: answering by the conversation's state, or
/// by `script` (Talon's mock script shape) when given.
pub fn independent_provider(home: &Path, script: Option<&Value>) -> Independent {
    let port_file = home.join("independent.port");
    let log = home.join("independent.jsonl");
    let program = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/independent_provider.py"
    );
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(program).arg(&port_file).arg(&log);
    if let Some(script) = script {
        let path = home.join("independent-script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        cmd.arg(path);
    }
    let child = cmd.spawn().unwrap();
    let mut server = Independent {
        child,
        url: String::new(),
        log,
    };
    for _ in 0..400 {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            server.url = format!("http://127.0.0.1:{port}");
            return server;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("the independent provider did not start");
}

/// The model server of a test: Talon's mock or the independent one.
pub enum ModelServer {
    Mock(Mock),
    Independent(Independent),
}

impl ModelServer {
    /// Starts one driven by `script`: the independent server when `independent`.
    pub fn start(home: &Path, script: &Value, independent: bool) -> Self {
        if independent {
            Self::Independent(independent_provider(home, Some(script)))
        } else {
            Self::Mock(mock_provider(home, script))
        }
    }

    /// Its root URL.
    pub fn url(&self) -> &str {
        match self {
            Self::Mock(m) => &m.url,
            Self::Independent(i) => &i.url,
        }
    }

    /// The `base_url` for a provider of `kind` (`openai` or `anthropic`).
    pub fn base_url(&self, kind: &str) -> String {
        if kind == "openai" {
            format!("{}/v1", self.url())
        } else {
            self.url().to_string()
        }
    }

    /// Every request received, in order. Blocking: from async code, call it in
    /// `tokio::task::block_in_place`.
    pub fn requests(&self) -> Vec<Value> {
        match self {
            Self::Mock(m) => requests(m),
            Self::Independent(i) => i.requests(),
        }
    }
}

/// The done-when conversation, one model answer per request (the last repeated: the loop):
/// two reads in one batch, a write needing approval, a question, a command a hook blocks, a
/// slow answer to cancel, and the same call until the loop detector stops it. The CLI and
/// HTTP tests both drive it.
pub fn story_script() -> Value {
    let question = json!({"questions": [{"question": "Which colour?", "header": "Colour",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
        "multiSelect": false}]});
    json!({"repeat_last": true, "turns": [
        // 1: two reads in one batch.
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}},
                        {"name": "read_file", "arguments": {"path": "b.txt"}}]},
        {"text": "Both read."},
        // 2: a write, which needs approval.
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "approved write\n"}}]},
        {"text": "Written."},
        // 3: a question to the user.
        {"tool_calls": [{"name": "AskUserQuestion", "arguments": question}]},
        {"text": "Blue it is."},
        // 4: a command a hook blocks.
        {"tool_calls": [{"name": "exec", "arguments": {"command": "echo forbidden"}}]},
        {"text": "The hook stopped it."},
        // 5: a slow answer, cancelled.
        {"text": "too late", "delay_ms": 30000},
        // 6: the same call forever, until the loop detector stops the turn.
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}
    ]})
}

/// `talon.toml` for [`story_script`]: approvals asked (default mode), a hook refusing `exec`,
/// and the model server as provider `mock` of `kind` at `base_url`.
pub fn story_config(kind: &str, base_url: &str) -> String {
    format!(
        "[tools]\npermission_mode = \"default\"\n\
         [[hooks.pre_tool_use]]\nmatcher = \"exec\"\ncommand = \"echo 'no commands in this demo' >&2; exit 2\"\n\
         [providers.mock]\nkind = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"mock-1\"\n"
    )
}

/// A directory set up for the story: `a.txt`, `b.txt`, the model server (the independent one
/// when `independent`) and `talon.toml` for `kind`; with a label for assertion messages.
pub fn story_home(kind: &str, independent: bool) -> (tempfile::TempDir, ModelServer, String) {
    let label = format!(
        "{kind}/{}",
        if independent { "independent" } else { "talon" }
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(home.path().join("b.txt"), "beta\n").unwrap();
    let server = ModelServer::start(home.path(), &story_script(), independent);
    std::fs::write(
        home.path().join("talon.toml"),
        story_config(kind, &server.base_url(kind)),
    )
    .unwrap();
    (home, server, label)
}

/// Of `requests` to a model server, those of the conversation whose first user message
/// contains `marker`.
pub fn of_conversation(requests: Vec<Value>, marker: &str) -> Vec<Value> {
    requests
        .into_iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "user")
                .is_some_and(|m| m["content"].to_string().contains(marker))
        })
        .collect()
}

/// The names of the tools a model request (OpenAI format) offered.
pub fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
