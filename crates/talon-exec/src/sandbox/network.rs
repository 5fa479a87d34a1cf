//! The network of sandboxed commands: none, Talon's filtering proxy, or the host's.
//!
//! The operator picks one [`NetworkMode`]:
//!
//! * **off** (the default): the command's own network namespace holds only a loopback
//!   interface, and the seccomp filter refuses every socket, Unix ones included (a host Unix
//!   socket such as a D-Bus bus or `docker.sock` is reached by its path). Nothing leaves.
//! * **proxy**: the same empty namespace, but the command may open `AF_INET` sockets and reaches
//!   the outside only through a [`talon_net::Proxy`] running in Talon's process: the domain
//!   allow / deny lists first, then the address guard (no loopback, private or link-local
//!   address unless the operator allowed its range; cloud metadata never), dialling exactly the
//!   address it checked. Each command gets its own proxy on a fresh Unix socket in a private
//!   (0700) directory, bind-mounted into the sandbox at [`SOCKET_IN_SANDBOX`]; its refusals come
//!   back as a [`NetworkReport`] so the model learns why a connection failed. Inside, Talon's own
//!   binary runs first as `talon __sandbox-net` ([`super::helper_main`]): it listens on
//!   [`BRIDGE_ADDR`] in the sandbox's namespace, relays to the socket, and starts the command
//!   with `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` (and the lower-case spellings) pointing at
//!   itself. A program that ignores those variables reaches nothing at all.
//! * **host**: `--share-net`, the host's network, unfiltered: only for an operator who chose it.
//!
//! The helper is bind-mounted read-only at [`HELPER_IN_SANDBOX`], so it runs even when the
//! binary lives in a directory the sandbox hides (Talon's data directory) or under `/tmp` (which
//! the sandbox replaces). It needs the host's shared libraries, which the read-only `/` provides.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;

use talon_net::{AddressPolicy, DomainPolicy, Guard, Pattern, SystemResolver};

pub(crate) use super::net_session::plan;
pub use super::net_session::{NetworkReport, ProxySession};

/// The hidden `talon` subcommand that runs inside the sandbox in proxy mode.
pub const HELPER_SUBCOMMAND: &str = "__sandbox-net";
/// Where the helper binary is mounted inside the sandbox.
pub const HELPER_IN_SANDBOX: &str = "/tmp/.talon-net/talon";
/// Where the proxy's Unix socket is mounted inside the sandbox.
pub const SOCKET_IN_SANDBOX: &str = "/tmp/.talon-net/proxy.sock";
/// Where the in-sandbox bridge listens (the sandbox's own loopback, not the host's).
pub const BRIDGE_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 3128));

/// What sandboxed commands may reach over the network (the operator's `[exec] network`).
#[derive(Debug, Clone, Default)]
pub enum NetworkMode {
    /// No network at all (the default).
    #[default]
    Off,
    /// Only through Talon's proxy, filtered by the policy.
    Proxy(Arc<NetworkPolicy>),
    /// The host's network, unfiltered. An operator's explicit choice; nothing checks what
    /// commands connect to.
    Host,
}

impl NetworkMode {
    /// `off`, `proxy` or `host`, as configured.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Proxy(_) => "proxy",
            Self::Host => "host",
        }
    }

    /// The network of a sandbox that several commands share (a session's): every mode but
    /// proxy, whose proxy and refusals belong to one command. `None`: give each command its own.
    pub fn shared(&self) -> Option<Network> {
        match self {
            Self::Off => Some(Network::None),
            Self::Host => Some(Network::Host),
            Self::Proxy(_) => None,
        }
    }

    /// Whether commands have no network at all.
    pub fn is_off(&self) -> bool {
        matches!(self, Self::Off)
    }

    /// What a sandboxed command can reach, in words for the model ("no network", …).
    pub fn reach(&self) -> String {
        match self {
            Self::Off => "no network".into(),
            Self::Proxy(policy) => format!(
                "the network only through Talon's proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are set), \
                 and only {}",
                policy.reach()
            ),
            Self::Host => "the host's network, unfiltered".into(),
        }
    }
}

