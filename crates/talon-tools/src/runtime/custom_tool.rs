//! Custom tools: shell commands an operator defines at run time (`talon custom-tools`, the HTTP
//! API), each offered to the model as a tool of its own with the parameters its definition
//! declares (seed 000 §13, seed 002 §11).
//!
//! A custom tool gets no path of its own around the rules `exec` follows. Its spec declares
//! its command template ([`talon_core::ToolSpec::script_template`]), so the pipeline validates
//! the arguments against the declared schema, renders the command with every value shell-quoted
//! ([`talon_core::script_template`]) and judges the rendered command with the same analysis,
//! deny groups and approvals as `exec`; the tool then runs exactly that text through the same
//! [`Shell`] (the same sandbox, output cap and process-group kill), in the workspace or a
//! directory inside it. Its environment is the allowlisted one plus its own variables, never the
//! gateway's (GoClaw's tool inherited the whole gateway environment when it had no variables of
//! its own, and lost `PATH` when it had some), and those values are scrubbed from the call's
//! output.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};
use talon_exec::{Request, Shell};
use talon_store::CustomToolSpec;

use super::{check_command, working_dir};
use crate::fs::workspace::FsConfig;

/// The groups every custom tool is in: its own, and `runtime` (it runs a shell command, so a
/// policy that denies `group:runtime` denies it too).
pub const GROUPS: [&str; 2] = ["custom", "runtime"];

/// Argument types a definition may declare: what a placeholder can put on a command line.
const PARAMETER_TYPES: &[&str] = &["string", "number", "integer", "boolean"];

/// One loaded custom tool: its checked definition and its decrypted environment.
#[derive(Clone)]
pub struct CustomTool {
    pub spec: CustomToolSpec,
    /// The argument schema as offered and validated (closed to undeclared arguments).
    pub schema: Value,
    pub env: Arc<[(String, String)]>,
    pub fs: Arc<FsConfig>,
    pub shell: Arc<Shell>,
}

impl std::fmt::Debug for CustomTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomTool")
            .field("name", &self.spec.name)
            .field(
                "env",
                &self.env.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Checks a definition beyond its form (which [`CustomToolSpec::check`] checks): its name is no
/// built-in tool's; its parameters are an object schema of strings, numbers and booleans that
/// compiles; every placeholder in the command names a parameter and every parameter is used.
/// Returns the schema the tool is offered with. The error says what to fix.
pub fn check_definition(spec: &CustomToolSpec) -> Result<Value, String> {
    spec.check().map_err(|e| e.to_string())?;
    if talon_core::policy::catalog::is_builtin_tool_name(&spec.name) {
        return Err(format!(
            "custom tool name {:?} is a built-in tool's name; pick another (a custom tool never replaces a built-in one)",
            spec.name
        ));
    }
    let mut schema = spec.parameters.clone();
    let Some(map) = schema.as_object_mut() else {
        return Err("parameters: give a JSON object schema".into());
    };
    if map.get("type").is_some_and(|t| t != "object") {
        return Err("parameters: the schema's type must be \"object\"".into());
    }
    map.insert("type".into(), "object".into());
    let properties = map
        .entry("properties")
        .or_insert_with(|| Value::Object(Default::default()))
        .clone();
    let Some(properties) = properties.as_object() else {
        return Err("parameters: properties must be an object of parameter schemas".into());
    };
    for (name, property) in properties {
        if !talon_core::script_template::placeholders(&format!("{{{{.{name}}}}}"))
            .iter()
            .any(|p| p == name)
        {
            return Err(format!(
                "parameter {name:?}: use letters, digits and _, starting with a letter or _ (it must fit a {{{{.name}}}} placeholder)"
            ));
        }
        let kind = property.get("type").and_then(Value::as_str);
        if !kind.is_some_and(|k| PARAMETER_TYPES.contains(&k)) {
            return Err(format!(
                "parameter {name:?}: give its type, one of {}",
                PARAMETER_TYPES.join(", ")
            ));
        }
    }
    let used = talon_core::script_template::placeholders(&spec.command);
    if let Some(missing) = used.iter().find(|p| !properties.contains_key(*p)) {
        return Err(format!(
            "command: placeholder {{{{.{missing}}}}} names no parameter; declare {missing:?} in parameters or remove it"
        ));
    }
    talon_exec::analysis::template::check_placeholders(&spec.command)
        .map_err(|e| format!("command: {e}"))?;
    if let Some(unused) = properties.keys().find(|p| !used.contains(p)) {
        return Err(format!(
            "parameter {unused:?} is not used in the command; add {{{{.{unused}}}}} to it or remove the parameter"
        ));
    }
    if let Some(required) = map.get("required") {
        let names = required.as_array().filter(|r| {
            r.iter()
                .all(|n| n.as_str().is_some_and(|n| properties.contains_key(n)))
        });
        if names.is_none() {
            return Err("parameters: required must list declared parameters".into());
        }
    }
    map.insert("additionalProperties".into(), Value::Bool(false));
    talon_core::schema::validator(&schema).map_err(|e| format!("parameters: {e}"))?;
    Ok(schema)
}

impl Tool for CustomTool {
    type Input = Value;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            self.spec.name.clone(),
            self.spec.description.clone(),
            SideEffect::Spawns,
        )
        .with_script_template(self.spec.command.clone());
        for group in GROUPS {
            spec = spec.in_group(group);
        }
        if !self.spec.agent.is_empty() {
            spec = spec.only_for_agent(self.spec.agent.clone());
        }
        spec
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn execute(&self, call: Authorized<Value>) -> ToolOutput {
        let ctx = call.ctx();
        // The command the permission step judged; rendered again (by the same function, from
        // the same arguments) only when the pipeline has no script analyzer.
        let command = match call.script() {
            Some(script) => script.script().to_string(),
            None => or_error!(talon_core::script_template::render(
                &self.spec.command,
                call.input()
            )),
        };
        or_error!(check_command(&command));
        let dir = Some(self.spec.working_dir.as_str()).filter(|d| !d.is_empty());
        let (workspace, cwd) = or_error!(working_dir(&self.fs, ctx, dir));
        if !self.env.is_empty() {
            or_error!(no_route_to_secrets(call.input(), &cwd));
        }
        for (_, value) in self.env.iter() {
            ctx.scrub_bag.add(value.clone());
        }
        let timeout = Duration::from_secs(self.spec.timeout_secs);
        let request = Request {
            shell: Path::new("/bin/sh"),
            command: &command,
            cwd: &cwd,
            workspace: &workspace,
            agent: ctx.agent_key.as_deref(),
            session: Some(&ctx.session_key),
            timeout,
            env: &self.env,
        };
        super::exec::run_to_end(&self.shell, &request, ctx).await
    }
}

