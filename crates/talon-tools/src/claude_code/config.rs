//! `Config`: Claude Code's tool for reading and changing settings, here the settings of the
//! agent session the call runs in, kept in the store:
//!
//! | Setting | Value | Takes effect |
//! |---|---|---|
//! | `model` | a name `[subagents.models]` lists | from the session's next turn |
//! | `permissions.defaultMode` | `plan`, `dontAsk`, `default`, `acceptEdits` | at once, and in later turns |
//! | `autoCompactEnabled` | `true` / `false` | from the next turn |
//!
//! The model may only make its permission mode stricter (`acceptEdits` → `default` → `dontAsk`
//! → `plan`): loosening it is the user's decision (`ExitPlanMode` asks them; the entry point's
//! `--permission-mode` sets it). Without a stored session (a stateless HTTP request, an MCP
//! client) there is nothing to keep settings in, and the tool says so.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use talon_core::permission::PermissionMode;
use talon_core::{Authorized, CallContext, SessionEffect, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_store::Store;

/// The tool's name. A successful permission-mode change declares it in its output
/// ([`SessionEffect::PermissionMode`]) and the agent loop applies it at once.
pub const NAME: &str = "Config";

/// The setting holding the permission mode.
pub const PERMISSION_MODE: &str = "permissions.defaultMode";

/// Where the runtime keeps, while a session is in plan mode, the mode an approved plan returns
/// to. Not a setting of the tool: the model can neither read nor write it.
pub const MODE_BEFORE_PLAN: &str = "permissions.modeBeforePlan";

/// Every setting the tool knows.
const SETTINGS: [&str; 3] = ["model", PERMISSION_MODE, "autoCompactEnabled"];

/// Input of [`Config`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigInput {
    /// The setting: `model`, `permissions.defaultMode` or `autoCompactEnabled`.
    pub setting: String,
    /// The new value; leave it out to read the setting.
    #[serde(default)]
    pub value: Option<Value>,
}

/// The `Config` tool.
#[derive(Debug, Clone)]
pub struct Config {
    pub store: Store,
    /// The model names a session may switch to (`[subagents.models]`'s): the runtime maps a
    /// stored name to its provider model, and ignores one it does not list.
    pub models: Vec<String>,
}

/// The stricter-or-equal mode named by `value` for a call now in `current`, or why not.
pub fn stricter_mode(current: PermissionMode, value: &Value) -> Result<PermissionMode, String> {
    let mode: PermissionMode = serde_json::from_value(value.clone()).map_err(|_| {
        format!("{value} is not a permission mode; use plan, dontAsk, default or acceptEdits")
    })?;
    if !mode.is_no_looser_than(current) {
        return Err(format!(
            "the permission mode can only be made stricter here ({} is more permissive than the \
             current {}); ask the user to change it",
            mode.as_str(),
            current.as_str()
        ));
    }
    Ok(mode)
}

/// Why a session cannot switch to a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefused {
    #[error(
        "this gateway lets no session change its model (the operator lists the models it may use \
         in [subagents.models]); keep the current one"
    )]
    NoneListed,
    /// `shown`: the value asked for, as JSON.
    #[error("{} is not a model this gateway allows; use one of: {}", talon_core::visible::visible(.shown), .allowed.join(", "))]
    NotListed { shown: String, allowed: Vec<String> },
}

/// The model name `value` picks for a session, if it is one of `models` (the names
/// `[subagents.models]` lists): the one rule for the `Config` tool and `talon chat`'s `/model`.
pub fn model_choice(models: &[String], value: &Value) -> Result<String, ModelRefused> {
    match value.as_str().map(str::trim) {
        Some(name) if models.iter().any(|m| m == name) => Ok(name.to_string()),
        Some(_) if models.is_empty() => Err(ModelRefused::NoneListed),
        _ => Err(ModelRefused::NotListed {
            shown: value.to_string(),
            allowed: models.to_vec(),
        }),
    }
}

/// The checked value of `setting`, or why it is wrong; `models`: the names a session may
/// switch to.
fn checked(
    ctx: &CallContext,
    models: &[String],
    setting: &str,
    value: &Value,
) -> Result<Value, String> {
    match setting {
        "model" => model_choice(models, value)
            .map(|name| json!(name))
            .map_err(|e| e.to_string()),
        PERMISSION_MODE => stricter_mode(ctx.permission_mode, value).map(|m| json!(m.as_str())),
        "autoCompactEnabled" => match value {
            Value::Bool(b) => Ok(json!(b)),
            Value::String(s) if s == "true" || s == "false" => Ok(json!(s == "true")),
            _ => Err(format!("{value} is not true or false")),
        },
        _ => Err(unknown(setting)),
    }
}

fn unknown(setting: &str) -> String {
    format!(
        "unknown setting {setting:?}; the settings are {}",
        SETTINGS.join(", ")
    )
}

