//! Newline-delimited JSON-RPC 2.0 over a byte stream, as MCP's stdio transport speaks it.
//!
//! Talon is both an MCP client of servers it runs as child processes (talon-bridge) and an MCP
//! server on its own stdin and stdout (`talon mcp`, talon-mcp). Both sides frame messages the
//! same way and both send requests whose answers arrive out of order on the reader, so the
//! framing ([`LineReader`]), the message shapes ([`Message`]) and the bookkeeping of requests in
//! flight ([`Peer`]) live here once. What each side does with a request is its own business.
//!
//! Why not rmcp's transport: a bridged tool call crosses this code four times (client and server
//! side, each way), and rmcp hands every message through a service task and parses it into typed
//! structures that Talon turns back into JSON at once. Here a message is parsed once into
//! [`serde_json::Value`] parts, and the task that wants to write writes.
//!
//! # Charter
//!
//! - **Owns:** JSON-RPC 2.0 framing over stdio and streams, bounded.
//! - **Never contains:** MCP semantics.
//! - **A new feature goes:** a new JSON-RPC transport.

pub mod limits;
mod lines;
mod message;
mod outbox;
mod peer;

pub use limits::MAX_MESSAGE_BYTES;
pub use lines::{LineReader, ReadError};
pub use message::{Message, ParseError, RpcError, codes, parse};
pub use peer::{Answer, Backlog, Peer, RequestError, Ticket};
