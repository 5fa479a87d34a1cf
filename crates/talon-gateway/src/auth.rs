//! Bearer-token authentication: `Authorization: Bearer <token>`, or `x-api-key: <token>` as
//! Anthropic's SDKs send it.
//!
//! A refusal is OpenAI's JSON error (`invalid_api_key`) with `WWW-Authenticate: Bearer`, so
//! OpenAI and Anthropic SDK clients show the message, and MCP clients see the challenge.
//!
//! Guessing is throttled per peer ([`Throttle`]): a peer that presented wrong tokens
//! [`FAILURE_BURST`] times in a row gets one more try per [`FAILURE_REFILL`], and in between every
//! request of its that carries a token is answered 429 *without comparing the token*, so a right
//! guess looks like a wrong one until the peer slows down. Requests without a token are not
//! counted: they guess nothing. A token too weak to be worth guessing is refused at start
//! ([`check_token_strength`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// The configured token, if any, and the throttle of wrong guesses.
#[derive(Clone)]
pub(crate) struct Token {
    pub expected: Option<Arc<str>>,
    pub throttle: Arc<Throttle>,
}

impl Token {
    pub(crate) fn new(expected: Option<&str>) -> Self {
        Self {
            expected: expected.map(Arc::from),
            throttle: Arc::new(Throttle::default()),
        }
    }
}

/// The shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 24;

/// Tokens from documentation and habit, refused whatever their length.
const EXAMPLE_TOKENS: &[&str] = &[
    "change-me",
    "changeme",
    "change_me",
    "secret",
    "password",
    "token",
    "test",
    "admin",
    "talon",
];

/// Why a configured gateway token is refused.
#[derive(Debug, thiserror::Error)]
pub enum WeakToken {
    #[error("gateway.token is an example value ({0:?}); anyone who read the docs can guess it")]
    Example(String),
    #[error("gateway.token is {0} characters long; at least {MIN_TOKEN_LEN} are needed")]
    Short(usize),
    #[error("gateway.token uses only {0} different characters; a random token uses many more")]
    Repetitive(usize),
}

/// Refuses a token that an attacker could guess: an example value, one shorter than
/// [`MIN_TOKEN_LEN`], or one of fewer than 8 different characters (`aaaa…`, `abababab…`).
pub fn check_token_strength(token: &str) -> Result<(), WeakToken> {
    let lower = token.trim().to_ascii_lowercase();
    if EXAMPLE_TOKENS
        .iter()
        .any(|e| lower == *e || lower.contains("change-me"))
    {
        return Err(WeakToken::Example(token.to_string()));
    }
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(WeakToken::Short(len));
    }
    let mut distinct: Vec<char> = token.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 8 {
        return Err(WeakToken::Repetitive(distinct.len()));
    }
    Ok(())
}

/// Wrong tokens a peer may present back to back before it is slowed down.
pub const FAILURE_BURST: f64 = 10.0;
/// After the burst, one more try per this long.
pub const FAILURE_REFILL: Duration = Duration::from_secs(1);
/// Peers remembered at most; the least recently failed are forgotten first.
const MAX_PEERS: usize = 4096;

/// Failed authentications per peer, as a token bucket of tries.
#[derive(Default)]
pub(crate) struct Throttle {
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tries: f64,
    at: Instant,
}

impl Throttle {
    /// The peer's tries now, refilled for the time since its last failure.
    fn refilled(bucket: Bucket, now: Instant) -> f64 {
        let earned = now.duration_since(bucket.at).as_secs_f64() / FAILURE_REFILL.as_secs_f64();
        (bucket.tries + earned).min(FAILURE_BURST)
    }

    /// `Some(wait)` while `peer` has no try left.
    fn blocked(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let tries = Self::refilled(*peers.get(&peer)?, now);
        (tries < 1.0).then(|| FAILURE_REFILL.mul_f64(1.0 - tries))
    }

