//! The server the MCP conformance suite's server scenarios run against: Talon's gateway router
//! (the one `talon serve` serves, `/mcp` included) over a registry of Talon's built-in tools plus
//! the suite's test tools (`test_simple_text`, `test_tool_with_progress`, …), registered as
//! ordinary `talon_core` tools. The suite asks for tools by those names and checks what `/mcp`
//! makes of their results, notifications and requests to the client; each call goes through
//! Talon's pipeline like any other, so the scenarios exercise Talon's protocol handling, not a
//! reference SDK's: media become image, audio and resource content, `CallContext::log` becomes
//! log notifications, `report_progress` progress notifications, a question through
//! `CallContext::client` an `elicitation/create` request (2025-11-25) or an `input_required`
//! result (2026-07-28). Served in-process on a loopback port for the life of the test. Not
//! provided, because Talon has no counterpart: sampling, roots, resources, prompts, and a tool
//! that closes its SSE stream (see the expected-failures files).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use talon_core::permission::PermissionMode;
use talon_core::{
    Authorized, CallContext, Callers, LogLevel, Media, Pipeline, ProgressUpdate, Registry,
    SideEffect, Tool, ToolOutput, ToolSpec, Workspaces,
};

/// A 1×1 red PNG.
const PNG: [u8; 69] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0,
    0, 0, 144, 119, 83, 222, 0, 0, 0, 12, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 0, 3, 1,
    1, 0, 201, 254, 146, 239, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

/// A 10 ms mono 8 kHz 8-bit WAV of silence.
fn wav() -> Vec<u8> {
    let samples = 80u32;
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + samples).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&8u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&samples.to_le_bytes());
    out.extend(std::iter::repeat_n(128u8, samples as usize));
    out
}

fn media(mime_type: &str, data: Vec<u8>, name: Option<&str>) -> Media {
    Media {
        mime_type: mime_type.into(),
        data,
        name: name.map(Into::into),
        prompt: None,
    }
}

/// What a test tool does.
#[derive(Clone, Copy)]
enum Kind {
    SimpleText,
    Image,
    Audio,
    EmbeddedResource,
    Mixed,
    Logging,
    Progress,
    Error,
    Elicitation,
    ElicitationDefaults,
    ElicitationEnums,
    Schema2020,
    TriggerToolChange,
    /// SEP-2322 scenarios: questions that a 2026-07-28 request answers with `input_required`.
    AskName,
    AskConfirmation,
    AskTwice,
}

/// One of the suite's test tools.
struct Fixture {
    name: &'static str,
    kind: Kind,
    schema: Value,
    /// For `test_trigger_tool_change`: the registry whose tool list it changes.
    registry: Weak<Registry>,
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn one_string(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    })
}

/// The input schema `json-schema-2020-12` expects to find unchanged in `tools/list`.
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            },
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

fn elicitation_request(kind: Kind, args: &Value) -> Value {
    match kind {
        Kind::ElicitationDefaults => json!({
            "message": "Please review and update the form fields with defaults",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {"type": "boolean", "description": "Verified", "default": true},
                },
            },
        }),
        Kind::ElicitationEnums => json!({
            "message": "Please select options from the enum fields",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Select one option",
                        "enum": ["option1", "option2", "option3"],
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Select one option with titles",
                        "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"},
                        ],
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Select one option (legacy)",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Select multiple options",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Select multiple options with titles",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {
                            "anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"},
                            ],
                        },
                    },
                },
                "required": [],
            },
        }),
        _ => json!({
            "message": args["message"].as_str().unwrap_or("Please provide your information"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            },
        }),
    }
}

/// Asks the caller's client through `CallContext::client`, Talon's server-to-client path.
async fn elicit(ctx: &CallContext, kind: Kind, args: &Value) -> ToolOutput {
    let Some(client) = &ctx.client else {
        return ToolOutput::error("the client cannot answer elicitations");
    };
    match client.0.elicit(elicitation_request(kind, args)).await {
        Ok(answer) => {
            let action = answer["action"].as_str().unwrap_or("unknown");
            let content = answer.get("content").cloned().unwrap_or(Value::Null);
            if matches!(kind, Kind::Elicitation) {
                ToolOutput::text(format!("User response: action={action}, content={content}"))
            } else {
                ToolOutput::text(format!(
                    "Elicitation completed: action={action}, content={content}"
                ))
            }
        }
        Err(e) => ToolOutput::error(format!("elicitation failed: {e}")),
    }
}

