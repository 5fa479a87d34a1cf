//! Fetching a URL: every hop checked, every connection pinned to checked addresses, the body
//! streamed into a capped buffer.
//!
//! The HTTP client resolves names only through `GuardResolver`, which is the address guard
//! ([`talon_net::Guard`]): it resolves once per connection, refuses the destination if any
//! address of the answer is special-use, and hands the client exactly the addresses it checked.
//! Nothing else resolves, so an answer that changes between a check and the connection (DNS
//! rebinding) cannot redirect a connection. IP-literal hosts, which the client would dial
//! without resolving, are checked before each request. Redirects are followed here, not by the
//! client, so each hop passes the same checks, and https → http downgrades are refused.
//!
//! With `HTTPS_PROXY` / `HTTP_PROXY` set, requests go through the proxy (hosts in `NO_PROXY`
//! excepted); the proxy's own address is the operator's choice and is not checked, while the
//! target is still resolved and checked here before the request is sent. The proxy resolves the
//! target again; deployments that need pinning end to end should not route through one.
//!
//! Proxied and direct requests use two clients, and the fetcher, not the client, decides which
//! (one `NO_PROXY` reading, `no_proxy_matches`). The direct client resolves every name through
//! the guard, with no exception; the proxied client resolves only the proxies' names and refuses
//! any other. A single client that trusted the proxy's name would also trust a *target* of that
//! name: with `HTTP_PROXY=http://localhost:3128` and `NO_PROXY=localhost`, `http://localhost/`
//! went direct and its name resolved unchecked, to loopback (issue 21, item 12).
//!
//! [`Fetcher::post_json`] sends a JSON body to an API endpoint an operator configured
//! (`openai_compat_call`) through the same checks, clients, body cap and timeout as a GET. It
//! follows no redirect: a POST's body and credentials must not be replayed to a place the
//! operator did not name, so a 3xx answer is an error.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use talon_net::{Guard, Refusal};
/// The URL type every method here takes, for crates that do not depend on `url` themselves.
pub use url::Url;

use crate::target::{self, UrlError};

/// Default cap on a response body, after decompression.
pub const DEFAULT_MAX_BODY: usize = 5 * 1024 * 1024;
/// Default time allowed for a whole fetch, redirects included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default and largest number of redirects followed.
pub const MAX_REDIRECTS: usize = 5;
/// The User-Agent sent: honest, so sites can tell an agent's fetch from a person's browser.
pub const USER_AGENT_VALUE: &str = concat!(
    "Mozilla/5.0 (compatible; Talon/",
    env!("CARGO_PKG_VERSION"),
    "; +https://github.com/talon-tools/talon)"
);

/// Limits and routing of a [`Fetcher`].
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// The body is read up to this many bytes (after decompression, so a compressed bomb stops
    /// here too); the rest is not read.
    pub max_body: usize,
    /// Time allowed for the whole fetch, redirects included.
    pub timeout: Duration,
    /// Redirects followed, at most [`MAX_REDIRECTS`].
    pub max_redirects: usize,
    /// Ports allowed beside 80 and 443.
    pub extra_ports: Vec<u16>,
    /// Use `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` from the environment.
    pub env_proxy: bool,
    /// Proxies given here instead of the environment's (an embedding application's own
    /// settings, or a test's): read once, like the environment's, when the fetcher is built.
    pub proxy: Option<ProxyRoutes>,
}

/// Where requests go through a proxy: the proxy URL of each scheme (`http`, `https`) that has
/// one, and `NO_PROXY`'s list of hosts that go direct.
#[derive(Debug, Clone, Default)]
pub struct ProxyRoutes {
    pub proxies: Vec<(&'static str, String)>,
    pub no_proxy: String,
}

impl ProxyRoutes {
    /// The routes the environment sets (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`,
    /// either case).
    pub fn from_env() -> Self {
        Self {
            proxies: env_proxies(),
            no_proxy: std::env::var("NO_PROXY")
                .or_else(|_| std::env::var("no_proxy"))
                .unwrap_or_default(),
        }
    }
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            timeout: DEFAULT_TIMEOUT,
            max_redirects: MAX_REDIRECTS,
            extra_ports: Vec::new(),
            env_proxy: true,
            proxy: None,
        }
    }
}

