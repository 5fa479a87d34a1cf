//! Brave Search API (`GET /res/v1/web/search`, key in `X-Subscription-Token`).

use futures::future::BoxFuture;

use super::{Hit, Provider, ProviderError, Query, hits, json, send};

/// The public endpoint.
pub const ENDPOINT: &str = "https://api.search.brave.com/res/v1/web/search";
const NAME: &str = "Brave Search";

/// The Brave provider.
#[derive(Debug, Clone)]
pub struct Brave {
    pub endpoint: String,
    pub api_key: Option<String>,
    pub client: reqwest::Client,
}

impl Provider for Brave {
    fn name(&self) -> &'static str {
        NAME
    }

    fn search<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Hit>, ProviderError>> {
        Box::pin(async move {
            let key = self.api_key.as_deref().ok_or(ProviderError::NoKey {
                provider: NAME,
                hint: "store it with `talon secrets set brave_api_key` or set BRAVE_API_KEY",
            })?;
            let mut params: Vec<(&str, String)> = vec![
                ("q", query.text.clone()),
                ("count", query.count.min(20).to_string()),
            ];
            if let Some(f) = query.freshness {
                params.push(("freshness", format!("p{}", &f.word()[..1])));
            }
            if let Some(c) = &query.country {
                params.push(("country", c.to_ascii_lowercase()));
            }
            if let Some(l) = &query.language {
                params.push(("search_lang", l.to_ascii_lowercase()));
            }
            let request = self
                .client
                .get(&self.endpoint)
                .query(&params)
                .header("Accept", "application/json")
                .header("X-Subscription-Token", key);
            let body = send(NAME, request).await?;
            let v = json(NAME, &body)?;
            let results = v
                .pointer("/web/results")
                .and_then(serde_json::Value::as_array);
            let Some(results) = results else {
                // An answer without web results is an empty result set only when Brave says so.
                return if v.get("type").is_some() {
                    Ok(Vec::new())
                } else {
                    Err(ProviderError::Format {
                        provider: NAME,
                        message: "no web.results".into(),
                    })
                };
            };
            Ok(hits(results, "description", "age"))
        })
    }
}
