//! Host names and the domain allow / deny lists.
//!
//! [`Host::parse`] turns what a client asked for into either a normalised domain name or an IP
//! address. Numeric IPv4 spellings that resolvers accept (`2130706433`, `0x7f.1`, `0177.0.0.1`,
//! `127.1`) are recognised as IP addresses the way the WHATWG URL standard does, so they are
//! checked by the address policy and never reach a resolver as a "name".
//!
//! Domain names are ASCII only: internationalised names must be given in their punycode
//! (`xn--…`) form; Talon does not apply IDNA mapping itself, so what is checked is exactly what
//! is resolved.
//!
//! [`Pattern`] syntax:
//!
//! | pattern          | matches                                               |
//! |------------------|-------------------------------------------------------|
//! | `example.com`    | `example.com` only                                    |
//! | `*.example.com`  | subdomains (`a.example.com`, `a.b.example.com`), not `example.com` |
//! | `.example.com`   | `example.com` and all its subdomains                  |
//! | `127.0.0.1`, `[::1]` | that IP-literal host only (never a name that resolves to it) |
//!
//! Matching is case-insensitive and a trailing dot is ignored (`Example.COM.` is `example.com`).
//! [`DomainPolicy`] applies the lists: a deny match always wins, then the allow list (if any)
//! must match.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A destination host: a normalised domain name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A domain name: lower-case ASCII, no trailing dot.
    Domain(String),
    /// An IP address given literally (including numeric IPv4 spellings such as `127.1`).
    Ip(IpAddr),
}

/// Why a host name was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing was given.
    #[error("the host is empty")]
    Empty,
    /// A non-ASCII character appeared.
    #[error("non-ASCII host names are not supported; use the punycode (xn--) form")]
    NonAscii,
    /// A character that cannot appear in a host name.
    #[error("the character {0:?} is not allowed in a host name")]
    InvalidChar(char),
    /// The name is longer than 253 characters.
    #[error("the host name is longer than 253 characters")]
    TooLong,
    /// Two dots in a row, or a leading dot.
    #[error("the host name has an empty label")]
    EmptyLabel,
    /// A label is longer than 63 characters.
    #[error("a label of the host name is longer than 63 characters")]
    LabelTooLong,
    /// The host ends in a number but is not a valid IPv4 address.
    #[error("the host looks like an IPv4 address but is not a valid one")]
    InvalidIpv4,
    /// A bracketed host that is not a valid IPv6 address.
    #[error("the host is not a valid IPv6 address")]
    InvalidIpv6,
    /// An IPv6 zone identifier (`%eth0`), which would select an interface.
    #[error("IPv6 zone identifiers are not allowed")]
    ZoneId,
}

const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

impl Host {
    /// Parses and normalises a host: a domain name, an IPv4 address in any numeric spelling, or
    /// an IPv6 address with or without brackets.
    pub fn parse(input: &str) -> Result<Host, HostError> {
        if input.is_empty() {
            return Err(HostError::Empty);
        }
        if !input.is_ascii() {
            return Err(HostError::NonAscii);
        }
        if let Some(rest) = input.strip_prefix('[') {
            let inner = rest.strip_suffix(']').ok_or(HostError::InvalidIpv6)?;
            return parse_v6(inner).map(|ip| Host::Ip(IpAddr::V6(ip)));
        }
        if input.contains(':') {
            return parse_v6(input).map(|ip| Host::Ip(IpAddr::V6(ip)));
        }
        let lower = input.to_ascii_lowercase();
        if ends_in_number(&lower) {
            return parse_v4(&lower)
                .map(|ip| Host::Ip(IpAddr::V4(ip)))
                .ok_or(HostError::InvalidIpv4);
        }
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        validate_domain(name)?;
        Ok(Host::Domain(name.to_string()))
    }

    /// The domain name, if this is one.
    pub fn domain(&self) -> Option<&str> {
        match self {
            Host::Domain(d) => Some(d),
            Host::Ip(_) => None,
        }
    }

    /// The IP address, if the host is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Ip(ip) => Some(*ip),
            Host::Domain(_) => None,
        }
    }

    /// `host:port`, with brackets around IPv6 addresses.
    pub fn with_port(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            other => format!("{other}:{port}"),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Domain(d) => f.write_str(d),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl FromStr for Host {
    type Err = HostError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Host::parse(s)
    }
}

