//! The names bridged tools are offered under.
//!
//! GoClaw calls a server's tool `mcp_<server>__<tool>` (the `mcp_<server>` part replaceable by a
//! configured prefix); Claude Code calls it `mcp__<server>__<tool>`. Providers accept only
//! `[A-Za-z0-9_-]` in tool names and at most 64 bytes, so other characters become `_` and a name
//! that is too long, or that collides with one already given, is cut and gets `_` plus 12 hex
//! digits of a stable hash of the raw server and tool names. The raw names are what the protocol
//! call uses.
//!
//! A bridged name must always mean the same server, whichever server connects first: a server
//! named `a__b` must never be able to take `mcp__a__b__c`, the name of server `a`'s tool `b__c`,
//! and receive the arguments meant for `a`. So the part of a name before the tool (the *head*,
//! `mcp__<server>` or `mcp_<server>`) is never cut, and server names are words of letters and
//! digits joined by single `-` or `_` ([`check_server_name`]): a head then holds no `__` and does
//! not end in `_`, so the first `__` after it ends it and no two servers' names can meet. Heads
//! that still coincide (GoClaw writes `my-server` and `my_server` alike, and a configured prefix
//! may repeat a server's name) are refused by the bridge for the second server.

/// Which naming scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `mcp_<server>__<tool>`, or `<prefix>__<tool>` with a configured prefix.
    GoClaw,
    /// `mcp__<server>__<tool>`.
    ClaudeCode,
}

/// The longest name providers accept.
pub const MAX_NAME: usize = 64;

/// The longest server name (and GoClaw prefix): its head, `__`, one character of the tool's
/// name and the hash suffix always fit in [`MAX_NAME`], so the head is never cut.
pub const MAX_SERVER_NAME: usize = 40;

/// Why `name` cannot name a bridged server (or a GoClaw prefix), in words the operator can act
/// on; `Ok` when it can.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let separator = |b: u8| b == b'_' || b == b'-';
    let bytes = name.as_bytes();
    let problem = if name.is_empty() || name.len() > MAX_SERVER_NAME {
        Some(format!("use 1-{MAX_SERVER_NAME} characters"))
    } else if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || separator(*b))
    {
        Some("use only letters, digits, - and _".to_string())
    } else if bytes.first().is_some_and(|b| separator(*b))
        || bytes.last().is_some_and(|b| separator(*b))
    {
        Some("start and end it with a letter or digit".to_string())
    } else if bytes.windows(2).any(|w| separator(w[0]) && separator(w[1])) {
        Some(
            "do not put two of - and _ in a row (`__` separates the server from the tool in \
             bridged tool names, so `a__b` would take the names of server `a`'s tools)"
                .to_string(),
        )
    } else {
        None
    };
    match problem {
        Some(fix) => Err(format!("the name {name:?} cannot be used: {fix}")),
        None => Ok(()),
    }
}

/// Why `prefix` cannot be a GoClaw tool prefix: what follows an optional `mcp_` follows the
/// server-name rule.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    check_server_name(prefix.strip_prefix("mcp_").unwrap_or(prefix))
        .map_err(|e| format!("tool prefix {prefix:?}: {e}"))
}

/// The part of every bridged name of `server` before `__<tool>`.
pub fn head(dialect: Dialect, server: &str, prefix: Option<&str>) -> String {
    match (dialect, prefix) {
        // GoClaw: a custom prefix gets `mcp_` unless it has it; `-` in a server name becomes `_`.
        (Dialect::GoClaw, Some(p)) if p.starts_with("mcp_") => sanitize(p),
        (Dialect::GoClaw, Some(p)) => format!("mcp_{}", sanitize(p)),
        (Dialect::GoClaw, None) => format!("mcp_{}", sanitize(server).replace('-', "_")),
        (Dialect::ClaudeCode, _) => format!("mcp__{}", sanitize(server)),
    }
}

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 64-bit FNV-1a of `server`, a NUL, and `tool`: stable across runs and builds.
fn stable_hash(server: &str, tool: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0u8]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The name of `tool` on `server` in `dialect` (`prefix` replaces GoClaw's `mcp_<server>`);
/// `taken` says whether a name is already used, which forces the hash suffix. Only the tool's
/// part is ever cut, so the name keeps its server's head whole.
pub fn bridged_name(
    dialect: Dialect,
    server: &str,
    prefix: Option<&str>,
    tool: &str,
    taken: impl Fn(&str) -> bool,
) -> String {
    let head = format!("{}__", head(dialect, server, prefix));
    let name = format!("{head}{}", sanitize(tool));
    if name.len() <= MAX_NAME && !taken(&name) {
        return name;
    }
    let suffix = format!("_{:012x}", stable_hash(server, tool) & 0xffff_ffff_ffff);
    let mut cut = name;
    // Every byte is ASCII after `sanitize`, so any length is a character boundary.
    cut.truncate(MAX_NAME.saturating_sub(suffix.len()).max(head.len()));
    cut + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_prefixes_and_characters() {
        let none = |_: &str| false;
        assert_eq!(
            bridged_name(Dialect::GoClaw, "everything", None, "echo", none),
            "mcp_everything__echo"
        );
        assert_eq!(
            bridged_name(Dialect::ClaudeCode, "everything", None, "echo", none),
            "mcp__everything__echo"
        );
        assert_eq!(
            bridged_name(Dialect::GoClaw, "gh", Some("github"), "create issue", none),
            "mcp_github__create_issue"
        );
        assert_eq!(
            bridged_name(Dialect::GoClaw, "gh", Some("mcp_gh2"), "x", none),
            "mcp_gh2__x"
        );
        assert_eq!(
            bridged_name(Dialect::GoClaw, "my-server", None, "search", none),
            "mcp_my_server__search"
        );
        assert_eq!(
            bridged_name(Dialect::ClaudeCode, "my.server", None, "a/b:c", none),
            "mcp__my_server__a_b_c"
        );
    }

    #[test]
    fn long_or_colliding_names_get_a_stable_hash() {
        let long = "x".repeat(100);
        let a = bridged_name(Dialect::ClaudeCode, "srv", None, &long, |_| false);
        assert_eq!(a.len(), MAX_NAME);
        assert_eq!(
            a,
            bridged_name(Dialect::ClaudeCode, "srv", None, &long, |_| false)
        );
        // "a.b" and "a_b" sanitise alike; the second one gets a suffix from its raw name.
        let first = bridged_name(Dialect::ClaudeCode, "srv", None, "a.b", |_| false);
        let second = bridged_name(Dialect::ClaudeCode, "srv", None, "a_b", |n| n == first);
        assert_ne!(first, second);
        assert!(
            second.starts_with("mcp__srv__a_b_") && second.len() == "mcp__srv__a_b_".len() + 12
        );
    }

    #[test]
    fn a_cut_name_keeps_its_servers_head_whole() {
        let server = "s".repeat(MAX_SERVER_NAME);
        for dialect in [Dialect::ClaudeCode, Dialect::GoClaw] {
            let name = bridged_name(dialect, &server, None, &"t".repeat(100), |_| false);
            assert!(name.len() <= MAX_NAME, "{name}");
            assert!(
                name.starts_with(&format!("{}__t", head(dialect, &server, None))),
                "{name}"
            );
        }
    }
}
