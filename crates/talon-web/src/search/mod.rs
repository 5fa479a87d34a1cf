//! Web search over several providers with a fallback chain.
//!
//! Providers ([`brave`], [`duckduckgo`], [`searxng`], [`tavily`]) sit behind [`Provider`]. The
//! [`Chain`] asks them in the configured order; a provider that fails (an HTTP error, a rate
//! limit, a page whose markup changed, a missing key) is named in the error it yields and the
//! next one is asked. The answer says which provider gave it. Provider endpoints are the
//! operator's configuration, so they are reached directly (a self-hosted SearXNG is often on a
//! private network); the pages the results point to are only fetched through `web_fetch`.

pub mod brave;
pub mod duckduckgo;
pub mod searxng;
pub mod tavily;

use std::time::Duration;

use dom_query::Document;
use futures::future::BoxFuture;
use talon_net::{DomainPolicy, Host};

/// How recent results must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Day,
    Week,
    Month,
    Year,
}

impl Freshness {
    /// Parses `day` / `week` / `month` / `year` (and Brave's `pd` / `pw` / `pm` / `py`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "day" | "pd" | "d" => Ok(Self::Day),
            "week" | "pw" | "w" => Ok(Self::Week),
            "month" | "pm" | "m" => Ok(Self::Month),
            "year" | "py" | "y" => Ok(Self::Year),
            other => Err(format!(
                "unknown freshness {other:?}: use \"day\", \"week\", \"month\" or \"year\""
            )),
        }
    }

    /// The word most providers use.
    pub fn word(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }
}

/// One search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub text: String,
    /// Results wanted (1–20).
    pub count: usize,
    pub freshness: Option<Freshness>,
    /// Two-letter country code.
    pub country: Option<String>,
    /// Language code (`en`, `de`).
    pub language: Option<String>,
    /// Only results from these domains (patterns as `talon_net::Pattern`).
    pub allowed_domains: Vec<String>,
    /// Never results from these domains.
    pub blocked_domains: Vec<String>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// How old the page is, as the provider says it (`2 days ago`, a date).
    pub age: Option<String>,
}

/// Why a provider gave no answer. Messages name the provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("{provider}: no API key is configured ({hint})")]
    NoKey {
        provider: &'static str,
        hint: &'static str,
    },
    #[error("{provider}: rate limited (HTTP 429){}", retry.as_ref().map(|r| format!(", retry after {r}")).unwrap_or_default())]
    RateLimited {
        provider: &'static str,
        retry: Option<String>,
    },
    #[error("{provider}: HTTP {status}: {body}")]
    Status {
        provider: &'static str,
        status: u16,
        body: String,
    },
    #[error("{provider}: the request failed: {message}")]
    Transport {
        provider: &'static str,
        message: String,
    },
    #[error("{provider}: the response was not understood ({message}); its format may have changed")]
    Format {
        provider: &'static str,
        message: String,
    },
}

/// A search provider.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The name results are credited to (`Brave Search`, …).
    fn name(&self) -> &'static str;
    /// Runs `query`; domain filters are applied by the chain afterwards, but providers that can
    /// filter themselves (Tavily) are given them.
    fn search<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Hit>, ProviderError>>;
}

/// The HTTP client providers share: bounded time, an honest User-Agent.
pub fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .user_agent(crate::fetch::USER_AGENT_VALUE)
        .build()
        .unwrap_or_default()
}

/// Sends `request` and returns the body of a 2xx answer, or the provider's error.
pub async fn send(
    provider: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<String, ProviderError> {
    let response = request.send().await.map_err(|e| ProviderError::Transport {
        provider,
        message: e.to_string(),
    })?;
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(|s| format!("{s} s"));
    let body = response
        .text()
        .await
        .map_err(|e| ProviderError::Transport {
            provider,
            message: e.to_string(),
        })?;
    match status {
        200..=299 => Ok(body),
        429 => Err(ProviderError::RateLimited { provider, retry }),
        _ => Err(ProviderError::Status {
            provider,
            status,
            body: body.chars().take(300).collect(),
        }),
    }
}

/// Parses a provider's JSON answer.
pub fn json(provider: &'static str, body: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(body).map_err(|e| ProviderError::Format {
        provider,
        message: format!("not JSON: {e}"),
    })
}