fn parse_v6(s: &str) -> Result<Ipv6Addr, HostError> {
    if s.contains('%') {
        return Err(HostError::ZoneId);
    }
    s.parse().map_err(|_| HostError::InvalidIpv6)
}

fn validate_domain(name: &str) -> Result<(), HostError> {
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_NAME {
        return Err(HostError::TooLong);
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL {
            return Err(HostError::LabelTooLong);
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(HostError::InvalidChar(c));
        }
    }
    Ok(())
}

/// WHATWG "ends in a number": the last label (ignoring one trailing dot) is all digits or a
/// valid IPv4 number (`0x1f`).
fn ends_in_number(host: &str) -> bool {
    let mut parts: Vec<&str> = host.split('.').collect();
    if parts.last() == Some(&"") {
        if parts.len() == 1 {
            return false;
        }
        parts.pop();
    }
    match parts.last() {
        Some(last) if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) => true,
        Some(last) => parse_v4_number(last).is_some(),
        None => false,
    }
}

/// One part of a WHATWG IPv4 address: decimal, `0x` hex or leading-zero octal.
fn parse_v4_number(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (hex, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Anything that does not fit in a u64 is far above 2^32 anyway.
    u64::from_str_radix(digits, radix).ok()
}

/// The WHATWG IPv4 parser: 1–4 dot-separated numbers, the last one filling the remaining bytes.
fn parse_v4(host: &str) -> Option<Ipv4Addr> {
    let mut parts: Vec<&str> = host.split('.').collect();
    if parts.last() == Some(&"") && parts.len() > 1 {
        parts.pop();
    }
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|p| parse_v4_number(p))
        .collect::<Option<Vec<u64>>>()?;
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|n| *n > 255) {
        return None;
    }
    let last_limit = 1u64 << (8 * (5 - numbers.len()));
    if *last >= last_limit {
        return None;
    }
    let mut value = *last;
    for (i, n) in init.iter().enumerate() {
        value += n << (8 * (3 - i));
    }
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// One entry of a domain allow or deny list. See the [module docs](self) for the syntax.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `example.com`: that name only.
    Exact(String),
    /// `*.example.com`: strict subdomains of the name.
    Subdomains(String),
    /// `.example.com`: the name and its subdomains.
    DomainAndSubdomains(String),
    /// `127.0.0.1` or `[::1]`: that IP-literal host only.
    Ip(IpAddr),
}

/// Why a pattern did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid domain pattern `{input}`: {reason}")]
pub struct PatternError {
    /// The text that did not parse.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Pattern {
    /// Parses a pattern (`example.com`, `*.example.com`, `.example.com`, an IP literal).
    pub fn parse(input: &str) -> Result<Pattern, PatternError> {
        let err = |reason: String| PatternError {
            input: input.to_string(),
            reason,
        };
        let s = input.trim();
        let domain = |rest: &str| match Host::parse(rest) {
            Ok(Host::Domain(d)) => Ok(d),
            Ok(Host::Ip(_)) => Err(err(
                "a wildcard applies to domain names, not IP addresses".into()
            )),
            Err(e) => Err(err(e.to_string())),
        };
        if s == "*" {
            return Err(err(
                "`*` is not a pattern; leave the allow list unset to allow every public host"
                    .into(),
            ));
        }
        if let Some(rest) = s.strip_prefix("*.") {
            return domain(rest).map(Pattern::Subdomains);
        }
        if let Some(rest) = s.strip_prefix('.') {
            return domain(rest).map(Pattern::DomainAndSubdomains);
        }
        if s.contains('*') {
            return Err(err("`*` is only allowed as a leading `*.` label".into()));
        }
        match Host::parse(s) {
            Ok(Host::Domain(d)) => Ok(Pattern::Exact(d)),
            Ok(Host::Ip(ip)) => Ok(Pattern::Ip(ip)),
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// Parses a list of patterns, failing on the first invalid one.
    pub fn parse_list<I, S>(items: I) -> Result<Vec<Pattern>, PatternError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        items
            .into_iter()
            .map(|s| Pattern::parse(s.as_ref()))
            .collect()
    }

    /// Whether the pattern matches the (normalised) host.
    pub fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (Pattern::Ip(p), Host::Ip(h)) => p == h || p.to_canonical() == h.to_canonical(),
            (Pattern::Exact(p), Host::Domain(d)) => p == d,
            (Pattern::Subdomains(p), Host::Domain(d)) => is_subdomain(d, p),
            (Pattern::DomainAndSubdomains(p), Host::Domain(d)) => p == d || is_subdomain(d, p),
            _ => false,
        }
    }
}

