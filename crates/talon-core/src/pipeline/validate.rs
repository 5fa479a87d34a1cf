//! Argument checks (pipeline step 3) and the unknown-tool message (step 1): errors the model can
//! act on.

use serde_json::{Map, Value};

use crate::schema::required_fields;

/// Turns what the caller sent into a JSON object, or says why it is not one.
///
/// `null` and `""` mean "no arguments"; a string holding a JSON object is accepted (some clients
/// send OpenAI's `arguments` string unparsed).
pub(crate) fn normalize_args(tool: &str, args: Value) -> Result<Value, String> {
    match args {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) => Ok(args),
        Value::String(s) if s.trim().is_empty() => Ok(Value::Object(Map::new())),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) | Err(_) => Err(format!(
                "invalid arguments for {tool}: arguments must be a JSON object such as {{\"field\": \"value\"}}; got a string that is not one"
            )),
        },
        other => Err(format!(
            "invalid arguments for {tool}: arguments must be a JSON object, got {}",
            kind(&other)
        )),
    }
}

/// `args` without the optional fields given as `null` whose schema does not take `null`: models
/// write `null` for "not given" (OpenAI's strict mode makes every optional field nullable), and
/// refusing such a call would only make the model try again without them. A field that may be
/// `null` by its schema, a required one, or one whose schema names no `type` is left as it is
/// for the schema check to judge.
pub(crate) fn drop_null_optionals(schema: &Value, mut args: Value) -> Value {
    // Every call passes here: most have no `null` at all.
    if !args
        .as_object()
        .is_some_and(|fields| fields.values().any(Value::is_null))
    {
        return args;
    }
    let required = required_fields(schema);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return args;
    };
    if let Some(fields) = args.as_object_mut() {
        fields.retain(|name, value| {
            let takes_null = |field: &Value| match field.get("type") {
                Some(Value::String(t)) => t == "null",
                Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
                _ => true,
            };
            !(value.is_null()
                && !required.contains(&name.as_str())
                && properties.get(name).is_some_and(|field| !takes_null(field)))
        });
    }
    args
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// GoClaw's empty-arguments guard, for any schema shape: an empty object for a tool with
/// required fields usually means the model's output was cut off mid-call.
pub(crate) fn empty_args_guard(tool: &str, schema: &Value, args: &Value) -> Option<String> {
    let empty = args.as_object().is_some_and(Map::is_empty);
    let required = required_fields(schema);
    (empty && !required.is_empty()).then(|| {
        format!(
            "Tool call had empty arguments (required: {}). This usually means your previous response was too long \
             and the tool call was cut off. Split the work into smaller parts and call {tool} again with all required arguments.",
            required.join(", ")
        )
    })
}

/// Validates against the compiled schema; lists every problem with its location.
pub(crate) fn check_schema(
    tool: &str,
    validator: Result<&jsonschema::Validator, String>,
    args: &Value,
) -> Result<(), String> {
    let validator = validator.map_err(|e| {
        format!("tool {tool} has an invalid input schema, so it cannot be called (a bug in the tool, not in your call): {e}")
    })?;
    let problems: Vec<String> = validator
        .iter_errors(args)
        .take(8)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() {
                "the arguments".to_string()
            } else {
                format!("field `{}`", path.trim_start_matches('/').replace('/', "."))
            };
            format!("{at}: {e}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid arguments for {tool}: {}. Fix these and call {tool} again.",
            problems.join("; ")
        ))
    }
}

/// "unknown tool" with up to three close matches among the tools the caller may use.
pub(crate) fn unknown_tool_message<'a>(
    name: &str,
    offered: impl Iterator<Item = &'a String>,
) -> String {
    let lower = name.to_ascii_lowercase();
    let mut scored: Vec<(f64, &String)> = offered
        .map(|candidate| {
            let c = candidate.to_ascii_lowercase();
            let mut score = strsim::jaro_winkler(&lower, &c);
            if c.contains(&lower) || lower.contains(&c) {
                score = score.max(0.85);
            }
            (score, candidate)
        })
        .filter(|(score, _)| *score >= 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let suggestions: Vec<&str> = scored.iter().take(3).map(|(_, n)| n.as_str()).collect();
    if suggestions.is_empty() {
        format!("unknown tool: {name:?}. Call one of the tools you were offered.")
    } else {
        format!(
            "unknown tool: {name:?}. Did you mean: {}?",
            suggestions.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalizes_argument_shapes() {
        assert_eq!(normalize_args("t", Value::Null), Ok(json!({})));
        assert_eq!(normalize_args("t", json!("")), Ok(json!({})));
        assert_eq!(normalize_args("t", json!("{\"a\":1}")), Ok(json!({"a": 1})));
        assert!(normalize_args("t", json!("[1]")).is_err());
        let err = normalize_args("t", json!([1])).expect_err("array");
        assert!(err.contains("got an array"), "{err}");
    }

    #[test]
    fn null_means_not_given_for_optional_fields_that_take_no_null() {
        let schema = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"},
            "verbose": {"type": "boolean"},
            "limit": {"type": ["integer", "null"]},
            "mode": {"anyOf": [{"type": "string"}]},
        }});
        let args =
            json!({"path": null, "verbose": null, "limit": null, "mode": null, "other": null});
        assert_eq!(
            drop_null_optionals(&schema, args),
            json!({"path": null, "limit": null, "mode": null, "other": null}),
            "only the optional boolean given as null is dropped"
        );
    }

    #[test]
    fn empty_guard_fires_only_with_required_fields() {
        let schema = json!({"type": "object", "required": ["path", "content"]});
        let msg = empty_args_guard("write_file", &schema, &json!({})).expect("guard");
        assert!(msg.contains("required: path, content"), "{msg}");
        assert!(empty_args_guard("write_file", &schema, &json!({"path": "x"})).is_none());
        assert!(empty_args_guard("datetime", &json!({"type": "object"}), &json!({})).is_none());
    }

    #[test]
    fn unknown_tool_suggests_close_names() {
        let offered = [
            "read_file".to_string(),
            "write_file".to_string(),
            "datetime".to_string(),
        ];
        let msg = unknown_tool_message("reed_file", offered.iter());
        assert!(msg.contains("Did you mean: read_file"), "{msg}");
        let msg = unknown_tool_message("zzz", offered.iter());
        assert!(!msg.contains("Did you mean"), "{msg}");
    }
}
