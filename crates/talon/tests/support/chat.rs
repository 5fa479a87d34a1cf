//! Helpers of the chat tests: `talon mock-provider` as a child process, HTTP requests from
//! synchronous tests, and `talon chat` runs.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;

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
    let path = home.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut child = super::command(home)
        .args(["mock-provider", "--script"])
        .arg(&path)
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

/// One HTTP request (no body: GET), the response body as text.
pub fn http(url: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> String {
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
            .timeout(std::time::Duration::from_secs(30))
            .send()
            .await
            .unwrap();
        response.text().await.unwrap()
    })
}

pub fn requests(mock: &Mock) -> Vec<Value> {
    serde_json::from_str(&http(&format!("{}/_mock/requests", mock.url), None, &[])).unwrap()
}

pub fn chat(home: &Path, args: &[&str]) -> (String, String, i32) {
    let out = super::command(home)
        .env("MOCK_KEY", "sk-mock-secret-123456")
        .arg("chat")
        .args(args)
        .output()
        .unwrap();
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
