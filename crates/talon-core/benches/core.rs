//! Talon core benchmarks (see docs/BENCHMARKS.md for the figures and how to run them):
//! * pipeline overhead: a trivial tool with 1 KiB of output through all ten steps, against
//!   running the same tool body directly and scrubbing its output;
//! * scrubber throughput on ~100 MiB of realistic secret-free output, against the naive approach
//!   (every pattern applied in turn over the whole text, as GoClaw does);
//! * the effective tool set of an agent with 500 tools (400 of them MCP).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use regex::bytes::RegexBuilder;
use serde_json::{Value, json};
use talon_core::context::ScrubBag;
use talon_core::policy::{AgentToolPolicy, PolicyConfig, PolicyEngine, PolicyRequest, ToolPolicy};
use talon_core::rate_limit::RateLimiter;
use talon_core::scrub::{Scrubber, rule_patterns};
use talon_core::{
    Authorized, CallContext, Pipeline, Registry, SideEffect, Tool, ToolCall, ToolOutput, ToolSpec,
};

/// The body of the trivial tool: 1 KiB of ordinary output.
fn kib_output() -> ToolOutput {
    let mut text = String::with_capacity(1024);
    while text.len() < 1024 - 64 {
        text.push_str("src/main.rs:42: fn main() { println!(\"hello, world\"); } // ok\n");
    }
    ToolOutput::text(text)
}

struct Trivial;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct TrivialInput {
    #[allow(dead_code)]
    path: String,
}

impl Tool for Trivial {
    type Input = TrivialInput;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("trivial", "returns 1 KiB", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<TrivialInput>) -> ToolOutput {
        kib_output()
    }
}

fn pipeline_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Arc::new(Registry::new());
    registry.register(Trivial).unwrap();
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .rate_limiter(RateLimiter::new(u32::MAX, u32::MAX))
        .build()
        .unwrap();
    let scrubber = Scrubber::new().unwrap();
    let ctx = Arc::new(CallContext::new("bench-session"));
    let args = json!({"path": "src/main.rs"});
    let bag = ScrubBag::default();

    let mut group = c.benchmark_group("pipeline_overhead");
    group.bench_function("direct_tool_body_plus_scrub", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut out = kib_output();
                scrubber.scrub_string(&mut out.for_llm, &bag);
                black_box(out)
            })
        })
    });
    group.bench_function("pipeline_all_ten_steps", |b| {
        b.iter(|| {
            rt.block_on(async {
                let outcome = pipeline
                    .call(Arc::clone(&ctx), ToolCall::new("trivial", args.clone()))
                    .await;
                assert!(!outcome.output.is_error);
                black_box(outcome)
            })
        })
    });
    group.finish();
}

/// Collects text files under `dir` (sorted, deterministic) up to `budget` bytes.
fn collect_files(dir: &Path, budget: usize, out: &mut Vec<u8>) {
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return,
    };
    entries.sort();
    for path in entries {
        if out.len() >= budget {
            return;
        }
        if path.is_dir() {
            collect_files(&path, budget, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("rs" | "toml" | "md" | "json")
        ) && let Ok(text) = std::fs::read_to_string(&path)
        {
            out.extend_from_slice(text.as_bytes());
        }
    }
}

/// ~100 MiB of realistic secret-free tool output: crate sources and manifests from the cargo
/// registry, cargo build logs, `git log` with commit ids, JSON with UUIDs and sha256 checksums.
fn corpus() -> String {
    const TARGET: usize = 100 << 20;
    let mut source = Vec::new();
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    collect_files(&home.join("registry/src"), 40 << 20, &mut source);
    // Crate sources carry a few credential-shaped test fixtures (`http://Aladdin:opensesame@…`,
    // hex key test vectors); drop those lines so the corpus is secret-free.
    let scrubber = Scrubber::new().unwrap();
    let bag = ScrubBag::default();
    let source: String = String::from_utf8_lossy(&source)
        .lines()
        .filter(|line| matches!(scrubber.scrub(line, &bag), std::borrow::Cow::Borrowed(_)))
        .flat_map(|line| [line, "\n"])
        .collect();

    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut hex = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from_digit((seed % 16) as u32, 16).unwrap()
            })
            .collect()
    };
    let mut generated = String::new();
    for i in 0..60_000 {
        generated.push_str(&format!(
            "commit {}\nAuthor: Dev {i} <dev{i}@example.com>\nDate:   Sun Nov 22 15:{:02}:00 2026 +0000\n\n    Fix parser edge case #{i}\n\n",
            hex(40),
            i % 60
        ));
        generated.push_str(&format!(
            "   Compiling crate-{i} v0.{}.{}\n    Checking dep-{i} v1.0.{}\n",
            i % 20,
            i % 7,
            i % 13
        ));
        generated.push_str(&format!(
            "{{\"id\":\"{}-{}-4{}-a{}-{}\",\"name\":\"pkg-{i}\",\"checksum\":\"{}\",\"size\":{}}}\n",
            hex(8),
            hex(4),
            hex(3),
            hex(3),
            hex(12),
            hex(64),
            i * 37
        ));
        generated.push_str(&format!(
            "{}  target/release/artifact-{i}.tar.gz\n",
            hex(64)
        ));
    }
    let mut text = String::with_capacity(TARGET + (1 << 20));
    while text.len() < TARGET {
        text.push_str(&source);
        text.push_str(&generated);
    }
    let mut cut = TARGET;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

