//! Outbound network access for Talon's tools, decided in one place.
//!
//! Two kinds of tools open connections on the model's behalf: sandboxed shell commands (whose
//! traffic leaves their network namespace only through Talon's proxy) and, later, the web tools
//! (`web_fetch`). Both face the same attacks — a name that resolves to the cloud metadata
//! service, a rebinding DNS answer that is public when checked and internal when dialled, an
//! address spelled `2130706433` or `::ffff:127.0.0.1` — so both use the same [`Guard`]:
//!
//! * [`addr`] — classifies every IP address ([`classify`]) and applies the operator's
//!   [`AddressPolicy`] (public only by default, plus allowed CIDRs; metadata never).
//! * [`hosts`] — parses and normalises host names ([`Host`]) and applies the domain allow / deny
//!   lists ([`DomainPolicy`]).
//! * [`guard`] — resolves a name once, refuses it if any answer is forbidden, and dials exactly the
//!   checked addresses ([`Guard::connect`]); refusals explain themselves to the model
//!   ([`Refusal`]).
//! * [`proxy`] — the HTTP CONNECT / absolute-form + SOCKS5 proxy on a Unix socket that the
//!   sandbox bind-mounts ([`Proxy`], [`UnixProxy`]), recording [`Violations`] to report after a
//!   command.
//! * [`bridge`] — the relay that runs inside the sandbox: TCP on loopback to the Unix socket.
//!
//! ```
//! use std::sync::Arc;
//! use talon_net::{AddressPolicy, DomainPolicy, Guard, Pattern, StaticResolver};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let resolver = StaticResolver::new()
//!     .with("docs.rs", ["151.101.1.91".parse()?])
//!     .with("metadata.google.internal", ["169.254.169.254".parse()?]);
//! let guard = Guard::new(
//!     DomainPolicy::allow_only(Pattern::parse_list(["docs.rs", ".google.internal"])?),
//!     AddressPolicy::public_only(),
//!     Arc::new(resolver),
//! );
//! // The addresses to dial: exactly these, never a second resolution.
//! assert_eq!(guard.resolve_checked("docs.rs", 443).await?, ["151.101.1.91:443".parse()?]);
//! let refusal = guard.resolve_checked("metadata.google.internal", 80).await.unwrap_err();
//! assert_eq!(
//!     refusal.to_string(),
//!     "connection to metadata.google.internal:80 refused: 169.254.169.254 is a cloud metadata \
//!      address, never reachable from tools"
//! );
//! # Ok(())
//! # }
//! ```
//!
//! # Charter
//!
//! - **Owns:** the address guard: resolving once and dialing what it checked, the egress proxy and
//!   bridge for sandboxes, Talon's own listeners.
//! - **Never contains:** HTTP clients of tools, or any decision made after the dial.
//! - **A new feature goes:** a new outbound client (a browser's proxy, a media download) dials
//!   through the guard or the proxy.

pub mod addr;
pub mod bridge;
pub mod guard;
pub mod hosts;
pub mod own;
pub mod proxy;
pub mod sse;
pub mod url;

pub use addr::{AddrClass, AddrRefusal, AddressPolicy, CidrError, IpNet, classify, parse_cidr};
pub use bridge::{Bridge, bridge, proxy_env};
pub use guard::{
    ConnectError, Guard, Reason, Refusal, Resolve, ResolveFuture, StaticResolver, SystemResolver,
};
pub use hosts::{DomainPolicy, DomainRefusal, Host, HostError, Pattern, PatternError};
pub use proxy::{Proxy, ProxyConfig, UnixProxy, Violation, Violations};
pub use url::{UrlParts, url_parts};
