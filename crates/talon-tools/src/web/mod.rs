//! The web group: `web_fetch`, `web_search`, `openai_compat_call` (configured endpoints only),
//! and the service they share.
//!
//! [`Web`] builds one [`Fetcher`] per agent policy (the address guard, the domain lists, the
//! private hosts an operator allowed) and keeps the 15-minute page cache, keyed by agent, URL
//! and mode so that a page one agent may read is never served to another that may not.

pub mod html;
pub mod openai_compat_call;
pub mod web_fetch;
pub mod web_search;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use talon_core::Media;
use talon_net::{AddressPolicy, DomainPolicy, Guard, Resolve, SystemResolver};
use talon_web::cache::Cache;
use talon_web::content::{self, Kind, Mode};
use talon_web::search;
use talon_web::search::reqwest_client;
use talon_web::{FetchConfig, Fetcher};

/// What one agent may reach on the web.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebPolicy {
    /// Private hosts or ranges this agent may reach anyway: addresses and CIDRs (`10.1.2.3`,
    /// `10.0.0.0/8`) or host names (`wiki.corp`, `.corp`) that may resolve to private
    /// addresses; everything non-public is refused otherwise, metadata addresses always.
    pub allow_private: Vec<String>,
    /// When set, only these domains (patterns as in `talon_net::Pattern`).
    pub allow_domains: Option<Vec<String>>,
    /// Never these domains.
    pub deny_domains: Vec<String>,
}

/// Settings of the web tools.
#[derive(Clone)]
pub struct WebConfig {
    /// The policy of agents without their own.
    pub default: WebPolicy,
    /// Per-agent policies (replacing the default for that agent).
    pub agents: HashMap<String, WebPolicy>,
    /// Limits of every fetch.
    pub fetch: FetchConfig,
    /// The resolver (the system's; tests inject their own).
    pub resolver: Arc<dyn Resolve>,
    /// Search providers, in the order they are asked.
    pub search: Vec<SearchProvider>,
    /// Time allowed for one provider's answer.
    pub search_timeout: std::time::Duration,
}

/// A configured search provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchProvider {
    Brave {
        endpoint: String,
        api_key: Option<String>,
    },
    DuckDuckGo {
        endpoint: String,
    },
    Searxng {
        base_url: String,
    },
    Tavily {
        endpoint: String,
        api_key: Option<String>,
    },
}

impl SearchProvider {
    fn build(&self, client: &reqwest_client::Client) -> Box<dyn search::Provider> {
        let client = client.clone();
        match self.clone() {
            Self::Brave { endpoint, api_key } => Box::new(search::brave::Brave {
                endpoint,
                api_key,
                client,
            }),
            Self::DuckDuckGo { endpoint } => {
                Box::new(search::duckduckgo::DuckDuckGo { endpoint, client })
            }
            Self::Searxng { base_url } => Box::new(search::searxng::Searxng { base_url, client }),
            Self::Tavily { endpoint, api_key } => Box::new(search::tavily::Tavily {
                endpoint,
                api_key,
                client,
            }),
        }
    }
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("default", &self.default)
            .field("agents", &self.agents)
            .field("fetch", &self.fetch)
            .finish_non_exhaustive()
    }
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            default: WebPolicy::default(),
            agents: HashMap::new(),
            fetch: FetchConfig::default(),
            resolver: Arc::new(SystemResolver),
            search: vec![SearchProvider::DuckDuckGo {
                endpoint: search::duckduckgo::ENDPOINT.into(),
            }],
            search_timeout: std::time::Duration::from_secs(15),
        }
    }
}

impl WebConfig {
    /// Checks every policy (patterns and ranges parse), so mistakes fail at start-up.
    pub fn validate(&self) -> Result<(), String> {
        std::iter::once(("[web]".to_string(), &self.default))
            .chain(
                self.agents
                    .iter()
                    .map(|(name, p)| (format!("[web.agents.{name}]"), p)),
            )
            .try_for_each(|(place, policy)| {
                guard(policy, &self.resolver)
                    .map(|_| ())
                    .map_err(|e| format!("{place}: {e}"))
            })
    }
}