fn scrubber_throughput(c: &mut Criterion) {
    let text = corpus();
    let scrubber = Scrubber::new().unwrap();
    let bag = ScrubBag::default();
    if let Some(path) = std::env::var_os("TALON_BENCH_DUMP_CORPUS") {
        std::fs::write(path, &text).unwrap();
    }
    let untouched = matches!(scrubber.scrub(&text, &bag), std::borrow::Cow::Borrowed(_));
    eprintln!(
        "corpus: {} bytes, secret-free by Talon's rules: {untouched}",
        text.len()
    );
    let naive: Vec<regex::bytes::Regex> = rule_patterns()
        .iter()
        .map(|(_, p)| {
            RegexBuilder::new(p)
                .unicode(false)
                .size_limit(32 << 20)
                .build()
                .unwrap()
        })
        .collect();

    let mut group = c.benchmark_group("scrub_100MiB");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("talon_prefilter", |b| {
        b.iter(|| black_box(scrubber.scrub(black_box(&text), &bag).len()))
    });
    group.bench_function("naive_every_pattern_in_turn", |b| {
        b.iter(|| {
            let mut current: Vec<u8> = text.as_bytes().to_vec();
            for re in &naive {
                if let std::borrow::Cow::Owned(replaced) =
                    re.replace_all(&current, &b"[REDACTED]"[..])
                {
                    current = replaced;
                }
            }
            black_box(current.len())
        })
    });
    group.finish();
}

struct Named(String);

impl Tool for Named {
    type Input = Value;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.0.clone(), "bench tool", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<Value>) -> ToolOutput {
        ToolOutput::text("")
    }
}

fn effective_tool_set(c: &mut Criterion) {
    let registry = Arc::new(Registry::new());
    let native: Vec<String> = talon_core::policy::catalog::BUILTIN_GROUPS
        .iter()
        .flat_map(|(_, members)| members.iter().map(|m| (*m).to_string()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut count = 0;
    for name in native.iter().take(100) {
        registry.register(Named(name.clone())).unwrap();
        count += 1;
    }
    for i in 0..(500 - count) {
        let (server, tool) = (i / 40, i % 40);
        let name = format!("mcp__srv{server}__tool{tool}");
        registry.register(Named(name.clone())).unwrap();
        registry.merge_group(&format!("mcp:srv{server}"), [name.clone()]);
        registry.merge_group("mcp", [name]);
    }
    assert_eq!(registry.len(), 500);
    let mut config = PolicyConfig {
        global: ToolPolicy {
            profile: Some("coding".into()),
            deny: vec!["group:runtime".into(), "mcp__srv3__*".into()],
            also_allow: vec!["group:mcp".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    config.agents.insert(
        "agent".into(),
        AgentToolPolicy {
            deny: vec!["group:mcp:srv7".into()],
            ..Default::default()
        },
    );
    let engine = PolicyEngine::new(config).unwrap();
    let request = PolicyRequest {
        agent: Some("agent"),
        ..Default::default()
    };
    let size = engine.effective(&registry, &request).len();
    eprintln!("effective tool set: {size} of 500 tools");
    let pipeline = Pipeline::builder(Arc::clone(&registry))
        .policy(engine.clone())
        .build()
        .unwrap();
    let mut ctx = CallContext::new("s");
    ctx.agent_key = Some("agent".into());

    let mut group = c.benchmark_group("effective_tool_set_500");
    group.bench_function("compute", |b| {
        b.iter(|| black_box(engine.effective(&registry, &request).len()))
    });
    group.bench_function("cached_per_call", |b| {
        b.iter(|| black_box(pipeline.effective_tools(&ctx).len()))
    });
    group.finish();
}

/// The untrusted-content fence on a 1 MiB result (issue 22 item 1: escaping the header and
/// neutralising marker look-alikes), against the scrub every result already gets and against
/// a fence that only concatenates markers (GoClaw's `wrapExternalContent`, forgeable).
fn untrusted_fence(c: &mut Criterion) {
    let corpus = corpus();
    let mut cut = 1 << 20;
    while !corpus.is_char_boundary(cut) {
        cut -= 1;
    }
    let text = &corpus[..cut];
    let scrubber = Scrubber::new().unwrap();
    let bag = ScrubBag::default();
    let origin = "https://docs.example.com/api-key-docs.txt?token=\"x\"";
    let mut group = c.benchmark_group("fence_1MiB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("talon_wrap", |b| {
        b.iter(|| {
            black_box(talon_core::untrusted::wrap("web_fetch", origin, black_box(text)).len())
        })
    });
    group.bench_function("concatenate_markers_only", |b| {
        b.iter(|| {
            black_box(
                format!(
                    "<<<EXTERNAL_UNTRUSTED_CONTENT source=\"web_fetch\" origin=\"{origin}\">>>\n{}\n<<<END_EXTERNAL_UNTRUSTED_CONTENT>>>",
                    black_box(text)
                )
                .len(),
            )
        })
    });
    group.bench_function("scrub_same_text", |b| {
        b.iter(|| black_box(scrubber.scrub(black_box(text), &bag).len()))
    });
    group.finish();
}

criterion_group!(
    benches,
    pipeline_overhead,
    scrubber_throughput,
    effective_tool_set,
    untrusted_fence
);
criterion_main!(benches);
