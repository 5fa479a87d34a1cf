//! The server's own addresses, so the scrubber can replace them with `[SERVER_IP]`.
//!
//! Like GoClaw: every interface address except loopback, link-local and unspecified ones, and
//! for IPv4 also the dashed (`10-1-2-3`, as in cloud host names) and decimal-integer forms.
//! GoClaw also asks public "what is my IP" services; Talon does not call out to the internet on
//! start — list a public address in `scrub.server_ips` instead.

use std::net::IpAddr;

/// True for addresses worth hiding.
fn is_reportable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !(v4.is_loopback() || v4.is_link_local() || v4.is_unspecified()),
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            !(v6.is_loopback() || v6.is_unspecified() || link_local)
        }
    }
}

/// The textual forms of one address.
pub fn forms(ip: &IpAddr) -> Vec<String> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            vec![
                v4.to_string(),
                format!("{a}-{b}-{c}-{d}"),
                u32::from(*v4).to_string(),
            ]
        }
        IpAddr::V6(v6) => vec![v6.to_string()],
    }
}

/// Addresses of this host's interfaces (empty if they cannot be listed).
pub fn detect() -> Vec<String> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for addr in addrs {
        let Some(storage) = addr.address else {
            continue;
        };
        let ip = if let Some(v4) = storage.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = storage.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if is_reportable(&ip) {
            for form in forms(&ip) {
                if !out.contains(&form) {
                    out.push(form);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_of_ipv4() {
        let ip: IpAddr = "10.1.2.3".parse().expect("ip");
        assert_eq!(forms(&ip), vec!["10.1.2.3", "10-1-2-3", "167838211"]);
    }

    #[test]
    fn loopback_and_link_local_are_skipped() {
        for skip in ["127.0.0.1", "169.254.1.1", "0.0.0.0", "::1", "fe80::1"] {
            assert!(!is_reportable(&skip.parse().expect("ip")), "{skip}");
        }
        assert!(is_reportable(&"192.168.1.5".parse().expect("ip")));
    }

    #[test]
    fn detection_lists_no_loopback() {
        assert!(!detect().iter().any(|ip| ip == "127.0.0.1" || ip == "::1"));
    }
}
