//! How much one session may make this side hold, in one place, with the reason for each value.
//!
//! The other side of a session is not trusted to behave: a bridged MCP server is someone else's
//! program. Whatever it sends, the memory Talon spends on the session stays within these bounds;
//! what does not fit is refused with an error that says why (issue 22, item 9).

/// The longest message accepted (a tool's answer may be large; a line without end is not).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Messages accepted for writing to the other side and not yet written (the one being written
/// included).
///
/// A side that reads its input keeps this near zero: a message waits only while the one before
/// it is written. It grows only when the other side stops reading while this side still has
/// things to tell it (answers to a flood of its requests, cancellations of calls that timed
/// out). 256 is more than any honest session has in flight at once; beyond it, a message is
/// refused at once ([`crate::RequestError::Backlog`]) instead of held, so a peer that floods
/// requests without reading the answers cannot make Talon queue them without end.
pub const MAX_UNWRITTEN_MESSAGES: usize = 256;

/// The bytes of those messages: 16 MiB.
///
/// Enough for many ordinary messages (a few hundred bytes to a few KiB each) and several large
/// tool arguments or answers at once. A single message larger than this is still accepted when
/// nothing else waits, so the bound on what one session holds unwritten is the larger of this
/// and the one message being written (itself limited by what this side chose to send).
pub const MAX_UNWRITTEN_BYTES: usize = 16 * 1024 * 1024;
