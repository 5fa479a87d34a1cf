//! DuckDuckGo's HTML results page (`html.duckduckgo.com/html/`): no key, scraped.
//!
//! The page lists results as `.result` blocks with an `a.result__a` title link (its `href` is a
//! `/l/?uddg=<target>` redirect) and a `.result__snippet`. A page with neither results nor
//! DuckDuckGo's no-results block means the markup changed (or a bot check answered), and is an
//! error rather than an empty list.

use dom_query::Document;
use futures::future::BoxFuture;

use super::{Hit, Provider, ProviderError, Query, send};

/// The public endpoint.
pub const ENDPOINT: &str = "https://html.duckduckgo.com/html/";
const NAME: &str = "DuckDuckGo";

/// The DuckDuckGo provider.
#[derive(Debug, Clone)]
pub struct DuckDuckGo {
    pub endpoint: String,
    pub client: reqwest::Client,
}

/// The target of a result link: the `uddg` parameter of DuckDuckGo's redirect, or the link.
fn target(href: &str) -> Option<String> {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.to_string()
    };
    let url = url::Url::parse(&absolute).ok()?;
    if url
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"))
        && url.path().starts_with("/l/")
    {
        return url
            .query_pairs()
            .find(|(k, _)| k == "uddg")
            .map(|(_, v)| v.into_owned());
    }
    Some(absolute)
}

/// Parses a results page.
pub fn parse(html: &str) -> Result<Vec<Hit>, ProviderError> {
    let doc = Document::from(html);
    let blocks = doc.select(".result");
    if blocks.length() == 0 {
        return if doc.select(".no-results").length() > 0 {
            Ok(Vec::new())
        } else {
            Err(ProviderError::Format {
                provider: NAME,
                message: "no result blocks on the page".into(),
            })
        };
    }
    let mut hits = Vec::new();
    for block in blocks.iter() {
        if block.has_class("result--ad") {
            continue;
        }
        let link = block.select("a.result__a");
        let Some(url) = link.attr("href").and_then(|h| target(&h)) else {
            continue;
        };
        hits.push(Hit {
            title: link.text().trim().to_string(),
            url,
            snippet: block.select(".result__snippet").text().trim().to_string(),
            age: None,
        });
    }
    Ok(hits)
}

impl Provider for DuckDuckGo {
    fn name(&self) -> &'static str {
        NAME
    }

    fn search<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Hit>, ProviderError>> {
        Box::pin(async move {
            let mut params: Vec<(&str, String)> = vec![("q", query.text.clone())];
            if let Some(f) = query.freshness {
                params.push(("df", f.word()[..1].to_string()));
            }
            if let Some(c) = &query.country {
                let lang = query.language.as_deref().unwrap_or("en");
                params.push((
                    "kl",
                    format!("{}-{}", c.to_ascii_lowercase(), lang.to_ascii_lowercase()),
                ));
            }
            let body = send(NAME, self.client.get(&self.endpoint).query(&params)).await?;
            let mut hits = parse(&body)?;
            hits.truncate(query.count);
            Ok(hits)
        })
    }
}