/// The setting's value now: stored, else what the turn runs with.
fn current(ctx: &CallContext, stored: &serde_json::Map<String, Value>, setting: &str) -> Value {
    match setting {
        PERMISSION_MODE => json!(ctx.permission_mode.as_str()),
        "model" => stored
            .get("model")
            .cloned()
            .unwrap_or_else(|| ctx.model.clone().map_or(Value::Null, Value::String)),
        _ => stored.get(setting).cloned().unwrap_or(json!(true)),
    }
}

impl Tool for Config {
    type Input = ConfigInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            NAME,
            "Get or set a setting of this session. Settings: model (the model later turns use), \
             permissions.defaultMode (plan, dontAsk, default, acceptEdits; you may only make it \
             stricter), autoCompactEnabled (true/false: summarise old turns when the context \
             fills). Leave out value to read a setting.",
            SideEffect::ReadOnly,
        )
        // Read-only for the permission modes (it can only make a session stricter), but it
        // writes the session's settings: calls in one batch run one at a time, in the model's
        // order, so a read after a write sees it.
        .parallel_safe(false)
        .in_group("interaction")
    }

    async fn execute(&self, call: Authorized<ConfigInput>) -> ToolOutput {
        let (ctx, input) = (call.ctx(), call.input());
        let setting = input.setting.trim();
        if !SETTINGS.contains(&setting) {
            return ToolOutput::error(unknown(setting));
        }
        let stored = match self.store.session(&ctx.session_key).await {
            Ok(Some(_)) => match self.store.session_settings(&ctx.session_key).await {
                Ok(stored) => stored,
                Err(e) => return ToolOutput::error(format!("settings are unavailable: {e}")),
            },
            Ok(None) => {
                return ToolOutput::error(
                    "This conversation is not a stored session, so it has no settings to read or \
                     change. Continue without them.",
                );
            }
            Err(e) => return ToolOutput::error(format!("settings are unavailable: {e}")),
        };
        let Some(value) = &input.value else {
            return ToolOutput::text(format!("{setting} = {}", current(ctx, &stored, setting)));
        };
        let value = match checked(ctx, &self.models, setting, value) {
            Ok(value) => value,
            Err(e) => return ToolOutput::error(e),
        };
        if let Err(e) = self
            .store
            .set_session_setting(&ctx.session_key, setting, &value)
            .await
        {
            return ToolOutput::error(format!("the setting could not be saved: {e}"));
        }
        if setting == PERMISSION_MODE {
            let output = ToolOutput::text(format!("Set {setting} to {value}; it applies now."));
            return match serde_json::from_value::<PermissionMode>(value) {
                Ok(mode) => output.with_session_effect(SessionEffect::PermissionMode(mode)),
                Err(_) => output,
            };
        }
        ToolOutput::text(format!(
            "Set {setting} to {value}; it applies from the next turn."
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_only_gets_stricter() {
        let from_edits = |v: &str| stricter_mode(PermissionMode::AcceptEdits, &json!(v));
        assert_eq!(from_edits("plan"), Ok(PermissionMode::Plan));
        assert_eq!(from_edits("default"), Ok(PermissionMode::Default));
        assert!(from_edits("bypassPermissions").is_err_and(|e| e.contains("stricter")));
        assert!(from_edits("yolo").is_err_and(|e| e.contains("not a permission mode")));
        assert!(
            stricter_mode(PermissionMode::Plan, &json!("default"))
                .is_err_and(|e| e.contains("ask the user"))
        );
    }

    #[test]
    fn values_are_checked_per_setting() {
        let ctx = CallContext::new("s");
        let models = ["small-1".to_string()];
        assert_eq!(
            checked(&ctx, &models, "model", &json!(" small-1 ")),
            Ok(json!("small-1"))
        );
        assert_eq!(
            checked(&ctx, &models, "autoCompactEnabled", &json!("false")),
            Ok(json!(false))
        );
        assert!(checked(&ctx, &models, "autoCompactEnabled", &json!(3)).is_err());
        assert!(
            checked(&ctx, &models, "theme", &json!("dark")).is_err_and(|e| e.contains("model"))
        );
    }

    /// Issue 36 (6): a session's model is held to `[subagents.models]`, as `Agent`'s and a
    /// custom agent's are; with none listed it cannot change at all.
    #[test]
    fn h36_6_the_model_is_one_the_gateway_allows() {
        let ctx = CallContext::new("s");
        let models = ["small-1".to_string()];
        let refused = checked(&ctx, &models, "model", &json!("gpt-priciest")).unwrap_err();
        assert!(refused.contains("use one of: small-1"), "{refused}");
        assert!(
            checked(&ctx, &[], "model", &json!("small-1"))
                .is_err_and(|e| e.contains("[subagents.models]"))
        );
    }
}