/// A tool with variables of its own holds them in its process's environment, which the process
/// can read back through `/proc/self/environ`, `/dev/fd/../environ` or a link to either (an
/// outside review read a tool's secret that way, 8 bytes a call). So no argument of such a tool
/// may name a process file or a symbolic link: the model chooses the values, and a value must
/// never reach the tool's own secrets.
fn no_route_to_secrets(args: &Value, cwd: &Path) -> Result<(), String> {
    let mut strings = Vec::new();
    collect_strings(args, &mut strings);
    for value in strings {
        let lower = value.trim().to_ascii_lowercase();
        let process_file = lower.contains("/proc")
            || lower.starts_with("proc/")
            || lower.contains("/dev/fd")
            || lower.contains("/dev/std")
            || lower.split('/').any(|part| part == "environ")
            || lower.contains("/fd/");
        let link = !lower.is_empty()
            && std::fs::symlink_metadata(cwd.join(value.trim()))
                .is_ok_and(|m| m.file_type().is_symlink());
        if process_file || link {
            return Err(format!(
                "the value {value:?} names {}, through which this tool's own secret variables could be read; pass the path of a regular file in the workspace",
                if link {
                    "a symbolic link"
                } else {
                    "a process file (/proc, /dev/fd or environ)"
                }
            ));
        }
    }
    Ok(())
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_value_reaches_the_tools_own_environment() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", dir.path().join("x")).unwrap();
        for bad in [
            json!({"p": "/proc/self/environ"}),
            json!({"p": "/dev/fd/../environ"}),
            json!({"p": "../../proc/1/environ"}),
            json!({"p": "x"}),
            json!({"list": ["ok", "/dev/stdin"]}),
        ] {
            assert!(no_route_to_secrets(&bad, dir.path()).is_err(), "{bad}");
        }
        no_route_to_secrets(&json!({"p": "notes.txt", "n": 8}), dir.path()).unwrap();
        no_route_to_secrets(&json!({"msg": "set up the environment"}), dir.path()).unwrap();
    }

    fn spec(command: &str, parameters: Value) -> CustomToolSpec {
        let mut spec = CustomToolSpec::new("count_lines", "Counts lines of a file.", command);
        spec.parameters = parameters;
        spec
    }

    #[test]
    fn a_sound_definition_is_closed_to_undeclared_arguments() {
        let schema = check_definition(&spec(
            "wc -l {{.path}}",
            json!({"properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ))
        .unwrap();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["type"], json!("object"));
    }

    #[test]
    fn placeholders_and_parameters_must_match() {
        let err =
            check_definition(&spec("wc -l {{.file}}", json!({"properties": {}}))).unwrap_err();
        assert!(err.contains("{{.file}} names no parameter"), "{err}");
        let err = check_definition(&spec(
            "wc -l",
            json!({"properties": {"path": {"type": "string"}}}),
        ))
        .unwrap_err();
        assert!(err.contains("\"path\" is not used"), "{err}");
    }

    #[test]
    fn parameters_are_plain_values_with_placeholder_names() {
        for (properties, says) in [
            (json!({"p": {"type": "object"}}), "give its type"),
            (json!({"p": {}}), "give its type"),
            (json!({"a-b": {"type": "string"}}), "placeholder"),
        ] {
            let command = "echo {{.p}} {{.a-b}}";
            let err =
                check_definition(&spec(command, json!({ "properties": properties }))).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
        let err = check_definition(&spec(
            "echo {{.p}}",
            json!({"properties": {"p": {"type": "string"}}, "required": ["q"]}),
        ))
        .unwrap_err();
        assert!(err.contains("required"), "{err}");
    }

    #[test]
    fn built_in_names_are_refused_in_any_case() {
        for name in [
            "exec",
            "bash",
            "read_file",
            "cron",
            "message",
            "gateway",
            "write",
        ] {
            let mut s = spec("true", json!({}));
            s.name = name.into();
            let err = check_definition(&s).unwrap_err();
            assert!(err.contains("built-in"), "{name}: {err}");
        }
    }
}