/// Why a fetch failed. The messages are written for the model.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL (or a redirect's target) is not fetchable.
    #[error("{0}")]
    Url(#[from] UrlError),
    /// The destination is refused by the domain lists or the address policy.
    #[error("{0}")]
    Refused(Box<Refusal>),
    /// More redirects than allowed.
    #[error(
        "stopped after {0} redirects (the limit); fetch the last URL directly if it is the page you want"
    )]
    TooManyRedirects(usize),
    /// A redirect from https to http.
    #[error("refused a redirect from {from} to {to}: it downgrades https to plain http")]
    Downgrade { from: String, to: String },
    /// A redirect without a usable Location.
    #[error("the redirect from {from} has no usable Location header")]
    BadRedirect { from: String },
    /// The whole fetch took too long.
    #[error("the fetch of {url} did not finish within {secs} s")]
    Timeout { url: String, secs: u64 },
    /// The connection or the HTTP exchange failed.
    #[error("fetching {url} failed: {message}")]
    Http { url: String, message: String },
    /// The HTTP client could not be built (TLS set-up).
    #[error("the HTTP client cannot start: {0}")]
    Client(String),
    /// A POST was answered with a redirect, which POSTs do not follow.
    #[error(
        "{url} answered HTTP {status} (a redirect{}); redirects are not followed for POST requests, so the request body and credentials go only where the operator configured: configure the URL it points to instead",
        location.as_deref().map(|l| format!(" to {l}")).unwrap_or_default()
    )]
    Redirected {
        url: String,
        status: u16,
        /// The `Location` header, shortened; `None` when absent.
        location: Option<String>,
    },
    /// A request header given by the caller is not valid HTTP (its value is never shown: it may
    /// be a credential).
    #[error("the request header {name:?} has an invalid name or value: {why}")]
    Header { name: String, why: String },
}

/// How [`Fetcher::post_json`] differs from the fetcher's defaults.
#[derive(Debug, Clone, Default)]
pub struct PostOptions {
    /// Accept the URL's own port even when it is not one of [`FetchConfig::extra_ports`]: the
    /// operator configured the endpoint with that port, and allowing it for this request only
    /// does not widen what a model-chosen URL (`web_fetch`) may reach.
    pub allow_url_port: bool,
    /// Time allowed for the whole exchange; `None`: [`FetchConfig::timeout`].
    pub timeout: Option<Duration>,
}

/// A fetched response.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL that answered (after redirects).
    pub url: Url,
    /// The URLs redirected through, in order (not including `url`).
    pub redirects: Vec<Url>,
    /// HTTP status.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, decompressed, at most `max_body` bytes.
    pub body: Vec<u8>,
    /// The body was longer than `max_body` and was cut there.
    pub truncated: bool,
}

/// Resolves names for the direct client through the address guard (see the module docs): every
/// name it is asked for is a request target.
struct GuardResolver {
    guard: Arc<Guard>,
}

impl reqwest::dns::Resolve for GuardResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = Arc::clone(&self.guard);
        let name = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            // The port only labels refusals; the client puts the URL's port on each address
            // it was given with port 0.
            let addrs: Vec<std::net::SocketAddr> = guard
                .resolve_checked(&name, 443)
                .await
                .map_err(|r| Box::new(r) as Box<dyn StdError + Send + Sync>)?
                .into_iter()
                .map(|mut a| {
                    a.set_port(0);
                    a
                })
                .collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Resolves names for the proxied client: the proxies' own names (from the environment, the
/// operator's choice, usually on a private network) and nothing else. Targets never reach it
/// (the proxy resolves them, after the guard checked them), so any other name is refused.
struct ProxyResolver {
    proxy_hosts: Vec<String>,
}

impl reqwest::dns::Resolve for ProxyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_ascii_lowercase();
        let known = self.proxy_hosts.contains(&name);
        Box::pin(async move {
            if !known {
                return Err(Box::new(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{name} is not a configured proxy; targets are never resolved by the proxied client"
                    ),
                )) as Box<dyn StdError + Send + Sync>);
            }
            let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((name.as_str(), 0u16))
                .await
                .map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)?
                .collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The client for requests sent to a proxy from the environment, and which requests those are.
struct Proxied {
    client: reqwest::Client,
    /// The schemes (`http`, `https`) that have a proxy.
    schemes: Vec<&'static str>,
    /// `NO_PROXY`: hosts that go direct.
    no_proxy: String,
}

/// Fetches URLs under one guard. Cheap to share; holds a connection pool.
pub struct Fetcher {
    guard: Arc<Guard>,
    /// Every request not sent to a proxy; resolves through the guard only.
    direct: reqwest::Client,
    config: FetchConfig,
    /// Set when a proxy from the environment is in use.
    proxied: Option<Proxied>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("guard", &self.guard)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The proxy URLs from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, either case).
fn env_proxies() -> Vec<(&'static str, String)> {
    let get = |names: [&str; 2]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
    };
    let all = get(["ALL_PROXY", "all_proxy"]);
    let mut out = Vec::new();
    if let Some(p) = get(["HTTPS_PROXY", "https_proxy"]).or_else(|| all.clone()) {
        out.push(("https", p));
    }
    if let Some(p) = get(["HTTP_PROXY", "http_proxy"]).or(all) {
        out.push(("http", p));
    }
    out
}

