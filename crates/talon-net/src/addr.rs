//! Address classification: the one place that decides which IP addresses a tool may reach.
//!
//! [`classify`] sorts every IPv4 and IPv6 address into an [`AddrClass`]. IPv6 forms that carry an
//! IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, IPv4-translated
//! `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16` and Teredo `2001::/32`) are
//! classified by the IPv4 address they embed, so `::ffff:127.0.0.1` is loopback and
//! `2002:a9fe:a9fe::` is cloud metadata.
//!
//! [`AddressPolicy`] turns the class into a decision: public addresses are reachable, everything
//! else is refused unless the operator allowed a CIDR that covers it. Cloud metadata addresses
//! are refused whatever the operator allowed: a tool never needs the instance's credentials.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

pub use ipnet::IpNet;

/// What kind of address an IP address is, for the purpose of deciding whether a tool may dial it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// Globally routable unicast: reachable by default.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), IPv6 unique-local `fc00::/7`, deprecated
    /// site-local `fec0::/10`, local-use NAT64 `64:ff9b:1::/48`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// Cloud instance-metadata endpoints (`169.254.169.254`, `169.254.170.2`, `100.100.100.200`,
    /// `168.63.129.16`, `fd00:ec2::254`, …). Never reachable, whatever the operator allowed.
    Metadata,
    /// Shared address space for carrier-grade NAT, `100.64.0.0/10`.
    CarrierGrade,
    /// `0.0.0.0/8` ("this network"), `::`.
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Documentation ranges: `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`,
    /// `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// Benchmarking ranges: `198.18.0.0/15`, `2001:2::/48`.
    Benchmark,
    /// Other special-purpose or unallocated space: `240.0.0.0/4`, `192.0.0.0/24`,
    /// `192.88.99.0/24`, IPv6 outside `2000::/3`, `100::/64`, the rest of `2001::/23`,
    /// `5f00::/16`, and IPv4-compatible addresses that embed nothing meaningful.
    Reserved,
}

impl AddrClass {
    /// Whether the address is globally routable unicast.
    pub fn is_public(self) -> bool {
        self == AddrClass::Public
    }

    /// A short model-facing name of the class ("loopback", "cloud metadata", …).
    pub fn name(self) -> &'static str {
        match self {
            AddrClass::Public => "public",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private-network",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Metadata => "cloud metadata",
            AddrClass::CarrierGrade => "carrier-grade NAT (shared, 100.64.0.0/10)",
            AddrClass::Unspecified => "unspecified (\"this network\")",
            AddrClass::Multicast => "multicast",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Documentation => "documentation-only",
            AddrClass::Benchmark => "benchmarking-only",
            AddrClass::Reserved => "reserved or special-purpose",
        }
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Known cloud instance-metadata IPv4 addresses.
const METADATA_V4: [Ipv4Addr; 6] = [
    // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner, …
    Ipv4Addr::new(169, 254, 169, 254),
    // AWS ECS task metadata / credentials.
    Ipv4Addr::new(169, 254, 170, 2),
    // AWS EKS Pod Identity agent.
    Ipv4Addr::new(169, 254, 170, 23),
    // Tencent Cloud metadata.
    Ipv4Addr::new(169, 254, 0, 23),
    // Alibaba Cloud metadata.
    Ipv4Addr::new(100, 100, 100, 200),
    // Azure WireServer (a public address that answers only inside Azure).
    Ipv4Addr::new(168, 63, 129, 16),
];

/// Known cloud instance-metadata IPv6 addresses.
const METADATA_V6: [Ipv6Addr; 2] = [
    // AWS IMDS over IPv6.
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254),
    // AWS EKS Pod Identity agent over IPv6.
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0023),
];

/// Classifies an address. Embedded IPv4 forms are classified by the IPv4 address they carry.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Classifies an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    if METADATA_V4.contains(&ip) {
        return AddrClass::Metadata;
    }
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => AddrClass::Unspecified,
        (10, _, _) => AddrClass::Private,
        (100, 64..=127, _) => AddrClass::CarrierGrade,
        (127, _, _) => AddrClass::Loopback,
        (169, 254, _) => AddrClass::LinkLocal,
        (172, 16..=31, _) => AddrClass::Private,
        (192, 0, 0) => AddrClass::Reserved,
        (192, 0, 2) => AddrClass::Documentation,
        (192, 88, 99) => AddrClass::Reserved,
        (192, 168, _) => AddrClass::Private,
        (198, 18..=19, _) => AddrClass::Benchmark,
        (198, 51, 100) => AddrClass::Documentation,
        (203, 0, 113) => AddrClass::Documentation,
        (224..=239, _, _) => AddrClass::Multicast,
        _ if ip == Ipv4Addr::BROADCAST => AddrClass::Broadcast,
        (240..=255, _, _) => AddrClass::Reserved,
        _ => AddrClass::Public,
    }
}