/// A question named `key` (the key of `inputRequests` in a 2026-07-28 round) for one string or
/// boolean field.
fn question(key: &str, message: &str, field: &str, kind: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field],
        },
        "_meta": {talon_mcp::mrtr::INPUT_KEY_META: key},
    })
}

/// Asks `question`; the answer's `field`, or why there is none.
async fn ask(ctx: &CallContext, question: Value, field: &str) -> Result<Value, ToolOutput> {
    let Some(client) = &ctx.client else {
        return Err(ToolOutput::error("the client cannot answer questions"));
    };
    let answer = client
        .0
        .elicit(question)
        .await
        .map_err(|e| ToolOutput::error(format!("no answer: {e}")))?;
    if answer["action"] != "accept" {
        return Err(ToolOutput::error(format!(
            "the user answered {}",
            answer["action"]
        )));
    }
    Ok(answer["content"][field].clone())
}

async fn ask_and_answer(ctx: &CallContext, kind: Kind) -> Result<ToolOutput, ToolOutput> {
    Ok(match kind {
        Kind::AskName => {
            let q = question("user_name", "What is your name?", "name", "string");
            let name = ask(ctx, q, "name").await?;
            ToolOutput::text(format!("Hello, {}!", name.as_str().unwrap_or("stranger")))
        }
        Kind::AskConfirmation => {
            let q = question("confirm", "Please confirm", "ok", "boolean");
            let ok = ask(ctx, q, "ok").await?;
            // Reached only when /mcp accepted the sealed requestState of the first round.
            ToolOutput::text(format!("state-ok: confirmed={ok}"))
        }
        _ => {
            let q = question("step1", "Step 1: What is your name?", "name", "string");
            let name = ask(ctx, q, "name").await?;
            let q = question(
                "step2",
                "Step 2: What is your favorite color?",
                "color",
                "string",
            );
            let color = ask(ctx, q, "color").await?;
            ToolOutput::text(format!("{name} likes {color}"))
        }
    })
}

/// A tool the suite does not know, added and removed by `test_trigger_tool_change`.
struct Dynamic;

impl Tool for Dynamic {
    type Input = Value;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("test_dynamic_tool", "Comes and goes", SideEffect::None)
    }

    fn input_schema(&self) -> Value {
        no_arguments()
    }

    async fn execute(&self, _call: Authorized<Value>) -> ToolOutput {
        ToolOutput::text("dynamic")
    }
}

impl Tool for Fixture {
    type Input = Value;

    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(
            self.name,
            format!("MCP conformance test tool {}", self.name),
            SideEffect::None,
        );
        if matches!(self.kind, Kind::Progress) {
            spec.reporting_progress()
        } else {
            spec
        }
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn execute(&self, call: Authorized<Value>) -> ToolOutput {
        let ctx = call.ctx();
        let pause = || tokio::time::sleep(Duration::from_millis(50));
        match self.kind {
            Kind::SimpleText => ToolOutput::text("This is a simple text response for testing."),
            Kind::Image => ToolOutput::text("").with_media(media("image/png", PNG.to_vec(), None)),
            Kind::Audio => ToolOutput::text("").with_media(media("audio/wav", wav(), None)),
            Kind::EmbeddedResource => ToolOutput::text("").with_media(media(
                "text/plain",
                b"This is an embedded resource content.".to_vec(),
                Some("test://embedded-resource"),
            )),
            Kind::Mixed => ToolOutput::text("Multiple content types test:")
                .with_media(media("image/png", PNG.to_vec(), None))
                .with_media(media(
                    "application/json",
                    br#"{"test":"data","value":123}"#.to_vec(),
                    Some("test://mixed-content-resource"),
                )),
            Kind::Logging => {
                ctx.log(LogLevel::Info, "Tool execution started");
                pause().await;
                ctx.log(LogLevel::Info, "Tool processing data");
                pause().await;
                ctx.log(LogLevel::Info, "Tool execution completed");
                ToolOutput::text("Tool with logging executed successfully")
            }
            Kind::Progress => {
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        pause().await;
                    }
                    ctx.report_progress(ProgressUpdate {
                        progress,
                        total: Some(100.0),
                        message: None,
                    });
                }
                ToolOutput::text("Tool with progress executed successfully")
            }
            Kind::Error => {
                ToolOutput::error("This tool intentionally returns an error for testing")
            }
            Kind::Elicitation | Kind::ElicitationDefaults | Kind::ElicitationEnums => {
                elicit(ctx, self.kind, call.input()).await
            }
            Kind::Schema2020 => ToolOutput::text(format!("received {}", call.input())),
            Kind::AskName | Kind::AskConfirmation | Kind::AskTwice => {
                ask_and_answer(ctx, self.kind).await.unwrap_or_else(|e| e)
            }
            Kind::TriggerToolChange => {
                let Some(registry) = self.registry.upgrade() else {
                    return ToolOutput::error("the registry is gone");
                };
                if !registry.unregister("test_dynamic_tool") {
                    registry.register(Dynamic).expect("registers");
                }
                ToolOutput::text("Tool list changed")
            }
        }
    }
}

