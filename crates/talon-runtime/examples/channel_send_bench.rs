//! Message throughput to a local server speaking Telegram's `sendMessage`: Talon's channel
//! client (`Channel::send`, one message per call, the answer checked) against a bare `reqwest`
//! POST of the same JSON (the ceiling), sequentially and with 16 sends in flight.
//!
//! `cargo run --release -p talon-runtime --example channel_send_bench -- 5000`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use axum::Json;
use serde_json::{Value, json};
use talon_runtime::channels::{Channel, ChannelSection, Kind};

const TOKEN: &str = "123:bench";

async fn serve() -> String {
    let next = Arc::new(AtomicI64::new(0));
    let app = axum::Router::new().route(
        &format!("/bot{TOKEN}/sendMessage"),
        axum::routing::post(move |Json(body): Json<Value>| {
            let id = next.fetch_add(1, Ordering::Relaxed);
            async move {
                Json(json!({"ok": true, "result": {"message_id": id, "chat": {"id": body["chat_id"]}, "text": body["text"]}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

async fn run<F, Fut>(n: usize, in_flight: usize, send: F) -> f64
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let per_task = n / in_flight;
    let mut tasks = Vec::new();
    for t in 0..in_flight {
        let send = send.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                send(t * per_task + i).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (per_task * in_flight) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let base = serve().await;
    let section = ChannelSection {
        kind: "telegram".into(),
        base_url: Some(base.clone()),
        ..Default::default()
    };
    let channel =
        Arc::new(Channel::new("bench", Kind::Telegram, section, Some(TOKEN.into())).unwrap());
    let http = reqwest::Client::new();
    let url = format!("{base}/bot{TOKEN}/sendMessage");
    println!("| sends in flight | Talon channel (msg/s) | bare reqwest (msg/s) | ratio |");
    println!("| --- | --- | --- | --- |");
    for in_flight in [1, 16] {
        // Warm both paths (connections, allocations) before timing.
        let warm = Arc::clone(&channel);
        run(200, in_flight.min(200), move |i| {
            let c = Arc::clone(&warm);
            async move {
                c.send("-1001", None, &format!("warm {i}"), None)
                    .await
                    .unwrap();
            }
        })
        .await;
        let talon = {
            let c = Arc::clone(&channel);
            run(n, in_flight, move |i| {
                let c = Arc::clone(&c);
                async move {
                    c.send("-1001", Some("5"), &format!("message {i}"), None)
                        .await
                        .unwrap();
                }
            })
            .await
        };
        let bare = {
            let (http, url) = (http.clone(), url.clone());
            run(n, in_flight, move |i| {
                let (http, url) = (http.clone(), url.clone());
                async move {
                    let body = json!({"chat_id": "-1001", "text": format!("message {i}"), "message_thread_id": 5});
                    let answer: Value = http.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
                    assert_eq!(answer["ok"], true);
                }
            })
            .await
        };
        println!(
            "| {in_flight} | {talon:.0} | {bare:.0} | {:.2} |",
            talon / bare
        );
    }
}