/// The lists an operator configures for proxy mode, as written.
#[derive(Debug, Clone, Default)]
pub struct NetworkLists {
    /// Domain patterns commands may reach (`example.com`, `*.example.com`, `.example.com`, an IP
    /// literal); `["*"]` alone means every public host.
    pub allowed_domains: Vec<String>,
    /// Domain patterns refused even when allowed.
    pub denied_domains: Vec<String>,
    /// Non-public ranges made reachable (an intranet `10.1.0.0/16`, `127.0.0.1/32` in tests).
    /// Metadata addresses stay unreachable whatever is listed.
    pub allowed_cidrs: Vec<String>,
}

/// A configuration mistake in [`NetworkLists`]; `key` names the list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct NetworkPolicyError {
    /// `allowed_domains`, `denied_domains`, `allowed_cidrs` or `network`.
    pub key: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl NetworkPolicyError {
    fn new(key: &'static str, message: impl Into<String>) -> Self {
        Self {
            key,
            message: message.into(),
        }
    }
}

/// The proxy's policy: which destinations commands may reach.
#[derive(Debug)]
pub struct NetworkPolicy {
    guard: Arc<Guard>,
}

impl NetworkPolicy {
    /// A policy enforced by `guard` (tests use a static resolver).
    pub fn new(guard: Guard) -> Self {
        Self {
            guard: Arc::new(guard),
        }
    }

    /// The policy the operator's lists describe, resolving names with the system resolver.
    ///
    /// An empty allow list is an error rather than a proxy that reaches nothing: the operator
    /// asked for a network and would get none without noticing. This host's own addresses are
    /// refused (a service bound to `0.0.0.0` must not be reachable through the host's public
    /// address) unless an allowed range covers them.
    pub fn from_lists(lists: &NetworkLists) -> Result<Self, NetworkPolicyError> {
        let allowed = &lists.allowed_domains;
        let allow = if allowed.iter().any(|d| d.trim() == "*") {
            if allowed.len() > 1 {
                return Err(NetworkPolicyError::new(
                    "allowed_domains",
                    "\"*\" allows every public host and must be the only entry",
                ));
            }
            None
        } else if allowed.is_empty() {
            return Err(NetworkPolicyError::new(
                "allowed_domains",
                "network = \"proxy\" with no allowed domains reaches nothing: list the domains commands \
                 may reach (for example [\"crates.io\", \".github.com\"]), use [\"*\"] for every public \
                 host, or set network = \"off\"",
            ));
        } else {
            Some(
                Pattern::parse_list(allowed)
                    .map_err(|e| NetworkPolicyError::new("allowed_domains", e.to_string()))?,
            )
        };
        let deny = Pattern::parse_list(&lists.denied_domains)
            .map_err(|e| NetworkPolicyError::new("denied_domains", e.to_string()))?;
        let mut addresses = AddressPolicy::allowing(&lists.allowed_cidrs)
            .map_err(|e| NetworkPolicyError::new("allowed_cidrs", e.to_string()))?
            .deny_host_addresses()
            .map_err(|e| {
                NetworkPolicyError::new(
                    "network",
                    format!("cannot list this host's addresses to keep them unreachable: {e}"),
                )
            })?;
        let allowed_ranges = addresses.allow.clone();
        addresses
            .deny
            .retain(|net| !allowed_ranges.iter().any(|a| a.contains(&net.addr())));
        let domains = DomainPolicy { allow, deny };
        Ok(Self::new(Guard::new(
            domains,
            addresses,
            Arc::new(SystemResolver),
        )))
    }

    /// The guard every destination goes through.
    pub fn guard(&self) -> &Arc<Guard> {
        &self.guard
    }

    /// The reachable destinations in words: "these domains: a, b" or "public hosts".
    pub fn reach(&self) -> String {
        let join = |list: &[Pattern]| {
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let domains = &self.guard.domains;
        let mut text = match &domains.allow {
            Some(list) => format!("these domains: {}", join(list)),
            None => "public hosts".to_string(),
        };
        if domains.allow.is_none() && !domains.deny.is_empty() {
            let _ = write!(text, " except {}", join(&domains.deny));
        }
        text
    }
}

/// The network one sandboxed command gets, as the sandbox sets it up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    /// An empty network namespace, no `AF_INET` sockets.
    #[default]
    None,
    /// An empty network namespace with the proxy's socket at `socket` (host path) mounted at
    /// [`SOCKET_IN_SANDBOX`], and the command started by `helper` (Talon's binary).
    Proxy { socket: PathBuf, helper: PathBuf },
    /// The host's network namespace.
    Host,
}