/// The IPv4 address an IPv6 address embeds, if it is one of the forms that carry one
/// (IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64 well-known prefix, 6to4).
/// Teredo carries two (server and client); see [`teredo`].
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // IPv4-mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        // IPv4-translated ::ffff:0:a.b.c.d (SIIT)
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low),
        // IPv4-compatible ::a.b.c.d (deprecated); :: and ::1 are not IPv4.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(low),
        // NAT64 well-known prefix 64:ff9b::/96
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 6to4 2002:AABB:CCDD::/48
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// The Teredo server and (de-obfuscated) client IPv4 addresses of a `2001:0::/32` address.
pub fn teredo(ip: Ipv6Addr) -> Option<(Ipv4Addr, Ipv4Addr)> {
    let s = ip.segments();
    if s[0] != 0x2001 || s[1] != 0 {
        return None;
    }
    let server = Ipv4Addr::new((s[2] >> 8) as u8, s[2] as u8, (s[3] >> 8) as u8, s[3] as u8);
    let client = Ipv4Addr::new(
        !((s[6] >> 8) as u8),
        !(s[6] as u8),
        !((s[7] >> 8) as u8),
        !(s[7] as u8),
    );
    Some((server, client))
}

/// Classifies an IPv6 address.
pub fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if METADATA_V6.contains(&ip) {
        return AddrClass::Metadata;
    }
    if ip.is_unspecified() {
        return AddrClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddrClass::Loopback;
    }
    if let Some(v4) = embedded_v4(ip) {
        let s = ip.segments();
        // An IPv4-compatible address whose embedded part is "this network" (e.g. ::0.0.0.2)
        // is not a real IPv4 destination; treat it as reserved rather than unspecified.
        let class = classify_v4(v4);
        if s[..6] == [0; 6] && class == AddrClass::Unspecified {
            return AddrClass::Reserved;
        }
        return class;
    }
    if let Some((server, client)) = teredo(ip) {
        // Both ends must be public: the client part decides where the packets finally go, the
        // server part which relay carries them. The first non-public class wins.
        let server_class = classify_v4(server);
        if !server_class.is_public() {
            return server_class;
        }
        return classify_v4(client);
    }
    let s = ip.segments();
    match s[0] {
        0xff00..=0xffff => AddrClass::Multicast,
        0xfe80..=0xfebf => AddrClass::LinkLocal,
        0xfec0..=0xfeff => AddrClass::Private,
        0xfc00..=0xfdff => AddrClass::Private,
        // Local-use NAT64 prefix 64:ff9b:1::/48.
        0x0064 if s[1] == 0xff9b && s[2] == 1 => AddrClass::Private,
        // Discard-only 100::/64.
        0x0100 if s[1..4] == [0, 0, 0] => AddrClass::Reserved,
        0x2001 if s[1] == 0x0db8 => AddrClass::Documentation,
        0x2001 if s[1] == 0x0002 && s[2] == 0 => AddrClass::Benchmark,
        // The rest of the IETF protocol assignments 2001::/23.
        0x2001 if s[1] < 0x0200 => AddrClass::Reserved,
        // Documentation 3fff::/20 (RFC 9637).
        0x3fff if s[1] < 0x1000 => AddrClass::Documentation,
        // SRv6 SIDs 5f00::/16 (RFC 9602).
        0x5f00 => AddrClass::Reserved,
        // Global unicast is 2000::/3; everything else is unallocated or special.
        0x2000..=0x3fff => AddrClass::Public,
        _ => AddrClass::Reserved,
    }
}

/// Why [`AddressPolicy::check`] refused an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrRefusal {
    /// The address is not public and no allowed CIDR covers it (or it is a metadata address,
    /// which no CIDR can allow).
    Class(AddrClass),
    /// The operator denied a range that covers the address.
    Denied(IpNet),
}

impl fmt::Display for AddrRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddrRefusal::Class(AddrClass::Metadata) => {
                f.write_str("a cloud metadata address, never reachable from tools")
            }
            AddrRefusal::Class(class) => write!(
                f,
                "a {class} address, not reachable from tools unless the operator allows it"
            ),
            AddrRefusal::Denied(net) => write!(
                f,
                "in the denied range {net} (for example this host's own addresses)"
            ),
        }
    }
}

/// Error parsing a CIDR or address for an [`AddressPolicy`].
#[derive(Debug, thiserror::Error)]
#[error(
    "invalid address range `{input}`: expected an IP address or CIDR such as 10.0.0.0/8 or fd00::/8"
)]
pub struct CidrError {
    /// The text that did not parse.
    pub input: String,
}

