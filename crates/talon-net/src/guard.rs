//! The guard: name checks, one resolution, address checks, and a dial of exactly the checked
//! addresses.
//!
//! DNS rebinding works against any check that resolves a name, approves the answer, and then lets
//! something else resolve the name again to connect. [`Guard::connect`] resolves once, checks
//! every address of the answer, and dials those very addresses; nothing re-resolves.
//!
//! If *any* address of the answer is forbidden the whole destination is refused, rather than
//! quietly keeping the allowed ones: an answer that mixes public and internal addresses is the
//! signature of a rebinding attempt, and dialling only its "good" half would hide the attempt
//! from the operator and the model.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::addr::{AddrRefusal, AddressPolicy};
use crate::hosts::{DomainPolicy, DomainRefusal, Host, HostError};

/// The future returned by [`Resolve::resolve`].
pub type ResolveFuture<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// A name resolver. The guard calls it once per destination and dials what it returned.
pub trait Resolve: Send + Sync {
    /// Resolves a normalised domain name (lower-case ASCII, no trailing dot) to addresses.
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a>;
}

/// The operating system's resolver (`getaddrinfo` through [`tokio::net::lookup_host`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((name, 0u16)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A fixed name → addresses map, for tests and for pinning names in configuration.
/// Unknown names fail with [`io::ErrorKind::NotFound`].
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    map: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a name, builder style.
    pub fn with<I: IntoIterator<Item = IpAddr>>(mut self, name: &str, ips: I) -> Self {
        self.insert(name, ips);
        self
    }

    /// Adds (or replaces) a name. Case and a trailing dot are ignored.
    pub fn insert<I: IntoIterator<Item = IpAddr>>(&mut self, name: &str, ips: I) {
        let key = name.to_ascii_lowercase();
        let key = key.strip_suffix('.').unwrap_or(&key).to_string();
        self.map.insert(key, ips.into_iter().collect());
    }
}

impl Resolve for StaticResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> ResolveFuture<'a> {
        let answer =
            self.map.get(name).cloned().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("unknown host {name}"))
            });
        Box::pin(async move { answer })
    }
}

/// Why a destination was refused (or could not be resolved).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// The host is not a valid name or address.
    #[error("invalid host: {0}")]
    InvalidHost(HostError),
    /// Port 0.
    #[error("port 0 is not a valid destination")]
    InvalidPort,
    /// The domain lists refused the host.
    #[error("{0}")]
    Domain(DomainRefusal),
    /// The address policy refused one of the host's addresses.
    #[error("{addr} is {why}")]
    Address {
        /// The forbidden address.
        addr: IpAddr,
        /// Why it is forbidden.
        why: AddrRefusal,
    },
    /// The resolver failed.
    #[error("the name could not be resolved ({0})")]
    Unresolvable(String),
    /// The resolver returned nothing.
    #[error("the name resolved to no addresses")]
    NoAddresses,
    /// The resolver did not answer in time.
    #[error("name resolution timed out after {0:?}")]
    ResolveTimeout(Duration),
    /// The destination is one of Talon's own listeners (see [`crate::own`]).
    #[error("{0} is Talon's own gateway, which tools never reach")]
    OwnListener(SocketAddr),
}

impl Reason {
    /// Whether this is a policy decision (as opposed to a name that does not resolve).
    /// Policy refusals are what [`crate::proxy::Violations`] records.
    pub fn is_policy(&self) -> bool {
        matches!(
            self,
            Reason::InvalidHost(_)
                | Reason::InvalidPort
                | Reason::Domain(_)
                | Reason::Address { .. }
                | Reason::OwnListener(_)
        )
    }
}

/// A destination the guard would not connect to, with a model-facing explanation, e.g.
/// "connection to meta.test:80 refused: 169.254.169.254 is a cloud metadata address, never
/// reachable from tools".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("connection to {target} refused: {reason}")]
pub struct Refusal {
    /// The host as asked for (normalised when it parsed; escaped and shortened when not).
    pub host: String,
    /// The port as asked for.
    pub port: u16,
    /// `host:port`, IPv6 in brackets.
    pub target: String,
    /// Why.
    pub reason: Reason,
}

impl Refusal {
    fn new(host: &Host, port: u16, reason: Reason) -> Self {
        Self {
            host: host.to_string(),
            port,
            target: host.with_port(port),
            reason,
        }
    }

    fn invalid(raw: &str, port: u16, reason: Reason) -> Self {
        let host = sanitize(raw);
        let target = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Self {
            host,
            port,
            target,
            reason,
        }
    }

    /// Whether this is a policy decision rather than a resolution failure.
    pub fn is_policy(&self) -> bool {
        self.reason.is_policy()
    }
}