impl Network {
    /// Whether the seccomp filter allows `AF_INET`/`AF_INET6` sockets: in proxy mode they only
    /// reach the sandbox's own loopback, where the bridge listens.
    pub fn allows_inet(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// The bubblewrap arguments that mount the helper and the socket. They come last, after the
    /// private `/tmp` and the hidden paths, so nothing covers them.
    pub(crate) fn mounts(&self) -> Vec<OsString> {
        match self {
            Self::Proxy { socket, helper } => vec![
                "--ro-bind".into(),
                helper.into(),
                HELPER_IN_SANDBOX.into(),
                "--bind".into(),
                socket.into(),
                SOCKET_IN_SANDBOX.into(),
            ],
            Self::None | Self::Host => Vec::new(),
        }
    }

    /// The command line run inside the sandbox: `argv` itself, or behind the helper.
    pub(crate) fn command(&self, argv: &[OsString]) -> Vec<OsString> {
        match self {
            Self::Proxy { .. } => {
                let mut wrapped: Vec<OsString> = vec![
                    HELPER_IN_SANDBOX.into(),
                    HELPER_SUBCOMMAND.into(),
                    "--listen".into(),
                    BRIDGE_ADDR.to_string().into(),
                    "--socket".into(),
                    SOCKET_IN_SANDBOX.into(),
                    "--".into(),
                ];
                wrapped.extend(argv.iter().cloned());
                wrapped
            }
            Self::None | Self::Host => argv.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_validated_naming_the_key() {
        let lists = |allowed: &[&str], denied: &[&str], cidrs: &[&str]| NetworkLists {
            allowed_domains: allowed.iter().map(ToString::to_string).collect(),
            denied_domains: denied.iter().map(ToString::to_string).collect(),
            allowed_cidrs: cidrs.iter().map(ToString::to_string).collect(),
        };
        let err = |l: NetworkLists| NetworkPolicy::from_lists(&l).expect_err("invalid");
        assert_eq!(err(lists(&[], &[], &[])).key, "allowed_domains");
        assert_eq!(err(lists(&["a b"], &[], &[])).key, "allowed_domains");
        assert_eq!(
            err(lists(&["*", "x.test"], &[], &[])).key,
            "allowed_domains"
        );
        assert_eq!(err(lists(&["x.test"], &["*.*"], &[])).key, "denied_domains");
        assert_eq!(
            err(lists(&["x.test"], &[], &["10.0.0.0/33"])).key,
            "allowed_cidrs"
        );
        let ok = NetworkPolicy::from_lists(&lists(&["x.test", ".y.test"], &[], &["127.0.0.1/32"]))
            .expect("valid");
        assert_eq!(ok.reach(), "these domains: x.test, .y.test");
        assert!(
            ok.guard()
                .addresses
                .allows("127.0.0.1".parse().expect("ip"))
        );
        let all = NetworkPolicy::from_lists(&lists(&["*"], &["evil.test"], &[])).expect("valid");
        assert_eq!(all.reach(), "public hosts except evil.test");
    }

    #[test]
    fn the_proxy_plan_mounts_the_socket_and_runs_the_helper() {
        let network = Network::Proxy {
            socket: "/run/x/proxy.sock".into(),
            helper: "/opt/talon/bin/talon".into(),
        };
        assert!(network.allows_inet());
        let mounts: Vec<String> = network
            .mounts()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            mounts,
            [
                "--ro-bind",
                "/opt/talon/bin/talon",
                HELPER_IN_SANDBOX,
                "--bind",
                "/run/x/proxy.sock",
                SOCKET_IN_SANDBOX
            ]
        );
        let argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), "curl x".into()];
        let command: Vec<String> = network
            .command(&argv)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            command,
            [
                HELPER_IN_SANDBOX,
                HELPER_SUBCOMMAND,
                "--listen",
                "127.0.0.1:3128",
                "--socket",
                SOCKET_IN_SANDBOX,
                "--",
                "/bin/sh",
                "-c",
                "curl x"
            ]
        );
        assert!(Network::None.mounts().is_empty());
        assert_eq!(Network::Host.command(&argv), argv);
        assert!(!Network::None.allows_inet());
    }
}
