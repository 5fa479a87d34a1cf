//! The loop's own cost per iteration, the model excluded: a provider that answers instantly
//! (in process, no HTTP) asks for one call of a trivial tool per request, ten times, then
//! answers (eleven model requests a turn). Compared in the same run with the same calls made on the pipeline directly (the naive
//! baseline: what the tool costs without a loop around it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use serde_json::json;
use talon_agent::provider::{
    ChatRequest, EventSink, Provider, ProviderError, ProviderKind, StopReason, StreamEvent,
};
use talon_agent::{Agent, LoopConfig, Message, ToolCallRequest};
use talon_core::{
    Authorized, CallContext, Pipeline, Registry, SideEffect, Tool, ToolCall, ToolOutput, ToolSpec,
};

const ITERATIONS: usize = 10;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    n: u32,
}

struct Echo;

impl Tool for Echo {
    type Input = Input;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("echo", "Echoes a number.", SideEffect::None)
    }
    async fn execute(&self, call: Authorized<Input>) -> ToolOutput {
        ToolOutput::text(format!("n = {}", call.input().n))
    }
}

/// Answers instantly: one call of `echo` per request until ten were made, then text.
#[derive(Default)]
struct Instant(AtomicUsize);

impl Provider for Instant {
    fn name(&self) -> &str {
        "instant"
    }
    fn kind(&self) -> ProviderKind {
        ProviderKind::Openai
    }
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        sink: EventSink<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let done = request.messages.len() >= 2 * ITERATIONS;
        Box::pin(async move {
            if done {
                sink(StreamEvent::TextDelta("done".into()));
                sink(StreamEvent::Finished(StopReason::EndTurn));
            } else {
                sink(StreamEvent::ToolCall(ToolCallRequest {
                    id: format!("call_{n}"),
                    name: "echo".into(),
                    arguments: format!(r#"{{"n":{n}}}"#),
                }));
                sink(StreamEvent::Finished(StopReason::ToolUse));
            }
            Ok(())
        })
    }
}

fn pipeline() -> Arc<Pipeline> {
    let registry = Registry::new();
    registry.register(Echo).unwrap();
    Arc::new(
        Pipeline::builder(Arc::new(registry))
            .rate_limiter(None)
            .build()
            .unwrap(),
    )
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pipeline = pipeline();
    let agent = Agent::new(
        Arc::clone(&pipeline),
        Arc::new(Instant::default()),
        LoopConfig {
            model: "instant".into(),
            ..LoopConfig::default()
        },
    );
    let ctx = Arc::new(CallContext::new("bench"));
    let mut group = c.benchmark_group("agent_loop");
    group.bench_function("turn: 10 tool-call iterations + the answer", |b| {
        b.iter(|| {
            rt.block_on(async {
                let outcome = agent
                    .run_turn(Arc::clone(&ctx), &[], Message::user("go"), &|_| {})
                    .await;
                assert_eq!(outcome.iterations as usize, ITERATIONS + 1);
            })
        })
    });
    group.bench_function("10 pipeline calls, no loop (baseline)", |b| {
        b.iter(|| {
            rt.block_on(async {
                for n in 0..ITERATIONS {
                    let out = pipeline
                        .call(
                            Arc::clone(&ctx),
                            ToolCall::new("echo", json!(format!(r#"{{"n":{n}}}"#))),
                        )
                        .await;
                    assert!(!out.output.is_error);
                }
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