impl Fetcher {
    /// A fetcher that reaches only what `guard` allows.
    pub fn new(guard: Guard, config: FetchConfig) -> Result<Self, FetchError> {
        let guard = Arc::new(guard);
        let builder = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(guard.connect_timeout)
                .pool_idle_timeout(Duration::from_secs(30))
        };
        let direct = builder()
            .dns_resolver(Arc::new(GuardResolver {
                guard: Arc::clone(&guard),
            }))
            .build()
            .map_err(|e| FetchError::Client(e.to_string()))?;
        let mut proxied = None;
        let routes = match &config.proxy {
            Some(routes) => routes.clone(),
            None if config.env_proxy => ProxyRoutes::from_env(),
            None => ProxyRoutes::default(),
        };
        let ProxyRoutes { proxies, no_proxy } = routes;
        if !proxies.is_empty() {
            let mut builder = builder();
            let mut proxy_hosts = Vec::new();
            let mut schemes = Vec::new();
            for (scheme, proxy_url) in proxies {
                let proxy = match scheme {
                    "https" => reqwest::Proxy::https(&proxy_url),
                    _ => reqwest::Proxy::http(&proxy_url),
                }
                .map_err(|e| FetchError::Client(format!("proxy {proxy_url:?}: {e}")))?;
                // No `NoProxy` here: the fetcher routes (see `Fetcher::client_for`), so every
                // request this client sends goes to a proxy.
                builder = builder.proxy(proxy);
                if let Ok(parsed) = Url::parse(&proxy_url)
                    && let Some(url::Host::Domain(d)) = parsed.host()
                {
                    proxy_hosts.push(d.to_ascii_lowercase());
                }
                schemes.push(scheme);
            }
            let client = builder
                .dns_resolver(Arc::new(ProxyResolver { proxy_hosts }))
                .build()
                .map_err(|e| FetchError::Client(e.to_string()))?;
            proxied = Some(Proxied {
                client,
                schemes,
                no_proxy,
            });
        }
        Ok(Self {
            guard,
            direct,
            config: FetchConfig {
                max_redirects: config.max_redirects.min(MAX_REDIRECTS),
                ..config
            },
            proxied,
        })
    }

    /// The guard this fetcher checks destinations with.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The limits in force.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Parses and checks `raw` without fetching it (for errors before any network use).
    pub fn parse(&self, raw: &str) -> Result<Url, FetchError> {
        let url = target::parse(raw, &self.config.extra_ports)?;
        self.check_host(&url)?;
        Ok(url)
    }

    fn check_host(&self, url: &Url) -> Result<(), FetchError> {
        self.guard
            .check_host(&target::host(url), target::port(url))
            .map(|_| ())
            .map_err(|r| FetchError::Refused(Box::new(r)))
    }

    /// GETs `url`, following up to `max_redirects` checked redirects, within the timeout.
    /// `accept` is sent as the `Accept` header.
    pub async fn get(&self, url: Url, accept: &str) -> Result<Fetched, FetchError> {
        let shown = url.to_string();
        within(shown, self.config.timeout, self.get_inner(url, accept)).await
    }

    /// POSTs `body` as JSON to `url` with `headers` (values marked sensitive: they may be
    /// credentials), through the checks and clients of [`Fetcher::get`], with its body cap and
    /// timeout (see [`PostOptions`]). Redirects are not followed: a 3xx answer is
    /// [`FetchError::Redirected`]. Any status is returned as a [`Fetched`], errors included.
    pub async fn post_json(
        &self,
        url: Url,
        headers: &[(&str, String)],
        body: &serde_json::Value,
        options: &PostOptions,
    ) -> Result<Fetched, FetchError> {
        let shown = url.to_string();
        let timeout = options.timeout.unwrap_or(self.config.timeout);
        let exchange = async move {
            let ports: Cow<'_, [u16]> = match url.port() {
                Some(port)
                    if options.allow_url_port && !self.config.extra_ports.contains(&port) =>
                {
                    let mut ports = self.config.extra_ports.clone();
                    ports.push(port);
                    Cow::Owned(ports)
                }
                _ => Cow::Borrowed(&self.config.extra_ports),
            };
            let client = self.client_for(&url, &ports).await?;
            let mut request = client
                .post(url.clone())
                .header(USER_AGENT, USER_AGENT_VALUE)
                .header(ACCEPT, "application/json")
                .header(CONTENT_TYPE, "application/json");
            for (name, value) in headers {
                let invalid = |why: String| FetchError::Header {
                    name: name.chars().take(100).collect(),
                    why,
                };
                let header =
                    HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(e.to_string()))?;
                let mut value = HeaderValue::from_str(value).map_err(|e| invalid(e.to_string()))?;
                value.set_sensitive(true);
                request = request.header(header, value);
            }
            let bytes = serde_json::to_vec(body).map_err(|e| FetchError::Http {
                url: url.to_string(),
                message: format!("the request body cannot be written as JSON: {e}"),
            })?;
            let response = request
                .body(bytes)
                .send()
                .await
                .map_err(|e| http_error(&url, &e))?;
            let status = response.status();
            if status.is_redirection() {
                return Err(FetchError::Redirected {
                    url: url.to_string(),
                    status: status.as_u16(),
                    location: response.headers().get(LOCATION).map(|l| {
                        String::from_utf8_lossy(l.as_bytes())
                            .chars()
                            .take(200)
                            .collect()
                    }),
                });
            }
            self.read(url, Vec::new(), response).await
        };
        within(shown, timeout, exchange).await
    }

    async fn get_inner(&self, mut url: Url, accept: &str) -> Result<Fetched, FetchError> {
        let mut redirects: Vec<Url> = Vec::new();
        loop {
            let client = self.client_for(&url, &self.config.extra_ports).await?;
            let response = client
                .get(url.clone())
                .header(USER_AGENT, USER_AGENT_VALUE)
                .header(ACCEPT, accept)
                .send()
                .await
                .map_err(|e| http_error(&url, &e))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let next = location
                    .to_str()
                    .ok()
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| FetchError::BadRedirect {
                        from: url.to_string(),
                    })?;
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(FetchError::Downgrade {
                        from: url.to_string(),
                        to: next.to_string(),
                    });
                }
                if redirects.len() >= self.config.max_redirects {
                    return Err(FetchError::TooManyRedirects(self.config.max_redirects));
                }
                redirects.push(std::mem::replace(&mut url, next));
                continue;
            }
            return self.read(url, redirects, response).await;
        }
    }

    /// The checks every request passes before it is sent (the URL's scheme, user info and port
    /// against `ports`; the host against the guard), and the client that sends it. A request
    /// for a proxy has its target resolved and checked here, since the proxy connects.
    async fn client_for(&self, url: &Url, ports: &[u16]) -> Result<&reqwest::Client, FetchError> {
        target::check(url, ports)?;
        self.check_host(url)?;
        match self.proxy_client_for(url) {
            Some(client) => {
                self.guard
                    .resolve_checked(&target::host(url), target::port(url))
                    .await
                    .map_err(|r| FetchError::Refused(Box::new(r)))?;
                Ok(client)
            }
            None => Ok(&self.direct),
        }
    }

    /// The answer of `url` as a [`Fetched`], its body read up to the cap.
    async fn read(
        &self,
        url: Url,
        redirects: Vec<Url>,
        response: reqwest::Response,
    ) -> Result<Fetched, FetchError> {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let (body, truncated) = read_capped(response, self.config.max_body, &url).await?;
        Ok(Fetched {
            url,
            redirects,
            status,
            content_type,
            body,
            truncated,
        })
    }

    /// The proxied client when `url` goes to a proxy: its scheme has one and `NO_PROXY` does not
    /// exempt its host. `None`: the direct client, which checks every name it resolves.
    fn proxy_client_for(&self, url: &Url) -> Option<&reqwest::Client> {
        let proxied = self.proxied.as_ref()?;
        (proxied.schemes.contains(&url.scheme())
            && !no_proxy_matches(&proxied.no_proxy, &target::host(url)))
        .then_some(&proxied.client)
    }
}