fn is_subdomain(name: &str, parent: &str) -> bool {
    name.len() > parent.len()
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(d) => f.write_str(d),
            Pattern::Subdomains(d) => write!(f, "*.{d}"),
            Pattern::DomainAndSubdomains(d) => write!(f, ".{d}"),
            Pattern::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            Pattern::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::parse(s)
    }
}

/// Why [`DomainPolicy::check`] refused a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRefusal {
    /// The host matched a deny pattern.
    Denied(Pattern),
    /// There is an allow list and the host matched none of it.
    NotAllowed,
}

impl fmt::Display for DomainRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainRefusal::Denied(p) => write!(f, "it matches the denied domain `{p}`"),
            DomainRefusal::NotAllowed => f.write_str("not in the allowed domains"),
        }
    }
}

/// Domain allow / deny lists.
///
/// * `allow: None` — every host is allowed by name (the address policy still applies: only
///   public addresses unless the operator allowed more).
/// * `allow: Some(list)` — only hosts matching the list; an empty list allows nothing.
/// * `deny` always wins over `allow`.
///
/// IP-literal hosts match only IP patterns, so under an allow list an address must be listed
/// literally to be reachable by address.
///
/// The default is `allow: Some(vec![])`: nothing is reachable until something is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPolicy {
    /// `None` allows every host by name; `Some(list)` only those matching.
    pub allow: Option<Vec<Pattern>>,
    /// Refused even when allowed.
    pub deny: Vec<Pattern>,
}

impl Default for DomainPolicy {
    fn default() -> Self {
        Self::allow_only(Vec::new())
    }
}

impl DomainPolicy {
    /// Every host by name (public addresses only, unless the address policy says more).
    pub fn allow_all() -> Self {
        Self {
            allow: None,
            deny: Vec::new(),
        }
    }

    /// Only hosts matching `patterns`.
    pub fn allow_only(patterns: Vec<Pattern>) -> Self {
        Self {
            allow: Some(patterns),
            deny: Vec::new(),
        }
    }

    /// Adds deny patterns.
    pub fn denying(mut self, patterns: Vec<Pattern>) -> Self {
        self.deny.extend(patterns);
        self
    }