/// Parses an IP address (as a host-sized range) or a CIDR.
pub fn parse_cidr(s: &str) -> Result<IpNet, CidrError> {
    let t = s.trim();
    if let Ok(net) = IpNet::from_str(t) {
        return Ok(net.trunc());
    }
    let bare = t
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(t);
    IpAddr::from_str(bare)
        .map(IpNet::from)
        .map_err(|_| CidrError {
            input: s.to_string(),
        })
}

/// Which addresses may be dialled.
///
/// The order of the decision:
/// 1. cloud metadata addresses are refused, always;
/// 2. an address in a `deny` range is refused;
/// 3. a public address is allowed;
/// 4. an address in an `allow` range is allowed;
/// 5. anything else is refused.
///
/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is matched against the ranges both as itself
/// and as the IPv4 address it maps, since dialling it reaches that IPv4 address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Non-public ranges the operator made reachable (e.g. `127.0.0.1/32` in tests, an intranet
    /// `10.1.0.0/16`).
    pub allow: Vec<IpNet>,
    /// Ranges refused even when public (for example this host's own addresses, see
    /// [`AddressPolicy::deny_host_addresses`]).
    pub deny: Vec<IpNet>,
}

impl AddressPolicy {
    /// The default policy: public addresses only.
    pub fn public_only() -> Self {
        Self::default()
    }

    /// Public addresses plus the given ranges (IP addresses or CIDRs).
    pub fn allowing<I, S>(ranges: I) -> Result<Self, CidrError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let allow = ranges
            .into_iter()
            .map(|s| parse_cidr(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            allow,
            deny: Vec::new(),
        })
    }

    /// Adds the addresses of this host's network interfaces to `deny`, so that a service bound to
    /// `0.0.0.0` is not reachable through the host's own public address.
    pub fn deny_host_addresses(mut self) -> std::io::Result<Self> {
        for ip in host_addresses()? {
            let net = IpNet::from(ip);
            if !self.deny.contains(&net) {
                self.deny.push(net);
            }
        }
        Ok(self)
    }

    /// Decides whether `ip` may be dialled.
    pub fn check(&self, ip: IpAddr) -> Result<(), AddrRefusal> {
        let class = classify(ip);
        if class == AddrClass::Metadata {
            return Err(AddrRefusal::Class(class));
        }
        if let Some(net) = self.deny.iter().find(|n| covers(n, ip)) {
            return Err(AddrRefusal::Denied(*net));
        }
        if class.is_public() || self.allow.iter().any(|n| covers(n, ip)) {
            return Ok(());
        }
        Err(AddrRefusal::Class(class))
    }

    /// Whether `ip` may be dialled.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.check(ip).is_ok()
    }
}

/// Whether `net` covers `ip`, treating an IPv4-mapped IPv6 address as the IPv4 address it maps.
fn covers(net: &IpNet, ip: IpAddr) -> bool {
    net.contains(&ip) || net.contains(&ip.to_canonical())
}