/// Runs `work` within `timeout`; `shown` names the URL in the timeout error.
async fn within<T>(
    shown: String,
    timeout: Duration,
    work: impl Future<Output = Result<T, FetchError>>,
) -> Result<T, FetchError> {
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(FetchError::Timeout {
            url: shown,
            secs: timeout.as_secs(),
        }),
    }
}

/// Whether the `NO_PROXY` list `raw` exempts `host` (the rules reqwest applies: exact names,
/// `.suffix` / `suffix` domain matches, `*`).
fn no_proxy_matches(raw: &str, host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    raw.split(',').map(str::trim).any(|entry| {
        let entry = entry.trim_start_matches('.');
        !entry.is_empty()
            && (entry == "*"
                || host.eq_ignore_ascii_case(entry)
                || host
                    .to_ascii_lowercase()
                    .ends_with(&format!(".{}", entry.to_ascii_lowercase())))
    })
}

/// Reads the body until `cap` bytes, then stops reading (the connection is dropped).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    url: &Url,
) -> Result<(Vec<u8>, bool), FetchError> {
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| http_error(url, &e))? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The model-facing error for a failed exchange, naming the guard's refusal when that is why.
fn http_error(url: &Url, e: &reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(refusal) = err.downcast_ref::<Refusal>() {
            return FetchError::Refused(Box::new(refusal.clone()));
        }
        source = err.source();
    }
    FetchError::Http {
        url: url.to_string(),
        message: talon_core::error_text::with_causes(e),
    }
}
