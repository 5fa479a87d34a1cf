//! The shapes of JSON-RPC messages, parsed from one line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC error codes used by Talon.
pub mod codes {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a JSON-RPC message (or breaks the session's rules).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method is unknown.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The parameters do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The receiver failed while handling the request.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and a message saying what was wrong.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// One message, by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it wants an answer with the same `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification: no answer.
    Notification { method: String, params: Value },
    /// An answer to a request this side sent.
    Answer {
        id: Value,
        outcome: Result<Value, RpcError>,
    },
}

/// A line that is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Not JSON at all ([`codes::PARSE_ERROR`]).
    #[error("the message is not JSON: {0}")]
    Json(String),
    /// JSON, but not a JSON-RPC message ([`codes::INVALID_REQUEST`]).
    #[error("the message is not a JSON-RPC 2.0 request, notification or answer: {0}")]
    Invalid(String),
}

impl ParseError {
    /// The JSON-RPC error to answer it with (with `id: null`).
    pub fn to_rpc(&self) -> RpcError {
        let code = match self {
            Self::Json(_) => codes::PARSE_ERROR,
            Self::Invalid(_) => codes::INVALID_REQUEST,
        };
        RpcError::new(code, self.to_string())
    }
}

#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// Parses one line. A batch (a JSON array) is refused as invalid: MCP removed batching in its
/// 2025-06-18 revision and no client Talon serves sends them.
pub fn parse(line: &[u8]) -> Result<Message, ParseError> {
    // serde would read an array as a struct's fields in order: objects only, checked first.
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(match serde_json::from_slice::<Value>(line) {
            Err(e) => ParseError::Json(e.to_string()),
            Ok(Value::Array(_)) => {
                ParseError::Invalid("batches are not supported: send one message per line".into())
            }
            Ok(_) => ParseError::Invalid("a message is a JSON object".into()),
        });
    }
    let incoming: Incoming = serde_json::from_slice(line).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ParseError::Invalid(e.to_string()),
        _ => ParseError::Json(e.to_string()),
    })?;
    match (incoming.method, incoming.id) {
        (Some(method), Some(id)) => Ok(Message::Request {
            id,
            method,
            params: incoming.params.unwrap_or(Value::Null),
        }),
        (Some(method), None) => Ok(Message::Notification {
            method,
            params: incoming.params.unwrap_or(Value::Null),
        }),
        (None, Some(id)) => {
            let outcome = match (incoming.error, incoming.result) {
                (Some(error), _) => Err(error),
                (None, result) => Ok(result.unwrap_or(Value::Null)),
            };
            Ok(Message::Answer { id, outcome })
        }
        (None, None) => Err(ParseError::Invalid(
            "it has neither a method nor an id".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tells_requests_notifications_and_answers_apart() {
        let request = parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).expect("parses");
        assert_eq!(
            request,
            Message::Request {
                id: json!(7),
                method: "ping".into(),
                params: Value::Null
            }
        );
        let note = parse(br#"{"jsonrpc":"2.0","method":"n","params":{"a":1}}"#).expect("parses");
        assert_eq!(
            note,
            Message::Notification {
                method: "n".into(),
                params: json!({"a": 1})
            }
        );
        let ok = parse(br#"{"jsonrpc":"2.0","id":"x","result":{"b":2}}"#).expect("parses");
        assert_eq!(
            ok,
            Message::Answer {
                id: json!("x"),
                outcome: Ok(json!({"b": 2}))
            }
        );
        let failed = parse(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#)
            .expect("parses");
        assert_eq!(
            failed,
            Message::Answer {
                id: json!(1),
                outcome: Err(RpcError::new(-32601, "no"))
            }
        );
    }

    #[test]
    fn garbage_is_a_parse_error_and_odd_json_an_invalid_request() {
        let garbage = parse(b"{not json").expect_err("refused");
        assert_eq!(garbage.to_rpc().code, codes::PARSE_ERROR);
        let batch = parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).expect_err("refused");
        assert_eq!(batch.to_rpc().code, codes::INVALID_REQUEST);
        assert!(batch.to_string().contains("batches are not supported"));
        let number = parse(b"42").expect_err("refused");
        assert_eq!(number.to_rpc().code, codes::INVALID_REQUEST);
        let empty = parse(br#"{"jsonrpc":"2.0"}"#).expect_err("refused");
        assert_eq!(empty.to_rpc().code, codes::INVALID_REQUEST);
        assert!(empty.to_string().contains("neither a method nor an id"));
    }
}