/// The guard for `policy`. `allow_private` entries that parse as addresses or CIDRs open those
/// ranges; the others are host names (patterns) that may resolve to private addresses.
fn guard(policy: &WebPolicy, resolver: &Arc<dyn Resolve>) -> Result<Guard, String> {
    let (ranges, names): (Vec<&String>, Vec<&String>) = policy
        .allow_private
        .iter()
        .partition(|entry| talon_net::parse_cidr(entry).is_ok());
    let addresses = AddressPolicy::allowing(ranges).map_err(|e| format!("allow_private: {e}"))?;
    let domains = DomainPolicy::parse(policy.allow_domains.as_ref(), &policy.deny_domains)
        .map_err(|e| format!("allow_domains / deny_domains: {e}"))?;
    let mut guard = Guard::new(domains, addresses, Arc::clone(resolver));
    guard.private_hosts = talon_net::Pattern::parse_list(names)
        .map_err(|e| format!("allow_private: {e} (give an IP address, a CIDR or a host name)"))?;
    Ok(guard)
}

/// A fetched page, converted for the model.
#[derive(Debug, Clone)]
pub struct Page {
    /// The URL asked for.
    pub url: String,
    /// The URL that answered, if redirected.
    pub final_url: Option<String>,
    pub status: u16,
    pub content_type: Option<String>,
    pub title: Option<String>,
    /// The text for the model (Markdown, text, pretty JSON, or a PDF's text).
    pub text: String,
    /// An image the page was.
    pub image: Option<Media>,
    /// The body was cut at the size cap.
    pub truncated: bool,
    /// Hidden elements dropped from HTML.
    pub hidden_removed: usize,
}

/// The web tools' shared service.
pub struct Web {
    config: WebConfig,
    /// Built on the first search: its HTTP client loads the system's CA bundle, about half of
    /// the instructions of a `talon tool call` that never searches (docs/BENCHMARKS.md).
    search: std::sync::OnceLock<search::Chain>,
    fetchers: Mutex<HashMap<Option<String>, Arc<Fetcher>>>,
    cache: Cache<(Option<String>, String, Mode), Arc<Page>>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Web {
    pub fn new(config: WebConfig) -> Self {
        Self {
            config,
            search: std::sync::OnceLock::new(),
            fetchers: Mutex::new(HashMap::new()),
            cache: Cache::default(),
        }
    }

    /// The fetcher for `agent`'s policy.
    pub fn fetcher(&self, agent: Option<&str>) -> Result<Arc<Fetcher>, String> {
        let key = agent
            .filter(|a| self.config.agents.contains_key(*a))
            .map(str::to_string);
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = fetchers.get(&key) {
            return Ok(Arc::clone(f));
        }
        let policy = key
            .as_ref()
            .and_then(|k| self.config.agents.get(k))
            .unwrap_or(&self.config.default);
        let fetcher = Arc::new(
            Fetcher::new(
                guard(policy, &self.config.resolver)?,
                self.config.fetch.clone(),
            )
            .map_err(|e| e.to_string())?,
        );
        fetchers.insert(key, Arc::clone(&fetcher));
        Ok(fetcher)
    }

    /// The domain policy of `agent` (search results outside it are dropped).
    pub fn domains(&self, agent: Option<&str>) -> Result<DomainPolicy, String> {
        let policy = agent
            .and_then(|a| self.config.agents.get(a))
            .unwrap_or(&self.config.default);
        DomainPolicy::parse(policy.allow_domains.as_ref(), &policy.deny_domains)
            .map_err(|e| format!("allow_domains / deny_domains: {e}"))
    }

    /// Runs `query` for `agent` through the provider chain; the result text for the model.
    pub async fn search(
        &self,
        agent: Option<&str>,
        query: &search::Query,
    ) -> Result<String, String> {
        let policy = self.domains(agent)?;
        let chain = self.search.get_or_init(|| {
            let client = search::client(self.config.search_timeout);
            search::Chain {
                providers: self
                    .config
                    .search
                    .iter()
                    .map(|p| p.build(&client))
                    .collect(),
            }
        });
        let answer = chain.search(query, &policy).await?;
        Ok(search::render(&query.text, &answer))
    }

    /// Fetches and converts `raw` for `agent`, from the cache when it was fetched in the last
    /// 15 minutes in the same mode. Errors are messages for the model.
    pub async fn page(
        &self,
        agent: Option<&str>,
        raw: &str,
        mode: Mode,
    ) -> Result<Arc<Page>, String> {
        let fetcher = self.fetcher(agent)?;
        let url = fetcher.parse(raw).map_err(|e| e.to_string())?;
        let key = (agent.map(str::to_string), url.to_string(), mode);
        if let Some(page) = self.cache.get(&key) {
            return Ok(page);
        }
        let accept = "text/html,application/xhtml+xml,application/json,text/markdown,text/plain;q=0.9,*/*;q=0.8";
        let fetched = fetcher.get(url, accept).await.map_err(|e| e.to_string())?;
        let final_url = (!fetched.redirects.is_empty()).then(|| fetched.url.to_string());
        let kind = content::kind(fetched.content_type.as_deref(), &fetched.body);
        let ct = fetched.content_type.as_deref();
        let mut page = Page {
            url: key.1.clone(),
            final_url,
            status: fetched.status,
            content_type: fetched.content_type.clone(),
            title: None,
            text: String::new(),
            image: None,
            truncated: fetched.truncated,
            hidden_removed: 0,
        };
        match kind {
            Kind::Html => {
                let html = content::decode(ct, &fetched.body, true);
                let converted = html::convert_page(html, fetched.url.as_str(), mode).await?;
                page.title = converted.title;
                page.hidden_removed = converted.hidden_removed;
                page.text = if converted.content.is_empty() {
                    "(the page has no readable text; it may need JavaScript to render)".into()
                } else {
                    converted.content
                };
            }
            Kind::Json => page.text = content::json(&content::decode(ct, &fetched.body, false)),
            Kind::Markdown | Kind::Text => page.text = content::decode(ct, &fetched.body, false),
            Kind::Pdf => {
                page.text = if fetched.truncated {
                    format!(
                        "(the PDF is larger than the {} byte limit and cannot be read in part)",
                        fetcher.config().max_body
                    )
                } else {
                    crate::fs::pdf::read_async(fetched.body.clone(), None)
                        .await
                        .unwrap_or_else(|e| format!("(the PDF's text cannot be extracted: {e})"))
                };
            }
            Kind::Image(mime) => {
                page.text = format!("(an image, {mime}, {} bytes; attached)", fetched.body.len());
                page.image = Some(Media {
                    mime_type: mime,
                    data: fetched.body,
                    name: fetched
                        .url
                        .path_segments()
                        .and_then(|mut s| s.next_back())
                        .map(str::to_string),
                    prompt: None,
                });
            }
            Kind::Binary(mime) => {
                return Err(format!(
                    "{} is {mime} ({} bytes), which web_fetch cannot turn into text",
                    key.1,
                    fetched.body.len()
                ));
            }
        }
        let page = Arc::new(page);
        if page.status < 400 {
            self.cache.put(key, Arc::clone(&page));
        }
        Ok(page)
    }
}

/// Cuts `text` to `max` characters, saying so.
pub fn cap_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.to_string(), false),
    }
}

