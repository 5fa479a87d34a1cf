//! SearXNG's JSON API (`GET {base}/search?format=json`), self-hosted: no key, a base URL.

use futures::future::BoxFuture;

use super::{Hit, Provider, ProviderError, Query, hits, json, send};

const NAME: &str = "SearXNG";

/// The SearXNG provider.
#[derive(Debug, Clone)]
pub struct Searxng {
    /// The instance, e.g. `http://searx.internal:8080`.
    pub base_url: String,
    pub client: reqwest::Client,
}

impl Provider for Searxng {
    fn name(&self) -> &'static str {
        NAME
    }

    fn search<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Hit>, ProviderError>> {
        Box::pin(async move {
            let mut params: Vec<(&str, String)> =
                vec![("q", query.text.clone()), ("format", "json".into())];
            if let Some(f) = query.freshness {
                params.push(("time_range", f.word().into()));
            }
            if let Some(l) = &query.language {
                params.push(("language", l.clone()));
            }
            let url = format!("{}/search", self.base_url.trim_end_matches('/'));
            let body = send(NAME, self.client.get(url).query(&params)).await?;
            let v = json(NAME, &body)?;
            let results = v
                .get("results")
                .and_then(serde_json::Value::as_array)
                .ok_or_else(|| ProviderError::Format {
                    provider: NAME,
                    message: "no results array (is format=json enabled in settings.yml?)".into(),
                })?;
            Ok(hits(results, "content", "publishedDate"))
        })
    }
}