    /// Takes one try from `peer`.
    fn failed(&self, peer: IpAddr, now: Instant) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() >= MAX_PEERS && !peers.contains_key(&peer) {
            // Forget peers whose bucket is full again, then the stalest one.
            peers.retain(|_, b| Self::refilled(*b, now) < FAILURE_BURST);
            if peers.len() >= MAX_PEERS
                && let Some(stalest) = peers.iter().min_by_key(|(_, b)| b.at).map(|(p, _)| *p)
            {
                peers.remove(&stalest);
            }
        }
        let tries = peers
            .get(&peer)
            .map_or(FAILURE_BURST, |b| Self::refilled(*b, now));
        peers.insert(
            peer,
            Bucket {
                tries: (tries - 1.0).max(0.0),
                at: now,
            },
        );
    }
}

/// The throttle's key for a peer: its address, an IPv6 peer's /64 (one host's share).
fn peer_key(request: &Request) -> IpAddr {
    match crate::listen::peer(request).map(|a| a.ip()) {
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
        }
        Some(IpAddr::V6(v6)) => IpAddr::V4(v6.to_ipv4_mapped().unwrap_or([0, 0, 0, 0].into())),
        Some(ip) => ip,
        // Served on a listener of a test's own: one shared bucket.
        None => IpAddr::from([0, 0, 0, 0]),
    }
}

/// Compares in time independent of where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) async fn require_bearer(
    State(token): State<Token>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.expected else {
        crate::listen::mark_authenticated(&request);
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        // Anthropic's SDKs send the key as `x-api-key`.
        .or_else(|| {
            request
                .headers()
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        });
    let Some(presented) = presented else {
        return refused("missing bearer token: send Authorization: Bearer <gateway.token>");
    };
    let peer = peer_key(&request);
    let now = Instant::now();
    if let Some(wait) = token.throttle.blocked(peer, now) {
        return throttled(wait);
    }
    if constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
        crate::listen::mark_authenticated(&request);
        return next.run(request).await;
    }
    token.throttle.failed(peer, now);
    tracing::warn!(%peer, "a request presented a wrong gateway token");
    refused("invalid bearer token: send Authorization: Bearer <gateway.token>")
}

/// A 401 with `message`, in OpenAI's error shape.
fn refused(message: &str) -> Response {
    let mut response = crate::openai_error(
        StatusCode::UNAUTHORIZED,
        "invalid_request_error",
        None,
        Some("invalid_api_key"),
        message,
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// A 429 for a peer out of tries, saying when to come back.
fn throttled(wait: Duration) -> Response {
    let seconds = wait.as_secs().max(1);
    let mut response = crate::openai_error(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_error",
        None,
        Some("rate_limit_exceeded"),
        format!(
            "too many wrong gateway tokens from this address; the token was not checked: retry in {seconds} s"
        ),
    );
    if let Ok(value) = header::HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn weak_tokens_are_named() {
        assert!(matches!(
            check_token_strength("change-me"),
            Err(WeakToken::Example(_))
        ));
        assert!(matches!(
            check_token_strength("x"),
            Err(WeakToken::Short(1))
        ));
        assert!(matches!(
            check_token_strength(&"ab".repeat(20)),
            Err(WeakToken::Repetitive(2))
        ));
        check_token_strength("q7Vd2mXo9LpZ4rTn8sKc1bWy").unwrap();
    }

    #[test]
    fn a_guessing_peer_runs_out_of_tries_and_earns_them_back() {
        let throttle = Throttle::default();
        let peer = IpAddr::from([10, 0, 0, 1]);
        let other = IpAddr::from([10, 0, 0, 2]);
        let start = Instant::now();
        for _ in 0..10 {
            assert!(throttle.blocked(peer, start).is_none());
            throttle.failed(peer, start);
        }
        let wait = throttle.blocked(peer, start).expect("out of tries");
        assert!(wait <= FAILURE_REFILL);
        assert!(throttle.blocked(other, start).is_none(), "per peer");
        assert!(throttle.blocked(peer, start + FAILURE_REFILL).is_none());
    }
}
