//! The agent runtime's whole story over HTTP, in one stored session: parallel read-only calls,
//! a mutating call approved through `/v1/approvals`, a question answered through
//! `/v1/questions`, a call a hook blocks, a turn cancelled through
//! `/v1/sessions/{key}/cancel`, and a loop the detector stops — with the events watched on the
//! `/v1/events` WebSocket. Run against both provider formats, each from Talon's own mock and
//! from a model server written apart from Talon (`support/independent_provider.py`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};

use support::chat::story_home;
use tokio::task::block_in_place;
use tokio_tungstenite::tungstenite::Message as WsMessage;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What the test does when an event arrives during a turn.
enum Act {
    /// POST this body to this path.
    Post(&'static str, Value),
    Nothing,
}

/// Reacts to events of type `kind` by posting `body(request id)` to `path`.
fn answer(
    kind: &'static str,
    path: &'static str,
    body: impl Fn(&Value) -> Value,
) -> impl Fn(&Value) -> Act {
    move |e| {
        if e["type"] == kind {
            Act::Post(path, body(&e["request"]["id"]))
        } else {
            Act::Nothing
        }
    }
}

struct Gateway {
    base: String,
    http: reqwest::Client,
    session: String,
}

impl Gateway {
    async fn post(&self, path: &str, body: &Value) -> Value {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap();
        response.json().await.unwrap()
    }

    /// Runs one turn with `text`, reacting to its events with `react`; the turn's reply and the
    /// events seen until its `run_finished`.
    async fn turn(
        &self,
        ws: &mut Ws,
        text: &str,
        react: impl Fn(&Value) -> Act,
    ) -> (Value, Vec<Value>) {
        let path = format!("/v1/sessions/{}/messages", self.session);
        let body = json!({"text": text});
        let reply = self.post(&path, &body);
        tokio::pin!(reply);
        let mut events = Vec::new();
        let mut answer = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let finished = events.iter().any(|e: &Value| e["type"] == "run_finished");
            if finished && answer.is_some() {
                break;
            }
            tokio::select! {
                r = &mut reply, if answer.is_none() => answer = Some(r),
                m = ws.next() => {
                    let Some(Ok(WsMessage::Text(m))) = m else { panic!("the event socket ended: {m:?}") };
                    let event: Value = serde_json::from_str(&m).unwrap();
                    if let Act::Post(path, body) = react(&event) {
                        let answered = self.post(path, &body).await;
                        assert_eq!(answered["ok"], true, "{path}: {answered}");
                    }
                    events.push(event);
                }
                _ = tokio::time::sleep_until(deadline) => panic!("turn {text:?} did not end: {events:?}"),
            }
        }
        (answer.unwrap(), events)
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Every tool result the model was sent in request `i`, in order (either API's form).
fn tool_results(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in request["messages"].as_array().unwrap() {
        if m["role"] == "tool" {
            out.push(m["content"].to_string());
        }
        if let Some(blocks) = m["content"].as_array() {
            for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                out.push(b["content"].to_string());
            }
        }
    }
    out
}

async fn run_scenario(kind: &str, independent: bool) {
    let (home, provider, label) = story_home(kind, independent);
    let provider = Arc::new(provider);
    let mut cmd = support::command(home.path());
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
        .arg(home.path());
    let server = support::spawn(cmd);
    let session = "agent:default:http:direct:story".to_string();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!(
        "ws://{}/v1/events?session={session}",
        server.addr
    ))
    .await
    .unwrap();
    let gateway = Gateway {
        base: format!("http://{}", server.addr),
        http: reqwest::Client::new(),
        session: session.clone(),
    };

    // 1. Two reads in one batch; both results go back, in the model's order.
    let (reply, events) = gateway
        .turn(&mut ws, "read a and b", |_| Act::Nothing)
        .await;
    assert_eq!(
        reply["text"].as_str().map(str::trim),
        Some("Both read."),
        "{label}: {reply}"
    );
    let seen = kinds(&events);
    assert_eq!(seen.first(), Some(&"run_started"), "{label}: {seen:?}");
    assert_eq!(seen.last(), Some(&"run_finished"), "{label}: {seen:?}");
    assert_eq!(
        seen.iter().filter(|k| **k == "tool_started").count(),
        2,
        "{label}: {seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|k| **k == "tool_finished").count(),
        2,
        "{label}: {seen:?}"
    );
    let sent = block_in_place(|| provider.requests());
    let results = tool_results(&sent[1]);
    assert!(
        results.len() == 2 && results[0].contains("alpha") && results[1].contains("beta"),
        "{label}: {results:?}"
    );

