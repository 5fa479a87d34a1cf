//! Tavily's search API (`POST /search`, bearer key).

use futures::future::BoxFuture;
use serde_json::json as j;

use super::{Hit, Provider, ProviderError, Query, hits, json, send};

/// The public endpoint.
pub const ENDPOINT: &str = "https://api.tavily.com/search";
const NAME: &str = "Tavily";

/// The Tavily provider.
#[derive(Debug, Clone)]
pub struct Tavily {
    pub endpoint: String,
    pub api_key: Option<String>,
    pub client: reqwest::Client,
}

impl Provider for Tavily {
    fn name(&self) -> &'static str {
        NAME
    }

    fn search<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Hit>, ProviderError>> {
        Box::pin(async move {
            let key = self.api_key.as_deref().ok_or(ProviderError::NoKey {
                provider: NAME,
                hint: "store it with `talon secrets set tavily_api_key` or set TAVILY_API_KEY",
            })?;
            let mut body = j!({
                "query": query.text,
                "max_results": query.count.min(20),
                "search_depth": "basic",
            });
            if let Some(f) = query.freshness {
                body["time_range"] = j!(f.word());
            }
            if let Some(c) = &query.country {
                body["country"] = j!(c);
            }
            if !query.allowed_domains.is_empty() {
                body["include_domains"] = j!(query.allowed_domains);
            }
            if !query.blocked_domains.is_empty() {
                body["exclude_domains"] = j!(query.blocked_domains);
            }
            let request = self
                .client
                .post(&self.endpoint)
                .bearer_auth(key)
                .header("Content-Type", "application/json")
                .body(body.to_string());
            let text = send(NAME, request).await?;
            let v = json(NAME, &text)?;
            let results = v
                .get("results")
                .and_then(serde_json::Value::as_array)
                .ok_or_else(|| ProviderError::Format {
                    provider: NAME,
                    message: "no results array".into(),
                })?;
            Ok(hits(results, "content", "published_date"))
        })
    }
}
