//! The wire between Talon and the init inside a session sandbox: one JSON header per line, and
//! for output frames exactly `len` raw bytes after the header line.

use std::io::{BufRead, Read, Write};

use serde::{Deserialize, Serialize};

use crate::run::Limits;

/// Talon → init.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Start `argv` in `cwd` with exactly `env`, in its own process group, under `limits`.
    Run {
        id: u64,
        argv: Vec<String>,
        cwd: String,
        env: Vec<(String, String)>,
        limits: Limits,
    },
    /// Send `signal` to command `id`'s process group.
    Signal { id: u64, signal: i32 },
}

/// Init → Talon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Reply {
    /// `len` bytes of stream 1 (stdout) or 2 (stderr) follow the header line.
    Output { id: u64, stream: u8, len: usize },
    /// The command ended (its group is gone); `code` for an exit, `signal` for a kill.
    Ended {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The command could not be started.
    Failed { id: u64, message: String },
}

/// Largest output frame.
pub const MAX_FRAME: usize = 64 * 1024;

/// Writes `reply` (and `payload` for output frames) as one frame.
pub fn write_reply(out: &mut impl Write, reply: &Reply, payload: &[u8]) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    line.extend_from_slice(payload);
    out.write_all(&line)?;
    out.flush()
}

/// Reads one header line; `None` at end of input.
pub fn read_line<T: for<'de> Deserialize<'de>>(
    input: &mut impl BufRead,
) -> std::io::Result<Option<T>> {
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(line.trim_end())
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads an output frame's payload.
pub fn read_payload(input: &mut impl Read, len: usize) -> std::io::Result<Vec<u8>> {
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is larger than {MAX_FRAME}"),
        ));
    }
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload)?;
    Ok(payload)
}
