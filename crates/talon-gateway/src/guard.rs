//! The browser guard: the one layer every route passes through (`/healthz`, `/mcp`, `/v1/*`, the
//! administration and chat routes), before the bearer token is looked at.
//!
//! Why: a default gateway listens on loopback without a token, so the only thing between a web
//! page the person has open and the tools (and the administration API) is the browser. A page
//! can send "simple" cross-site requests (a `text/plain` POST needs no CORS preflight), open
//! WebSockets to any origin, and, by rebinding its own DNS name to 127.0.0.1, make the browser
//! treat the gateway as same-origin to the attacker's site. So every request must:
//!
//! - name an allowed `Host` (loopback names and the bind address unless `gateway.allowed_hosts`
//!   says otherwise; any host when a token is configured, since a rebinding page cannot present
//!   the token) — this defeats DNS rebinding;
//! - carry no `Origin` other than the gateway's own (same scheme-less authority as `Host`) or one
//!   listed in `gateway.allowed_origins` (`Origin: null` is never allowed) — this defeats
//!   cross-site requests and WebSocket upgrades, which always carry an `Origin`;
//! - not be marked `Sec-Fetch-Site: cross-site` or `same-site` (a page on another port of the
//!   same host is another origin) unless its origin is listed — this catches the requests a
//!   browser sends without `Origin` (navigations, `no-cors` GETs);
//! - send a body only as `Content-Type: application/json` (415 otherwise), so no request body a
//!   browser can send without a preflight is ever parsed.
//!
//! `/healthz` is included on purpose: a probe on the host sends an allowed `Host`, and a
//! rebinding page has no business learning that a gateway (and which version) runs here.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What the guard accepts.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// Accepted `Host` names (`name` matches any port, `name:port` one port); empty: any.
    hosts: Arc<Vec<String>>,
    /// Origins (`scheme://host[:port]`) allowed besides the gateway's own.
    origins: Arc<Vec<String>>,
}

impl Guard {
    pub(crate) fn new(hosts: Vec<String>, origins: &[String]) -> Self {
        let hosts = hosts.iter().map(|h| normalise_host(h)).collect();
        let origins = origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Self {
            hosts: Arc::new(hosts),
            origins: Arc::new(origins),
        }
    }

    /// Why `headers` (of a request with `method`) must be refused, if they must.
    fn refusal(&self, method: &Method, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(normalise_host);
        if !self.hosts.is_empty() {
            match &host {
                Some(h) if self.host_allowed(h) => {}
                Some(h) => {
                    return Some((
                        StatusCode::FORBIDDEN,
                        format!(
                            "Host {h:?} is not served here (DNS-rebinding guard); add it to gateway.allowed_hosts if it is this gateway's name"
                        ),
                    ));
                }
                None => {
                    return Some((
                        StatusCode::FORBIDDEN,
                        "a Host header is required".to_string(),
                    ));
                }
            }
        }
        let origin = headers.get(header::ORIGIN).map(|v| {
            v.to_str()
                .unwrap_or("")
                .trim()
                .trim_end_matches('/')
                .to_ascii_lowercase()
        });
        let listed = origin
            .as_deref()
            .is_some_and(|o| self.origins.iter().any(|a| a == o));
        if let Some(origin) = &origin
            && !listed
            && !same_origin(origin, host.as_deref())
        {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "cross-origin request from {origin:?} refused; list the origin in gateway.allowed_origins to allow it"
                ),
            ));
        }
        let site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        if let Some(site @ ("cross-site" | "same-site")) = site.as_deref()
            && !listed
        {
            return Some((
                StatusCode::FORBIDDEN,
                format!("{site} browser request refused (Sec-Fetch-Site)"),
            ));
        }
        if takes_body(method) && !json_body(headers) {
            return Some((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "request bodies must be JSON sent as Content-Type: application/json".to_string(),
            ));
        }
        None
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        self.hosts.iter().any(|a| a == host || a == name)
    }
}

/// Checks a `gateway.allowed_origins` entry: an origin is `http://` or `https://`, a host and an
/// optional port, nothing else. A browser sends exactly that in `Origin`, so an entry with no
/// scheme (`localhost:3000`) or with a path would never match and silently allow nothing.
pub fn check_allowed_origin(entry: &str) -> Result<(), String> {
    let trimmed = entry.trim().trim_end_matches('/');
    let Some(authority) = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
    else {
        return Err(format!(
            "gateway.allowed_origins entry {entry:?} has no http:// or https:// scheme; \
             write it as a browser sends it, for example \"http://localhost:3000\""
        ));
    };
    let name = host_name(authority);
    let port = &authority[name.len()..];
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    let name_ok = !name.is_empty()
        && !name.contains(['/', '?', '#', '@', ' ', '*'])
        && name.chars().all(|c| c.is_ascii_graphic());
    if !name_ok || !port_ok {
        return Err(format!(
            "gateway.allowed_origins entry {entry:?} is not an origin (scheme://host[:port], \
             no path, no wildcard), for example \"https://app.example.com\""
        ));
    }
    Ok(())
}