    // 2. A write waits for approval, given over HTTP when the event announces it.
    let (reply, events) = gateway
        .turn(
            &mut ws,
            "write it",
            answer(
                "approval_requested",
                "/v1/approvals",
                |id| json!({"id": id, "decision": "allow_once"}),
            ),
        )
        .await;
    assert_eq!(
        reply["text"].as_str().map(str::trim),
        Some("Written."),
        "{label}: {reply}"
    );
    assert!(kinds(&events).contains(&"approval_resolved"), "{label}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("out.txt")).unwrap(),
        "approved write\n"
    );

    // 3. A question to the user, answered over HTTP.
    let (reply, events) = gateway
        .turn(
            &mut ws,
            "ask me",
            answer(
                "question_asked",
                "/v1/questions",
                |id| json!({"id": id, "action": "accept", "content": {"q1": "Blue"}}),
            ),
        )
        .await;
    assert_eq!(
        reply["text"].as_str().map(str::trim),
        Some("Blue it is."),
        "{label}: {reply}"
    );
    assert!(kinds(&events).contains(&"question_answered"), "{label}");
    let sent = block_in_place(|| provider.requests());
    let last = tool_results(&sent[5]).pop().unwrap();
    assert!(
        last.contains("\\\"Which colour?\\\"=\\\"Blue\\\""),
        "{label}: {last}"
    );

    // 4. A hook blocks the command before it runs; the model hears why.
    let (reply, _) = gateway.turn(&mut ws, "run it", |_| Act::Nothing).await;
    assert_eq!(
        reply["text"].as_str().map(str::trim),
        Some("The hook stopped it."),
        "{label}: {reply}"
    );
    let sent = block_in_place(|| provider.requests());
    let last = tool_results(&sent[7]).pop().unwrap();
    assert!(last.contains("no commands in this demo"), "{label}: {last}");

    // 5. A slow turn is cancelled from outside (once the model has been asked), and saved as
    // cancelled.
    let cancel = {
        let (gateway_base, session) = (gateway.base.clone(), session.clone());
        let provider = Arc::clone(&provider);
        tokio::spawn(async move {
            for _ in 0..600 {
                if block_in_place(|| provider.requests().len()) >= 9 {
                    let url = format!("{gateway_base}/v1/sessions/{session}/cancel");
                    let r = reqwest::Client::new().post(url).send().await.unwrap();
                    return r.status();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("the model was never asked")
        })
    };
    let (reply, _) = gateway
        .turn(&mut ws, "take your time", |_| Act::Nothing)
        .await;
    assert_eq!(cancel.await.unwrap(), 200, "{label}");
    assert_eq!(reply["stop"]["reason"], "cancelled", "{label}: {reply}");

    // 6. The same call again and again: warned, then stopped.
    let (reply, _) = gateway.turn(&mut ws, "loop", |_| Act::Nothing).await;
    assert_eq!(reply["stop"]["reason"], "loop_detected", "{label}: {reply}");
    let sent = block_in_place(|| provider.requests());
    let warned = sent
        .iter()
        .any(|r| tool_results(r).iter().any(|t| t.contains("Loop warning")));
    assert!(warned, "{label}: the model was warned before the stop");

    // The session holds every turn, the cancelled one marked as such.
    let shown = support::get_json(&format!("{}/v1/sessions/{session}", gateway.base)).await;
    assert_eq!(shown["session"]["turns"], 6, "{label}: {shown}");
    assert_eq!(shown["session"]["last_stop"], "loop_detected", "{label}");
    let _ = ws.close(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_story_over_http_with_talons_mock() {
    for kind in ["openai", "anthropic"] {
        run_scenario(kind, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_story_over_http_with_an_independent_model_server() {
    for kind in ["openai", "anthropic"] {
        run_scenario(kind, true).await;
    }
}

/// The event socket refuses a filter it does not understand, and filters what it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_socket_checks_its_filter() {
    let home = tempfile::tempdir().unwrap();
    let server = support::serve_in(home.path(), &[]);
    let bad = reqwest::get(format!("http://{}/v1/events?types=tool_ended", server.addr))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let text = bad.text().await.unwrap();
    assert!(
        text.contains("tool_ended") && text.contains("question_asked"),
        "{text}"
    );
    // A ping is answered; the socket stays open.
    let (mut ws, _) = tokio_tungstenite::connect_async(format!(
        "ws://{}/v1/events?types=run_started",
        server.addr
    ))
    .await
    .unwrap();
    ws.send(WsMessage::Ping(b"hi".to_vec().into()))
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
        Ok(Some(Ok(WsMessage::Pong(p)))) => assert_eq!(&p[..], b"hi"),
        other => panic!("no pong: {other:?}"),
    }
}
