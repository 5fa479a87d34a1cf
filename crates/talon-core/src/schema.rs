//! JSON schemas for tool inputs, derived from Rust types.
//!
//! Derived schemas are inlined (no `$ref`/`$defs`) and stripped of `$schema` and `title`, because the
//! three wire formats (OpenAI, Anthropic, MCP) accept that subset everywhere.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The input schema for `T`, in the form every provider accepts.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        // The generator names its draft; a derived schema needs no dialect of its own.
        map.remove("$schema");
    }
    normalize(schema)
}

/// Makes any schema an object schema with `properties`, without `title` and a root
/// `description`. A declared `$schema` (a bridged MCP server's tool, say) is kept: it selects
/// the dialect the arguments are validated in, and MCP clients are offered the schema as its
/// tool declared it (SEP-1613); the model providers' wire formats drop it
/// ([`crate::wire::definition`]).
///
/// Tools with no arguments (`()` or an empty struct) get `{"type":"object","properties":{}}`,
/// which OpenAI requires.
pub fn normalize(schema: Value) -> Value {
    let mut map = match schema {
        Value::Object(map) => map,
        // `true` (any value) or anything unexpected: an open object.
        _ => Map::new(),
    };
    map.remove("title");
    // The root description is the input type's doc comment, written for Rust readers; the model
    // reads the tool's description instead.
    map.remove("description");
    if map.get("type").and_then(Value::as_str) == Some("null") {
        map.clear();
    }
    map.entry("type")
        .or_insert_with(|| Value::String("object".into()));
    map.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(map)
}

/// The names in the schema's top-level `required` array, whatever JSON shape it came in.
///
/// GoClaw's empty-arguments guard type-asserts `[]string` and silently skips schemas whose
/// `required` is `[]any`; here any array of strings counts.
pub fn required_fields(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The validator the pipeline checks a tool's arguments with; an error means the schema itself
/// is broken (checked when a tool is defined at run time, before it is stored). Schemas that use
/// no keyword newer than draft 7 are compiled as draft 7, which means the same for them:
/// compiling against the 2020-12 meta-schema costs about a third of a one-shot process.
pub fn validator(schema: &Value) -> Result<jsonschema::Validator, String> {
    let mut options = jsonschema::options();
    if !crate::registry::uses_newer_keywords(schema) {
        options = options.with_draft(jsonschema::Draft::Draft7);
    }
    options.build(schema).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        inner: Inner,
        list: Vec<Inner>,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        x: u32,
    }

    /// `json-schema-2020-12` (MCP conformance) found `$schema` stripped from declared schemas.
    #[test]
    fn a_declared_dialect_is_kept() {
        let declared = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"a": {"type": "string"}},
        });
        assert_eq!(normalize(declared.clone()), declared);
    }

    #[test]
    fn schemas_are_inlined_and_stripped() {
        let schema = schema_for::<Nested>();
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"), "{text}");
        assert!(schema.get("$schema").is_none());
        assert!(schema.get("title").is_none());
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"]["inner"]["properties"]["x"]["type"],
            "integer"
        );
    }

    #[test]
    fn unit_input_is_an_empty_object_schema() {
        let schema = schema_for::<()>();
        assert_eq!(schema, json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn required_fields_accepts_any_array_shape() {
        assert_eq!(
            required_fields(&json!({"required": ["a", "b"]})),
            vec!["a", "b"]
        );
        assert!(required_fields(&json!({"required": []})).is_empty());
        assert!(required_fields(&json!({})).is_empty());
    }
}
