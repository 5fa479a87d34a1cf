//! Which URLs may be fetched at all, before any address is looked at.
//!
//! http and https only; no user name or password in the URL (they would be sent to the site and
//! are a classic way to disguise a host: `https://trusted.example@evil.example/`); the port is
//! the scheme's default or one the operator listed. The host is parsed the way browsers parse it
//! (the `url` crate follows the WHATWG URL standard), so `http://2130706433/`, `http://0x7f.1/`
//! and `http://127.1/` all arrive here as the IPv4 address 127.0.0.1 and are refused by the
//! address policy like any other spelling of it.

use url::Url;

/// Why a URL is not fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not a URL.
    #[error("{url:?} is not a valid URL ({why}); give an absolute http:// or https:// URL")]
    Invalid { url: String, why: String },
    /// A scheme other than http and https.
    #[error("the scheme {scheme:?} is not fetched; only http:// and https:// URLs are")]
    Scheme { scheme: String },
    /// A user name or password in the URL.
    #[error(
        "URLs with a user name or password (user:pass@host) are refused: credentials must not be sent to web pages, and the form is used to disguise the real host"
    )]
    Userinfo,
    /// No host.
    #[error("the URL has no host")]
    NoHost,
    /// A port that is neither the scheme's default nor configured.
    #[error(
        "port {port} is not fetched: only the default ports (80 for http, 443 for https) and the ports an operator lists in [web] allowed_ports are fetched; use a URL without a port, or ask the operator to add {port} to [web] allowed_ports"
    )]
    Port { port: u16 },
}

/// Parses `raw` and applies the checks that need no network. `extra_ports`: ports allowed beside
/// 80 and 443.
pub fn parse(raw: &str, extra_ports: &[u16]) -> Result<Url, UrlError> {
    let url = Url::parse(raw.trim()).map_err(|e| UrlError::Invalid {
        url: raw.chars().take(200).collect(),
        why: e.to_string(),
    })?;
    check(&url, extra_ports)?;
    Ok(url)
}

/// The checks of [`parse`] on an already parsed URL (a redirect's target).
pub fn check(url: &Url, extra_ports: &[u16]) -> Result<(), UrlError> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(UrlError::Scheme {
                scheme: other.to_string(),
            });
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Userinfo);
    }
    if url.host().is_none() {
        return Err(UrlError::NoHost);
    }
    if let Some(port) = url.port()
        && !extra_ports.contains(&port)
    {
        return Err(UrlError::Port { port });
    }
    Ok(())
}

/// The URL's host as the address guard takes it: a domain name, or an IP address literal (IPv6
/// in brackets).
pub fn host(url: &Url) -> String {
    match url.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
        None => String::new(),
    }
}

/// The port a connection to `url` goes to.
pub fn port(url: &Url) -> u16 {
    url.port_or_known_default().unwrap_or(443)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_ipv4_spellings_become_addresses() {
        for raw in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://0177.0.0.1/",
        ] {
            let url = parse(raw, &[]).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(host(&url), "127.0.0.1", "{raw}");
        }
        let url = parse("http://[::ffff:127.0.0.1]/", &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(host(&url), "[::ffff:127.0.0.1]");
    }

    #[test]
    fn schemes_userinfo_and_ports_are_refused() {
        assert!(matches!(
            parse("file:///etc/passwd", &[]),
            Err(UrlError::Scheme { .. })
        ));
        assert!(matches!(
            parse("gopher://example.com/", &[]),
            Err(UrlError::Scheme { .. })
        ));
        assert_eq!(
            parse("https://trusted.example@evil.example/", &[]),
            Err(UrlError::Userinfo)
        );
        assert_eq!(
            parse("http://example.com:8080/", &[]),
            Err(UrlError::Port { port: 8080 })
        );
        assert!(parse("http://example.com:8080/", &[8080]).is_ok());
        // Issue 23: the refusal says what to do, whole (it once ended mid-sentence).
        let refused = UrlError::Port { port: 8080 }.to_string();
        assert!(
            refused.ends_with("ask the operator to add 8080 to [web] allowed_ports"),
            "{refused}"
        );
        assert!(parse("https://example.com:443/", &[]).is_ok());
        assert!(matches!(
            parse("not a url", &[]),
            Err(UrlError::Invalid { .. })
        ));
    }
}