    /// Parses both lists from configuration strings.
    pub fn parse<A, D, S, T>(allow: Option<A>, deny: D) -> Result<Self, PatternError>
    where
        A: IntoIterator<Item = S>,
        S: AsRef<str>,
        D: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        Ok(Self {
            allow: allow.map(Pattern::parse_list).transpose()?,
            deny: Pattern::parse_list(deny)?,
        })
    }

    /// Decides whether `host` may be reached by name.
    pub fn check(&self, host: &Host) -> Result<(), DomainRefusal> {
        if let Some(p) = self.deny.iter().find(|p| p.matches(host)) {
            return Err(DomainRefusal::Denied(p.clone()));
        }
        match &self.allow {
            None => Ok(()),
            Some(list) if list.iter().any(|p| p.matches(host)) => Ok(()),
            Some(_) => Err(DomainRefusal::NotAllowed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).expect("host parses")
    }

    fn pat(s: &str) -> Pattern {
        Pattern::parse(s).expect("pattern parses")
    }

    #[test]
    fn domains_are_normalised() {
        assert_eq!(host("Example.COM."), Host::Domain("example.com".into()));
        assert_eq!(
            host("xn--bcher-kva.example"),
            Host::Domain("xn--bcher-kva.example".into())
        );
        assert_eq!(
            host("_dmarc.example.com"),
            Host::Domain("_dmarc.example.com".into())
        );
        assert_eq!(Host::parse("bücher.example"), Err(HostError::NonAscii));
        assert_eq!(Host::parse(""), Err(HostError::Empty));
        assert_eq!(Host::parse("."), Err(HostError::Empty));
        assert_eq!(Host::parse("a..b"), Err(HostError::EmptyLabel));
        assert_eq!(Host::parse("a b"), Err(HostError::InvalidChar(' ')));
        assert_eq!(Host::parse("a\0b"), Err(HostError::InvalidChar('\0')));
        assert_eq!(Host::parse("evil.com/x"), Err(HostError::InvalidChar('/')));
        assert_eq!(Host::parse(&"a".repeat(64)), Err(HostError::LabelTooLong));
        assert_eq!(Host::parse(&["abc"; 70].join(".")), Err(HostError::TooLong));
    }

    #[test]
    fn numeric_ipv4_forms_are_addresses() {
        let lo = Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        for s in [
            "127.0.0.1",
            "127.0.0.1.",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "0177.0.0.01",
            "127.0.1",
            "0X7F.0.0.1",
        ] {
            assert_eq!(host(s), lo, "{s}");
        }
        assert_eq!(host("0"), Host::Ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        for s in ["256.0.0.1", "1.2.3.4.5", "08.1.1.1", "4294967296", "a.1"] {
            assert_eq!(Host::parse(s), Err(HostError::InvalidIpv4), "{s}");
        }
        // A last label that is not a number keeps it a domain name.
        assert_eq!(host("1.2.3.com"), Host::Domain("1.2.3.com".into()));
        assert_eq!(host("0x.example"), Host::Domain("0x.example".into()));
    }

    #[test]
    fn ipv6_forms() {
        let lo = Host::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(host("[::1]"), lo);
        assert_eq!(host("::1"), lo);
        assert_eq!(host("::ffff:127.0.0.1").to_string(), "::ffff:127.0.0.1");
        assert_eq!(Host::parse("[fe80::1%eth0]"), Err(HostError::ZoneId));
        assert_eq!(Host::parse("[::1"), Err(HostError::InvalidIpv6));
        assert_eq!(Host::parse("[example.com]"), Err(HostError::InvalidIpv6));
        assert_eq!(lo.with_port(443), "[::1]:443");
        assert_eq!(host("a.test").with_port(80), "a.test:80");
    }

    #[test]
    fn pattern_semantics() {
        let exact = pat("Example.com.");
        assert!(exact.matches(&host("EXAMPLE.com")));
        assert!(!exact.matches(&host("www.example.com")));

        let sub = pat("*.example.com");
        assert!(sub.matches(&host("a.example.com")));
        assert!(sub.matches(&host("a.b.example.com")));
        assert!(!sub.matches(&host("example.com")));
        assert!(!sub.matches(&host("badexample.com")));

        let both = pat(".example.com");
        assert!(both.matches(&host("example.com")));
        assert!(both.matches(&host("x.example.com")));
        assert!(!both.matches(&host("xexample.com")));

        let ip = pat("127.0.0.1");
        assert!(ip.matches(&host("127.0.0.1")));
        assert!(ip.matches(&host("2130706433")));
        assert!(ip.matches(&host("[::ffff:127.0.0.1]")));
        assert!(!ip.matches(&host("localhost")));
        assert!(pat("[::1]").matches(&host("::1")));

        assert!(Pattern::parse("*").is_err());
        assert!(Pattern::parse("a.*.com").is_err());
        assert!(Pattern::parse("*.127.0.0.1").is_err());
        let e = Pattern::parse("bücher.de").expect_err("non-ascii");
        assert!(e.to_string().contains("punycode"), "{e}");
        assert_eq!(pat("*.a.test").to_string(), "*.a.test");
        assert_eq!(pat(".a.test").to_string(), ".a.test");
    }

    #[test]
    fn policy_deny_beats_allow_and_allow_list_is_strict() {
        let p = DomainPolicy::parse(Some([".example.com", "10.0.0.1"]), ["secret.example.com"])
            .expect("policy parses");
        assert_eq!(p.check(&host("example.com")), Ok(()));
        assert_eq!(p.check(&host("api.example.com")), Ok(()));
        assert_eq!(
            p.check(&host("Secret.Example.com.")),
            Err(DomainRefusal::Denied(pat("secret.example.com")))
        );
        assert_eq!(p.check(&host("other.test")), Err(DomainRefusal::NotAllowed));
        assert_eq!(p.check(&host("10.0.0.1")), Ok(()));
        assert_eq!(p.check(&host("10.0.0.2")), Err(DomainRefusal::NotAllowed));

        let all = DomainPolicy::allow_all().denying(vec![pat("*.evil.test")]);
        assert_eq!(all.check(&host("anything.test")), Ok(()));
        assert_eq!(all.check(&host("8.8.8.8")), Ok(()));
        assert!(all.check(&host("x.evil.test")).is_err());

        assert_eq!(
            DomainPolicy::default().check(&host("example.com")),
            Err(DomainRefusal::NotAllowed)
        );
        assert_eq!(
            DomainRefusal::NotAllowed.to_string(),
            "not in the allowed domains"
        );
    }
}