/// The string at `key` of a JSON object, trimmed; empty when missing.
pub fn field(v: &serde_json::Value, key: &str) -> String {
    v.get(key)
        .and_then(serde_json::Value::as_str)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The hits of a JSON result list whose items carry `title` and `url`, the snippet under
/// `snippet` and the age under `age`; items without a URL are skipped.
pub fn hits(results: &[serde_json::Value], snippet: &str, age: &str) -> Vec<Hit> {
    results
        .iter()
        .map(|r| Hit {
            title: field(r, "title"),
            url: field(r, "url"),
            snippet: field(r, snippet),
            age: Some(field(r, age)).filter(|a| !a.is_empty()),
        })
        .filter(|h| !h.url.is_empty())
        .collect()
}

/// What a chain answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The provider that answered.
    pub provider: &'static str,
    pub hits: Vec<Hit>,
    /// Providers asked before it, and why they failed.
    pub failures: Vec<String>,
    /// Results dropped by the domain filters.
    pub filtered: usize,
}

/// Providers in order of preference.
#[derive(Debug, Default)]
pub struct Chain {
    pub providers: Vec<Box<dyn Provider>>,
}

impl Chain {
    /// Asks each provider in turn until one answers; results outside `policy` or the query's
    /// domain lists are dropped. Errors list every provider's failure.
    pub async fn search(&self, query: &Query, policy: &DomainPolicy) -> Result<Answer, String> {
        if self.providers.is_empty() {
            return Err("no search provider is configured: set [web.search] providers (brave, duckduckgo, searxng, tavily) and their keys or URLs".into());
        }
        let filter = DomainPolicy::parse(
            (!query.allowed_domains.is_empty()).then_some(&query.allowed_domains),
            &query.blocked_domains,
        )
        .map_err(|e| format!("allowed_domains / blocked_domains: {e}"))?;
        let mut failures = Vec::new();
        for provider in &self.providers {
            match provider.search(query).await {
                Ok(hits) => {
                    let (mut kept, dropped): (Vec<Hit>, Vec<Hit>) = hits
                        .into_iter()
                        .map(|h| Hit {
                            title: strip_tags(&h.title),
                            snippet: strip_tags(&h.snippet),
                            ..h
                        })
                        .partition(|h| permitted(&h.url, policy) && permitted(&h.url, &filter));
                    kept.truncate(query.count);
                    return Ok(Answer {
                        provider: provider.name(),
                        filtered: dropped.len(),
                        hits: kept,
                        failures,
                    });
                }
                Err(e) => {
                    tracing::warn!(provider = provider.name(), error = %e, "search provider failed");
                    failures.push(e.to_string());
                }
            }
        }
        Err(format!(
            "every search provider failed:\n- {}",
            failures.join("\n- ")
        ))
    }
}

/// Removes HTML tags and decodes the common entities (snippets carry `<strong>` highlights).
pub fn strip_tags(s: &str) -> String {
    if !s.contains('<') && !s.contains('&') {
        return s.to_string();
    }
    Document::from(format!("<div>{s}</div>").as_str())
        .select("div")
        .text()
        .trim()
        .to_string()
}

/// Whether `url`'s host passes `policy`.
fn permitted(url: &str, policy: &DomainPolicy) -> bool {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .and_then(|h| Host::parse(h.trim_start_matches('[').trim_end_matches(']')).ok())
        .is_some_and(|h| policy.check(&h).is_ok())
}

/// The result list for the model. The tools that show it declare `untrusted_output`, so the
/// pipeline fences it as untrusted (with the query as its origin).
pub fn render(query: &str, answer: &Answer) -> String {
    let mut text = String::new();
    if answer.hits.is_empty() {
        text.push_str("No results.");
    }
    for (i, hit) in answer.hits.iter().enumerate() {
        text.push_str(&format!("{}. {}\n   {}\n", i + 1, hit.title, hit.url));
        if !hit.snippet.is_empty() {
            text.push_str(&format!("   {}\n", hit.snippet));
        }
        if let Some(age) = &hit.age {
            text.push_str(&format!("   Age: {age}\n"));
        }
    }
    let mut out = format!(
        "Web search results for {query:?} (answered by {}",
        answer.provider
    );
    if !answer.failures.is_empty() {
        out.push_str(&format!("; before it: {}", answer.failures.join("; ")));
    }
    out.push(')');
    if answer.filtered > 0 {
        out.push_str(&format!(
            "\n{} results were dropped by the domain filters.",
            answer.filtered
        ));
    }
    out.push_str("\n\n");
    out.push_str(text.trim_end());
    out
}

/// The HTTP client crate, for callers that configure providers.
pub use reqwest as reqwest_client;