/// The IP addresses of this host's network interfaces.
pub(crate) fn host_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        let Some(addr) = ifa.address else { continue };
        if let Some(v4) = addr.as_sockaddr_in() {
            out.push(IpAddr::V4(v4.ip()));
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            out.push(IpAddr::V6(v6.ip()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address parses")
    }

    #[test]
    fn classify_table() {
        use AddrClass::*;
        let table: &[(&str, AddrClass)] = &[
            // Public
            ("8.8.8.8", Public),
            ("1.1.1.1", Public),
            ("93.184.216.34", Public),
            ("100.63.255.255", Public),
            ("100.128.0.0", Public),
            ("172.15.255.255", Public),
            ("172.32.0.0", Public),
            ("192.0.1.1", Public),
            ("198.17.255.255", Public),
            ("198.20.0.0", Public),
            ("223.255.255.255", Public),
            ("2606:4700:4700::1111", Public),
            ("2a00:1450:4001::200e", Public),
            // Unspecified / this network
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("::", Unspecified),
            // Loopback
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("::1", Loopback),
            // Private
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("fec0::1", Private),
            ("64:ff9b:1::a00:1", Private),
            // Link-local
            ("169.254.0.1", LinkLocal),
            ("169.254.255.255", LinkLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            // Metadata
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("100.100.100.200", Metadata),
            ("168.63.129.16", Metadata),
            ("fd00:ec2::254", Metadata),
            // Carrier-grade NAT
            ("100.64.0.1", CarrierGrade),
            ("100.127.255.255", CarrierGrade),
            // Multicast
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("ff02::1", Multicast),
            // Broadcast
            ("255.255.255.255", Broadcast),
            // Documentation
            ("192.0.2.1", Documentation),
            ("198.51.100.7", Documentation),
            ("203.0.113.9", Documentation),
            ("2001:db8::1", Documentation),
            ("3fff::1", Documentation),
            // Benchmark
            ("198.18.0.1", Benchmark),
            ("198.19.255.255", Benchmark),
            ("2001:2::1", Benchmark),
            // Reserved
            ("240.0.0.1", Reserved),
            ("254.1.2.3", Reserved),
            ("192.0.0.8", Reserved),
            ("192.88.99.1", Reserved),
            ("100::1", Reserved),
            ("2001:10::1", Reserved),
            ("5f00::1", Reserved),
            ("4000::1", Reserved),
            ("::2", Reserved),
            // IPv4-mapped
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.1.2.3", Private),
            ("::ffff:169.254.169.254", Metadata),
            ("::ffff:8.8.8.8", Public),
            // IPv4-translated
            ("::ffff:0:127.0.0.1", Loopback),
            // IPv4-compatible
            ("::127.0.0.1", Loopback),
            ("::192.168.0.1", Private),
            ("::8.8.8.8", Public),
            // NAT64
            ("64:ff9b::7f00:1", Loopback),
            ("64:ff9b::a9fe:a9fe", Metadata),
            ("64:ff9b::808:808", Public),
            // 6to4
            ("2002:7f00:1::", Loopback),
            ("2002:a9fe:a9fe::1", Metadata),
            ("2002:c0a8:101::1", Private),
            ("2002:808:808::1", Public),
            // Teredo: public server 65.54.227.120 (4136:e378); the client 127.0.0.1 is stored
            // inverted, as 80ff:fffe.
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", Loopback),
            // Teredo with a private server.
            ("2001:0:a00:1:8000:63bf:3fff:fdd2", Private),
            // Teredo with public server and public client 8.8.8.8 (inverted: f7f7:f7f7).
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", Public),
        ];
        for (addr, want) in table {
            assert_eq!(classify(ip(addr)), *want, "classify({addr})");
        }
    }

    #[test]
    fn policy_allows_public_only_by_default() {
        let p = AddressPolicy::public_only();
        assert!(p.allows(ip("8.8.8.8")));
        assert!(p.allows(ip("2606:4700:4700::1111")));
        assert_eq!(
            p.check(ip("127.0.0.1")),
            Err(AddrRefusal::Class(AddrClass::Loopback))
        );
        assert_eq!(
            p.check(ip("::ffff:127.0.0.1")),
            Err(AddrRefusal::Class(AddrClass::Loopback))
        );
        assert!(!p.allows(ip("10.0.0.1")));
    }

    #[test]
    fn policy_allowed_cidr_covers_mapped_form_but_never_metadata() {
        let p = AddressPolicy::allowing(["127.0.0.1/32", "169.254.0.0/16", "0.0.0.0/0"])
            .expect("cidrs parse");
        assert!(p.allows(ip("127.0.0.1")));
        assert!(p.allows(ip("::ffff:127.0.0.1")));
        assert!(p.allows(ip("169.254.1.1")));
        assert_eq!(
            p.check(ip("169.254.169.254")),
            Err(AddrRefusal::Class(AddrClass::Metadata))
        );
        assert!(!p.allows(ip("::ffff:169.254.169.254")));
        assert!(!p.allows(ip("::1")), "the IPv4 ranges do not cover ::1");
    }

    #[test]
    fn policy_deny_beats_public_and_allow() {
        let mut p = AddressPolicy::allowing(["10.0.0.0/8"]).expect("cidr parses");
        p.deny.push(parse_cidr("10.1.0.0/16").expect("cidr parses"));
        p.deny.push(parse_cidr("8.8.8.8").expect("address parses"));
        assert!(p.allows(ip("10.2.0.1")));
        assert!(matches!(
            p.check(ip("10.1.0.1")),
            Err(AddrRefusal::Denied(_))
        ));
        assert!(matches!(
            p.check(ip("8.8.8.8")),
            Err(AddrRefusal::Denied(_))
        ));
    }

    #[test]
    fn parse_cidr_forms() {
        assert_eq!(
            parse_cidr("127.0.0.1").expect("bare v4").to_string(),
            "127.0.0.1/32"
        );
        assert_eq!(parse_cidr("[::1]").expect("bare v6").to_string(), "::1/128");
        assert_eq!(
            parse_cidr(" 10.1.2.3/8 ").expect("cidr").to_string(),
            "10.0.0.0/8"
        );
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("example.com").is_err());
        let err = parse_cidr("nope").expect_err("invalid");
        assert!(err.to_string().contains("`nope`"));
    }

    #[test]
    fn deny_host_addresses_refuses_own_loopback() {
        let p = AddressPolicy::allowing(["127.0.0.0/8"])
            .expect("cidr parses")
            .deny_host_addresses()
            .expect("getifaddrs works");
        // Every host has a loopback interface with 127.0.0.1.
        assert!(matches!(
            p.check(ip("127.0.0.1")),
            Err(AddrRefusal::Denied(_))
        ));
    }
}