/// Registers the suite's test tools in `registry`.
fn register_fixtures(registry: &Arc<Registry>) {
    let none = no_arguments;
    let tools: [(&'static str, Kind, Value); 19] = [
        ("test_simple_text", Kind::SimpleText, none()),
        ("test_image_content", Kind::Image, none()),
        ("test_audio_content", Kind::Audio, none()),
        ("test_embedded_resource", Kind::EmbeddedResource, none()),
        ("test_multiple_content_types", Kind::Mixed, none()),
        ("test_tool_with_logging", Kind::Logging, none()),
        // server-stateless: a 2026-07-28 call without a log level must bring no log messages.
        ("test_logging_tool", Kind::Logging, none()),
        ("test_tool_with_progress", Kind::Progress, none()),
        ("test_error_handling", Kind::Error, none()),
        (
            "test_elicitation",
            Kind::Elicitation,
            one_string("message", "The message to show the user"),
        ),
        (
            "test_elicitation_sep1034_defaults",
            Kind::ElicitationDefaults,
            none(),
        ),
        (
            "test_elicitation_sep1330_enums",
            Kind::ElicitationEnums,
            none(),
        ),
        (
            "json_schema_2020_12_tool",
            Kind::Schema2020,
            schema_2020_12(),
        ),
        ("test_trigger_tool_change", Kind::TriggerToolChange, none()),
        (
            "test_input_required_result_elicitation",
            Kind::AskName,
            none(),
        ),
        (
            "test_input_required_result_request_state",
            Kind::AskConfirmation,
            none(),
        ),
        (
            "test_input_required_result_tampered_state",
            Kind::AskConfirmation,
            none(),
        ),
        (
            "test_input_required_result_multi_round",
            Kind::AskTwice,
            none(),
        ),
        // SEP-2243: a parameter the client mirrors in an `Mcp-Param-Region` header.
        (
            "test_header_param",
            Kind::SimpleText,
            json!({
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"],
            }),
        ),
    ];
    for (name, kind, schema) in tools {
        registry
            .register(Fixture {
                name,
                kind,
                schema,
                registry: Arc::downgrade(registry),
            })
            .expect("registers");
    }
}

/// The running server; dropping it stops it.
pub struct Served {
    pub addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
    _workspace: tempfile::TempDir,
}

/// Serves the gateway router over Talon's built-in tools and the suite's test tools.
pub fn serve() -> Served {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let workspace = tempfile::tempdir().expect("workspace");
    let registry = Arc::new(Registry::new());
    talon_tools::register_builtin(&registry, &talon_tools::BuiltinConfig::default())
        .expect("built-in tools register");
    register_fixtures(&registry);
    let pipeline = Arc::new(
        Pipeline::builder(Arc::clone(&registry))
            .build()
            .expect("pipeline"),
    );
    let mut template = CallContext::new("template");
    template.permission_mode = PermissionMode::AcceptEdits;
    let callers = Callers::new(
        Workspaces::Shared(workspace.path().to_path_buf()),
        "default",
        Arc::new(talon_core::caller::FixedAgents::of(["default"])),
    );
    let events = pipeline.events().clone();
    let services = talon_gateway::Services {
        pipeline,
        template,
        callers,
        approvals: Arc::new(talon_core::approvals::Approvals::new(events.clone())),
        questions: Arc::new(talon_core::questions::Questions::new(events)),
        admin: None,
        readiness: None,
    };
    let config = talon_gateway::GatewayConfig {
        bind: "127.0.0.1:0".parse().expect("address"),
        token: None,
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        mcp_client_confirms: true,
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("address");
        let app = talon_gateway::router(&config, services, shutdown);
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    Served {
        addr,
        _runtime: runtime,
        _workspace: workspace,
    }
}
