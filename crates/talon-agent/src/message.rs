//! The conversation in a provider-neutral form: each provider module translates it to and from
//! its own wire format, so the loop and the store never see provider JSON.

use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the person (or the calling agent) said.
    User { text: String },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The results of the previous assistant message's tool calls, one per call, in its order.
    ToolResults { results: Vec<ToolResult> },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's call id (`call_…`, `toolu_…`); every call gets exactly one result.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, possibly invalid (the pipeline says so).
    pub arguments: String,
}

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Images the tool returned (base64 data with their MIME type); providers that accept images
    /// in tool results get them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// An image in a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub mime_type: String,
    /// Base64 (standard alphabet, padded).
    pub data: String,
}
