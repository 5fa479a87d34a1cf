//! Small tools for the crate's own tests.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::output::ToolOutput;
use crate::tool::{Authorized, SideEffect, Tool, ToolSpec};

/// A tool with a given name, side effect and groups; echoes its `text` argument.
pub struct Named {
    pub name: &'static str,
    pub side_effect: SideEffect,
    pub groups: &'static [&'static str],
    /// The other dialect's tool for the same job ([`ToolSpec::same_as`]).
    pub same_as: Option<&'static str>,
    /// Declared as administering the gateway, as handing conversations off, as starting runs.
    pub operator_only: bool,
    pub hands_off: bool,
    pub starts_runs: bool,
}

impl Named {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            side_effect: SideEffect::None,
            groups: &[],
            same_as: None,
            operator_only: false,
            hands_off: false,
            starts_runs: false,
        }
    }

    pub fn with(name: &'static str, side_effect: SideEffect) -> Self {
        Self {
            name,
            side_effect,
            groups: &[],
            same_as: None,
            operator_only: false,
            hands_off: false,
            starts_runs: false,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct EchoInput {
    /// Text to echo back.
    #[serde(default)]
    pub text: Option<String>,
}

impl Tool for Named {
    type Input = EchoInput;
    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            self.name,
            format!("test tool {}", self.name),
            self.side_effect,
        );
        for g in self.groups {
            spec = spec.in_group(*g);
        }
        if let Some(twin) = self.same_as {
            spec = spec.same_as(twin);
        }
        if self.operator_only {
            spec = spec.for_operator_only();
        }
        if self.hands_off {
            spec = spec.handing_off();
        }
        if self.starts_runs {
            spec = spec.starting_runs();
        }
        spec
    }
    async fn execute(&self, call: Authorized<EchoInput>) -> ToolOutput {
        ToolOutput::text(
            call.input()
                .text
                .clone()
                .unwrap_or_else(|| format!("{} ran", self.name)),
        )
    }
}

/// Requires `path` and `content`; writes nothing, reports what it got.
pub struct NeedsArgs;

#[derive(Deserialize, JsonSchema)]
pub struct NeedsArgsInput {
    pub path: String,
    pub content: String,
    #[serde(default)]
    pub mode: Option<Mode>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Overwrite,
    Append,
}

impl Tool for NeedsArgs {
    type Input = NeedsArgsInput;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("needs_args", "requires path and content", SideEffect::None)
    }
    async fn execute(&self, call: Authorized<NeedsArgsInput>) -> ToolOutput {
        let input = call.input();
        let suffix = match input.mode {
            Some(Mode::Append) => " (append)",
            Some(Mode::Overwrite) | None => "",
        };
        ToolOutput::text(format!("{}={}{suffix}", input.path, input.content))
    }
}

/// Misbehaving tools: panics, sleeps, or returns a fixed output.
pub enum Misbehave {
    Panic,
    Sleep(Duration),
    Output(Box<ToolOutput>),
}

pub struct Bad(pub &'static str, pub Misbehave);

impl Tool for Bad {
    type Input = Value;
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.0, "misbehaving test tool", SideEffect::None)
    }
    async fn execute(&self, _call: Authorized<Value>) -> ToolOutput {
        match &self.1 {
            Misbehave::Panic => panic!("boom in tool"),
            Misbehave::Sleep(d) => {
                tokio::time::sleep(*d).await;
                ToolOutput::text("slept")
            }
            Misbehave::Output(o) => (**o).clone(),
        }
    }
}