/// The tool result for `page`: a header (Talon wrote it from parsed URLs and numbers), then what
/// the site controls (its title, its Content-Type and its text cut to `max_chars`), plus the
/// image if it was one, with the final URL as the origin. The pipeline fences all of it as
/// untrusted (the web tools declare `untrusted_output`). HTTP errors are error results with the
/// start of the body.
pub fn render(page: &Page, max_chars: usize, preface: Option<String>) -> talon_core::ToolOutput {
    let mut header = format!("URL: {}\n", page.url);
    if let Some(final_url) = &page.final_url {
        header.push_str(&format!("Final URL (after redirects): {final_url}\n"));
    }
    header.push_str(&format!("Status: {}\n", page.status));
    let mut site = String::new();
    if let Some(title) = &page.title {
        site.push_str(&format!(
            "Title: {}\n",
            title.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    if let Some(ct) = &page.content_type {
        site.push_str(&format!("Content-Type: {ct}\n"));
    }
    if page.hidden_removed > 0 {
        header.push_str(&format!(
            "Hidden elements dropped: {} (invisible text, comments, templates)\n",
            page.hidden_removed
        ));
    }
    let is_error = page.status >= 400;
    let limit = if is_error {
        max_chars.min(4000)
    } else {
        max_chars
    };
    let (text, cut) = cap_chars(&page.text, limit);
    if page.truncated {
        header.push_str(
            "Note: the response was larger than the size limit; only its start was read.\n",
        );
    }
    if cut {
        header.push_str(&format!(
            "Note: the content was cut at {limit} characters of {}.\n",
            page.text.chars().count()
        ));
    }
    if !site.is_empty() {
        site.push('\n');
    }
    site.push_str(&text);
    let origin = page.final_url.as_deref().unwrap_or(&page.url);
    let mut out = String::new();
    if let Some(p) = preface {
        out.push_str(&p);
        out.push_str("\n\n");
    }
    if is_error {
        out.push_str(&format!("HTTP {} from {}\n", page.status, page.url));
    }
    out.push_str(&header);
    out.push('\n');
    out.push_str(&site);
    let mut output = if is_error {
        talon_core::ToolOutput::error(out)
    } else {
        talon_core::ToolOutput::text(out)
    }
    .with_origin(origin);
    if let Some(image) = &page.image {
        output = output.with_media(image.clone());
    }
    output
}
