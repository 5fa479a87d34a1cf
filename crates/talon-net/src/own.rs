//! Talon's own listeners, which no connection a tool makes may reach.
//!
//! A gateway's API acts with the gateway's authority. With proxy mode allowing loopback (an
//! operator's `allowed_cidrs = ["127.0.0.1/32"]` for a local service) on a gateway without a
//! token, one user's script called that API as another user (issue 35). Whatever the address
//! rules allow, a listener Talon registered here is refused to the guard, and so to the proxy,
//! `web_fetch` and every other guarded connection: the listener's port on its own address, and,
//! for a listener on an unspecified address (`0.0.0.0`, `::`), on every loopback or unspecified
//! address and every address of this host's interfaces.

use std::net::{IpAddr, SocketAddr};
use std::sync::RwLock;

static LISTENERS: RwLock<Vec<SocketAddr>> = RwLock::new(Vec::new());

/// Registers a listener of this process (the gateway registers its bound address).
pub fn register_listener(addr: SocketAddr) {
    let mut listeners = LISTENERS.write().unwrap_or_else(|e| e.into_inner());
    if !listeners.contains(&addr) {
        listeners.push(addr);
    }
}

/// Forgets a listener that was closed.
pub fn unregister_listener(addr: SocketAddr) {
    LISTENERS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|a| *a != addr);
}

/// Whether `ip:port` reaches one of Talon's own listeners.
pub fn is_own_listener(ip: IpAddr, port: u16) -> bool {
    let ip = ip.to_canonical();
    let listeners = LISTENERS.read().unwrap_or_else(|e| e.into_inner());
    listeners.iter().filter(|l| l.port() == port).any(|l| {
        let bound = l.ip().to_canonical();
        bound == ip
            || ip.is_unspecified()
            || (bound.is_loopback() && ip.is_loopback())
            || (bound.is_unspecified()
                && (ip.is_loopback()
                    || crate::addr::host_addresses()
                        .unwrap_or_default()
                        .contains(&ip)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_listener_is_refused_on_every_address_that_reaches_it() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        register_listener("127.0.0.1:47001".parse().unwrap());
        register_listener("0.0.0.0:47002".parse().unwrap());
        assert!(is_own_listener(ip("127.0.0.1"), 47001));
        assert!(is_own_listener(ip("::ffff:127.0.0.1"), 47001));
        assert!(is_own_listener(ip("127.0.0.2"), 47001));
        assert!(!is_own_listener(ip("127.0.0.1"), 47003));
        assert!(!is_own_listener(ip("8.8.8.8"), 47001));
        assert!(is_own_listener(ip("127.0.0.1"), 47002));
        assert!(is_own_listener(ip("::1"), 47002));
        assert!(is_own_listener(ip("0.0.0.0"), 47002));
        unregister_listener("127.0.0.1:47001".parse().unwrap());
        assert!(!is_own_listener(ip("127.0.0.1"), 47001));
    }
}