/// Lower case, without a trailing dot on the name.
fn normalise_host(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let name = host_name(&host);
    let port = &host[name.len()..];
    let name = name.trim_end_matches('.');
    // A bare IPv6 address (`::1`, as configured) is written with brackets in a Host header.
    if name.contains(':') && !name.starts_with('[') {
        return format!("[{name}]{port}");
    }
    format!("{name}{port}")
}

/// The name part of `host[:port]` (`[v6]` keeps its brackets).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    if host.matches(':').count() > 1 {
        // A bare IPv6 address: no port.
        return host;
    }
    match host.split_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether `origin` (`scheme://authority`) is the gateway itself as reached through `host`.
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|a| normalise_host(a) == host)
}

fn takes_body(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// A JSON content type, or no body at all.
fn json_body(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_TYPE) {
        Some(value) => value.to_str().is_ok_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        }),
        None => {
            let chunked = headers.contains_key(header::TRANSFER_ENCODING);
            let length = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            !chunked && length.unwrap_or(0) == 0
        }
    }
}

pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match guard.refusal(request.method(), request.headers()) {
        None => next.run(request).await,
        Some((status, message)) => {
            tracing::warn!(status = status.as_u16(), %message, "request refused by the browser guard");
            (status, axum::Json(json!({"ok": false, "error": message}))).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn loopback() -> Guard {
        Guard::new(
            vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            &[],
        )
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn hosts_match_with_or_without_port() {
        let g = loopback();
        for ok in ["localhost:8790", "LOCALHOST.", "127.0.0.1:1", "[::1]:8790"] {
            let h = headers(&[("host", ok)]);
            assert!(g.refusal(&Method::GET, &h).is_none(), "{ok}");
        }
        for bad in ["evil.example:8790", "localhost.evil.example", "127.0.0.2"] {
            let h = headers(&[("host", bad)]);
            assert!(g.refusal(&Method::GET, &h).is_some(), "{bad}");
        }
        assert!(g.refusal(&Method::GET, &HeaderMap::new()).is_some());
    }

    #[test]
    fn only_the_gateway_s_own_origin_or_a_listed_one() {
        let g = loopback();
        let own = headers(&[
            ("host", "127.0.0.1:8790"),
            ("origin", "http://127.0.0.1:8790"),
        ]);
        assert!(g.refusal(&Method::GET, &own).is_none());
        for bad in [
            "http://127.0.0.1:3000",
            "https://evil.example",
            "null",
            "http://localhost:8790",
        ] {
            let mut h = headers(&[("host", "127.0.0.1:8790")]);
            h.insert("origin", HeaderValue::from_static(bad));
            assert!(g.refusal(&Method::GET, &h).is_some(), "{bad}");
        }
        let listed = Guard::new(vec![], &["https://ui.example/".into()]);
        let h = headers(&[
            ("host", "gw"),
            ("origin", "https://ui.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(listed.refusal(&Method::GET, &h).is_none());
    }

    #[test]
    fn bodies_are_json_only() {
        let g = Guard::new(vec![], &[]);
        let plain = headers(&[("content-type", "text/plain"), ("content-length", "2")]);
        let refused = g.refusal(&Method::POST, &plain);
        assert_eq!(
            refused.map(|r| r.0),
            Some(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        let json = headers(&[("content-type", "application/json; charset=utf-8")]);
        assert!(g.refusal(&Method::POST, &json).is_none());
        let bare = headers(&[("content-length", "5")]);
        assert!(g.refusal(&Method::POST, &bare).is_some());
        assert!(g.refusal(&Method::POST, &HeaderMap::new()).is_none());
    }

    #[test]
    fn allowed_origins_must_be_origins() {
        for ok in [
            "http://localhost:3000",
            "https://app.example.com/",
            "http://[::1]:8080",
        ] {
            check_allowed_origin(ok).unwrap();
        }
        for bad in [
            "localhost:3000",
            "app.example.com",
            "https://app.example.com/ui",
            "https://*.example.com",
            "http://host:99999",
            "http://",
        ] {
            let err = check_allowed_origin(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