/// Escapes control and non-ASCII characters and bounds the length, so a hostile host name
/// cannot inject lines into what the model or the log sees.
pub(crate) fn sanitize(raw: &str) -> String {
    const MAX: usize = 256;
    let mut out = String::new();
    for c in raw.chars() {
        if out.len() >= MAX {
            out.push('…');
            break;
        }
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}

/// A failure of [`Guard::connect`].
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The guard refused the destination (or could not resolve it).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Every checked address failed to connect; `source` is the last error.
    #[error("could not connect to {target} ({}): {source}", join(.addrs))]
    Io {
        /// `host:port`.
        target: String,
        /// The addresses tried.
        addrs: Vec<SocketAddr>,
        /// The last connection error.
        #[source]
        source: io::Error,
    },
    /// Connecting took longer than the guard's connect timeout, for every address.
    #[error("connecting to {target} ({}) timed out after {timeout:?}", join(.addrs))]
    Timeout {
        /// `host:port`.
        target: String,
        /// The addresses tried.
        addrs: Vec<SocketAddr>,
        /// The per-address timeout.
        timeout: Duration,
    },
}

fn join(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Default time allowed for one name resolution.
pub const DEFAULT_RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time allowed for one TCP connection attempt.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Decides whether a destination may be reached and connects to it, pinned to the checked
/// addresses. Shared by the sandbox's network proxy and the web tools.
#[derive(Clone)]
pub struct Guard {
    /// Domain allow / deny lists.
    pub domains: DomainPolicy,
    /// Which addresses may be dialled.
    pub addresses: AddressPolicy,
    /// Host names whose answers may be non-public (an intranet wiki the operator named): their
    /// addresses are dialled whatever their class, except cloud metadata addresses, which stay
    /// refused. Only names match here; an IP-literal host is judged by `addresses` alone.
    pub private_hosts: Vec<crate::hosts::Pattern>,
    /// The resolver, called once per destination.
    pub resolver: Arc<dyn Resolve>,
    /// Time allowed for one resolution.
    pub resolve_timeout: Duration,
    /// Time allowed for each connection attempt.
    pub connect_timeout: Duration,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("domains", &self.domains)
            .field("addresses", &self.addresses)
            .field("resolve_timeout", &self.resolve_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// A guard with the default timeouts.
    pub fn new(
        domains: DomainPolicy,
        addresses: AddressPolicy,
        resolver: Arc<dyn Resolve>,
    ) -> Self {
        Self {
            domains,
            addresses,
            private_hosts: Vec::new(),
            resolver,
            resolve_timeout: DEFAULT_RESOLVE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// The checks that need no resolution: the host parses, the port is not 0, the domain lists
    /// allow it, and an IP-literal host is an allowed address.
    pub fn check_host(&self, host: &str, port: u16) -> Result<Host, Refusal> {
        let parsed =
            Host::parse(host).map_err(|e| Refusal::invalid(host, port, Reason::InvalidHost(e)))?;
        if port == 0 {
            return Err(Refusal::new(&parsed, port, Reason::InvalidPort));
        }
        self.domains
            .check(&parsed)
            .map_err(|e| Refusal::new(&parsed, port, Reason::Domain(e)))?;
        if let Host::Ip(ip) = parsed {
            self.check_addr(&parsed, port, ip)?;
        }
        Ok(parsed)
    }

    fn check_addr(&self, host: &Host, port: u16, ip: IpAddr) -> Result<(), Refusal> {
        check_own(host, port, ip)?;
        self.addresses
            .check(ip)
            .map_err(|why| Refusal::new(host, port, Reason::Address { addr: ip, why }))
    }

    /// Checks the host, resolves it once, refuses it if any resolved address is forbidden, and
    /// returns the addresses to dial (IPv4-mapped IPv6 answers are given as plain IPv4).
    pub async fn resolve_checked(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        let parsed = self.check_host(host, port)?;
        let ips = match &parsed {
            Host::Ip(ip) => vec![*ip],
            Host::Domain(name) => {
                let answer =
                    tokio::time::timeout(self.resolve_timeout, self.resolver.resolve(name)).await;
                match answer {
                    Err(_) => {
                        return Err(Refusal::new(
                            &parsed,
                            port,
                            Reason::ResolveTimeout(self.resolve_timeout),
                        ));
                    }
                    Ok(Err(e)) => {
                        return Err(Refusal::new(
                            &parsed,
                            port,
                            Reason::Unresolvable(e.to_string()),
                        ));
                    }
                    Ok(Ok(ips)) => ips,
                }
            }
        };
        if ips.is_empty() {
            return Err(Refusal::new(&parsed, port, Reason::NoAddresses));
        }
        let named_private = matches!(parsed, Host::Domain(_))
            && self.private_hosts.iter().any(|p| p.matches(&parsed));
        for ip in &ips {
            if named_private && crate::addr::classify(*ip) != crate::addr::AddrClass::Metadata {
                check_own(&parsed, port, *ip)?;
                continue;
            }
            self.check_addr(&parsed, port, *ip)?;
        }
        let mut out: Vec<SocketAddr> = Vec::with_capacity(ips.len());
        for ip in ips {
            let sa = SocketAddr::new(ip.to_canonical(), port);
            if !out.contains(&sa) {
                out.push(sa);
            }
        }
        Ok(out)
    }

    /// [`Guard::resolve_checked`], then [`Guard::dial`] of exactly those addresses.
    pub async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, ConnectError> {
        let addrs = self.resolve_checked(host, port).await?;
        let target = match Host::parse(host) {
            Ok(h) => h.with_port(port),
            Err(_) => sanitize(host),
        };
        self.dial(&target, &addrs).await
    }

    /// Connects to the first of `addrs` that answers, each attempt bounded by the connect
    /// timeout. `addrs` must come from [`Guard::resolve_checked`]; nothing is resolved here.
    /// `target` (`host:port`) is used only in error messages.
    pub async fn dial(
        &self,
        target: &str,
        addrs: &[SocketAddr],
    ) -> Result<TcpStream, ConnectError> {
        let mut last: Option<io::Error> = None;
        for addr in addrs {
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    // Latency matters more than throughput for interactive tools.
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {}
            }
        }
        match last {
            Some(source) => Err(ConnectError::Io {
                target: target.to_string(),
                addrs: addrs.to_vec(),
                source,
            }),
            None => Err(ConnectError::Timeout {
                target: target.to_string(),
                addrs: addrs.to_vec(),
                timeout: self.connect_timeout,
            }),
        }
    }
}

/// Refuses Talon's own listeners, whatever the address rules say.
fn check_own(host: &Host, port: u16, ip: IpAddr) -> Result<(), Refusal> {
    if crate::own::is_own_listener(ip, port) {
        return Err(Refusal::new(
            host,
            port,
            Reason::OwnListener(SocketAddr::new(ip, port)),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::AddrClass;
    use crate::hosts::Pattern;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address parses")
    }

    fn resolver() -> StaticResolver {
        StaticResolver::new()
            .with("allowed.test", [ip("127.0.0.1")])
            .with("meta.test", [ip("169.254.169.254")])
            .with("rebind.test", [ip("93.184.216.34"), ip("169.254.169.254")])
            .with("mapped.test", [ip("::ffff:127.0.0.1")])
            .with("empty.test", [])
    }

    #[tokio::test]
    async fn named_private_hosts_may_resolve_privately_but_never_to_metadata() {
        let resolver = StaticResolver::new()
            .with("wiki.corp", [ip("10.1.2.3")])
            .with("other.corp", [ip("10.1.2.4")])
            .with("sneaky.corp", [ip("169.254.169.254")]);
        let mut g = Guard::new(
            DomainPolicy::allow_all(),
            AddressPolicy::public_only(),
            Arc::new(resolver),
        );
        g.private_hosts = Pattern::parse_list(["wiki.corp", "sneaky.corp"]).expect("patterns");
        assert_eq!(
            g.resolve_checked("wiki.corp", 80)
                .await
                .expect("named host"),
            vec![SocketAddr::new(ip("10.1.2.3"), 80)]
        );
        assert!(g.resolve_checked("other.corp", 80).await.is_err());
        assert!(g.resolve_checked("sneaky.corp", 80).await.is_err());
        assert!(g.resolve_checked("10.1.2.3", 80).await.is_err());
    }

    fn guard(allow_loopback: bool) -> Guard {
        let addresses = if allow_loopback {
            AddressPolicy::allowing(["127.0.0.1/32"]).expect("cidr parses")
        } else {
            AddressPolicy::public_only()
        };
        Guard::new(
            DomainPolicy::allow_all().denying(vec![Pattern::parse("*.denied.test").expect("p")]),
            addresses,
            Arc::new(resolver()),
        )
    }

    #[tokio::test]
    async fn resolve_checked_refuses_and_explains() {
        let g = guard(true);
        assert_eq!(
            g.resolve_checked("Allowed.Test.", 8080).await,
            Ok(vec!["127.0.0.1:8080".parse().expect("sa")])
        );
        assert_eq!(
            g.resolve_checked("mapped.test", 1).await,
            Ok(vec!["127.0.0.1:1".parse().expect("sa")]),
            "a mapped answer is dialled as plain IPv4"
        );

        let meta = g
            .resolve_checked("meta.test", 80)
            .await
            .expect_err("metadata");
        assert_eq!(
            meta.to_string(),
            "connection to meta.test:80 refused: 169.254.169.254 is a cloud metadata address, \
             never reachable from tools"
        );
        assert!(meta.is_policy());

        let rebind = g
            .resolve_checked("rebind.test", 443)
            .await
            .expect_err("mixed answer");
        assert!(matches!(
            rebind.reason,
            Reason::Address {
                why: AddrRefusal::Class(AddrClass::Metadata),
                ..
            }
        ));

        let denied = g
            .resolve_checked("x.denied.test", 443)
            .await
            .expect_err("denied");
        assert_eq!(
            denied.to_string(),
            "connection to x.denied.test:443 refused: it matches the denied domain `*.denied.test`"
        );

        let unknown = g
            .resolve_checked("nowhere.test", 80)
            .await
            .expect_err("unknown");
        assert!(matches!(unknown.reason, Reason::Unresolvable(_)));
        assert!(!unknown.is_policy());
        let empty = g
            .resolve_checked("empty.test", 80)
            .await
            .expect_err("empty");
        assert_eq!(empty.reason, Reason::NoAddresses);

        let lit = g
            .resolve_checked("169.254.169.254", 80)
            .await
            .expect_err("literal");
        assert_eq!(lit.target, "169.254.169.254:80");
        let v6 = g
            .resolve_checked("[::1]", 80)
            .await
            .expect_err("v6 loopback not allowed");
        assert_eq!(v6.target, "[::1]:80");
        assert!(v6.to_string().contains("::1 is a loopback address"), "{v6}");
        let numeric = g.resolve_checked("0x7f.1", 9).await;
        assert_eq!(numeric, Ok(vec!["127.0.0.1:9".parse().expect("sa")]));

        let bad = g
            .resolve_checked("evil\r\nX-Injected: 1", 80)
            .await
            .expect_err("invalid");
        assert!(!bad.to_string().contains('\n'), "{bad}");
        assert!(bad.is_policy());
        let port0 = g
            .resolve_checked("allowed.test", 0)
            .await
            .expect_err("port 0");
        assert_eq!(port0.reason, Reason::InvalidPort);
    }

    #[tokio::test]
    async fn loopback_refused_without_operator_allow() {
        let g = guard(false);
        let e = g
            .resolve_checked("allowed.test", 80)
            .await
            .expect_err("loopback");
        assert_eq!(
            e.to_string(),
            "connection to allowed.test:80 refused: 127.0.0.1 is a loopback address, not \
             reachable from tools unless the operator allows it"
        );
    }

    /// Answers with an allowed address first and a forbidden one afterwards, counting calls.
    struct Rebinder {
        calls: AtomicUsize,
    }

    impl Resolve for Rebinder {
        fn resolve<'a>(&'a self, _name: &'a str) -> ResolveFuture<'a> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let ip = if n == 0 {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254))
            };
            Box::pin(async move { Ok(vec![ip]) })
        }
    }

    #[tokio::test]
    async fn connect_resolves_once_and_dials_the_checked_address() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            s.write_all(b"pinned").await.expect("write");
        });
        let rebinder = Arc::new(Rebinder {
            calls: AtomicUsize::new(0),
        });
        let g = Guard::new(
            DomainPolicy::allow_all(),
            AddressPolicy::allowing(["127.0.0.1"]).expect("cidr"),
            rebinder.clone(),
        );
        let mut s = g.connect("rebinding.test", port).await.expect("connects");
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.expect("read");
        assert_eq!(buf, b"pinned");
        assert_eq!(
            rebinder.calls.load(Ordering::SeqCst),
            1,
            "resolved exactly once"
        );
        server.await.expect("server task");

        // The second resolution (the rebinding answer) is refused.
        let e = g
            .connect("rebinding.test", port)
            .await
            .expect_err("rebound");
        assert!(matches!(e, ConnectError::Refused(_)), "{e}");
    }

    #[tokio::test]
    async fn dial_reports_connection_refused() {
        // Bind then drop to get a port with (very likely) nothing listening.
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            l.local_addr().expect("addr").port()
        };
        let g = guard(true);
        let e = g
            .connect("allowed.test", port)
            .await
            .expect_err("nothing listens");
        assert!(matches!(e, ConnectError::Io { .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "could not connect to allowed.test:{port} (127.0.0.1:{port})"
            )),
            "{e}"
        );
    }
}
