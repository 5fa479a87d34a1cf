//! Every OAuth request the bridge makes, through Talon's address guard.
//!
//! Signing in to a remote server means fetching URLs *the server* names: its protected-resource
//! metadata points at an authorization server, whose metadata names token and registration
//! endpoints, any of which may redirect. A hostile server could name `http://127.0.0.1:2375/`
//! or a cloud metadata address and have Talon fetch it. So these URLs get no more reach than the
//! server the operator configured: public addresses, plus the addresses the configured URL's own
//! host has (a server configured on this machine may keep its authorization server on this
//! machine), never cloud metadata. The decision is `talon-net`'s [`Guard`]: an IP-literal host
//! is checked before each request and each redirect hop, and a name is resolved once by the
//! guard and dialled at exactly the checked addresses (no second resolution to rebind).
//! Credentials belong to the origin they were sent to: a redirect to another origin drops the
//! request's `Authorization`, `Proxy-Authorization` and `Cookie` headers, and a request whose
//! body would be repeated there (307 and 308, a token request's client secret) is not followed.

use std::error::Error as StdError;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::Url;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};
use talon_net::{AddressPolicy, DomainPolicy, Guard, SystemResolver};

/// Largest OAuth response read (metadata and token responses are small).
const MAX_BODY: usize = 1024 * 1024;
/// Redirects followed for one request.
const MAX_REDIRECTS: usize = 10;
/// Time allowed for one request, redirects included, when the caller sets none.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why an OAuth request was not made.
#[derive(Debug, thiserror::Error)]
pub enum OAuthHttpError {
    #[error("OAuth request to {url} refused: {reason}")]
    Refused { url: String, reason: String },
    #[error("OAuth request to {0} has no usable host")]
    BadUrl(String),
    #[error("OAuth response is larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error("OAuth request exceeded {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error("cannot build the OAuth HTTP client: {0}")]
    Client(String),
}

/// The guard for the URLs a server at `configured` advertises: public addresses and the
/// addresses of `configured`'s host.
pub async fn guard_for(configured: &str) -> Result<Guard, OAuthHttpError> {
    let url = Url::parse(configured).map_err(|_| OAuthHttpError::BadUrl(configured.into()))?;
    let host = url
        .host_str()
        .map(|h| h.trim_matches(['[', ']']).to_string())
        .ok_or_else(|| OAuthHttpError::BadUrl(configured.into()))?;
    let own: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        // The configured server is reached by resolving its name; the same answer says which
        // addresses "its host" means. Unresolvable: public addresses only.
        Err(_) => tokio::net::lookup_host((host.as_str(), 0))
            .await
            .map(|addrs| addrs.map(|a| a.ip().to_canonical()).collect())
            .unwrap_or_default(),
    };
    let policy = AddressPolicy::allowing(own.iter().map(IpAddr::to_string))
        .map_err(|e| OAuthHttpError::Client(e.to_string()))?;
    Ok(Guard::new(
        DomainPolicy::allow_all(),
        policy,
        Arc::new(SystemResolver),
    ))
}

/// Resolves names for the OAuth client through the guard.
struct GuardDns(Arc<Guard>);

impl reqwest::dns::Resolve for GuardDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = Arc::clone(&self.0);
        let name = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            // The port only labels refusals; the client dials each address at the URL's port.
            let addrs = guard
                .resolve_checked(&name, 443)
                .await
                .map_err(|r| Box::new(r) as Box<dyn StdError + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// rmcp's OAuth HTTP client, every request and redirect checked by one [`Guard`].
pub struct GuardedOAuthHttp {
    guard: Arc<Guard>,
    client: reqwest::Client,
}

impl GuardedOAuthHttp {
    pub fn new(guard: Guard) -> Result<Self, OAuthHttpError> {
        let guard = Arc::new(guard);
        let client = reqwest::Client::builder()
            .user_agent(concat!("talon/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            // No idle connections kept: a sign-in waits on the person between its requests, and
            // a connection the server closed meanwhile failed the token exchange ("Request
            // failed") when reused. A sign-in makes a handful of requests.
            .pool_max_idle_per_host(0)
            .no_proxy()
            .connect_timeout(guard.connect_timeout)
            .dns_resolver(Arc::new(GuardDns(Arc::clone(&guard))))
            .build()
            .map_err(|e| OAuthHttpError::Client(e.to_string()))?;
        Ok(Self { guard, client })
    }

    /// The checks that need no resolution (an IP-literal host is checked here; a name when the
    /// client resolves it).
    fn check(&self, url: &Url) -> Result<(), OAuthHttpError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OAuthHttpError::Refused {
                url: url.to_string(),
                reason: "only http and https URLs are fetched".into(),
            });
        }
        let host = url
            .host_str()
            .ok_or_else(|| OAuthHttpError::BadUrl(url.to_string()))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| OAuthHttpError::BadUrl(url.to_string()))?;
        self.guard
            .check_host(host.trim_matches(['[', ']']), port)
            .map(|_| ())
            .map_err(|r| OAuthHttpError::Refused {
                url: url.to_string(),
                reason: r.to_string(),
            })
    }

    /// Sends `request`, following redirects when `policy` says so: every hop is checked by the
    /// guard, and a hop to another origin carries no credentials.
    pub async fn send(
        &self,
        mut request: reqwest::Request,
        policy: OAuthHttpRedirectPolicy,
    ) -> Result<reqwest::Response, OAuthHttpClientError> {
        for _ in 0..=MAX_REDIRECTS {
            self.check(request.url())?;
            let next = request.try_clone();
            let response = self.client.execute(request).await?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| response.url().join(l).ok());
            let follow = policy == OAuthHttpRedirectPolicy::Follow
                && response.status().is_redirection()
                && location.is_some();
            match (follow, next, location) {
                (true, Some(mut again), Some(location)) => {
                    let repeats_body = matches!(response.status().as_u16(), 307 | 308);
                    if location.origin() != again.url().origin() {
                        if repeats_body && again.body().is_some() {
                            return Ok(response);
                        }
                        for header in [
                            reqwest::header::AUTHORIZATION,
                            reqwest::header::PROXY_AUTHORIZATION,
                            reqwest::header::COOKIE,
                        ] {
                            again.headers_mut().remove(header);
                        }
                    }
                    // 307 and 308 repeat the request; the others turn it into a GET.
                    if !repeats_body {
                        *again.method_mut() = reqwest::Method::GET;
                        *again.body_mut() = None;
                        again.headers_mut().remove(reqwest::header::CONTENT_TYPE);
                    }
                    *again.url_mut() = location;
                    request = again;
                }
                _ => return Ok(response),
            }
        }
        Err(Box::new(OAuthHttpError::TooManyRedirects))
    }
}

impl OAuthHttpClient for GuardedOAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let OAuthHttpRequest {
                request,
                redirect_policy,
                timeout,
                ..
            } = request;
            let request = reqwest::Request::try_from(request)?;
            let exchange = async {
                let response = self.send(request, redirect_policy).await?;
                let mut head = http::Response::builder()
                    .status(response.status())
                    .version(response.version());
                for (name, value) in response.headers() {
                    head = head.header(name, value);
                }
                let mut body = Vec::new();
                let mut stream = response.bytes_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk?;
                    if body.len() + chunk.len() > MAX_BODY {
                        return Err(Box::new(OAuthHttpError::TooLarge) as OAuthHttpClientError);
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(head.body(body)?)
            };
            tokio::time::timeout(timeout.unwrap_or(TIMEOUT), exchange)
                .await
                .map_err(|e| Box::new(e) as OAuthHttpClientError)?
        })
    }
}
