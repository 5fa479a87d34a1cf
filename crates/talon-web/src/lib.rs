//! Web access for Talon's tools: `web_fetch` / `WebFetch` and `web_search` / `WebSearch` are
//! thin layers over this crate.
//!
//! - [`target`]: which URLs may be fetched at all (schemes, user info, ports);
//! - [`fetch`]: the HTTP client whose only resolver is the address guard of `talon-net`, so
//!   every connection goes to an address that was checked (no DNS rebinding), with redirects
//!   checked hop by hop and the body capped after decompression;
//! - [`content`] and [`hidden`]: HTML to clean Markdown or text, hidden text dropped, main
//!   content extracted; JSON pretty-printed; charsets detected;
//! - the untrusted-content fence is `talon_core::untrusted`, applied by the pipeline to every
//!   tool that declares `untrusted_output` (the web tools, the MCP bridge);
//! - [`cache`]: the 15-minute cache.
//!
//! # Charter
//!
//! - **Owns:** fetching and searching the web under the guard, HTML to text, the page cache.
//! - **Never contains:** tools' specs (talon-tools wraps it).
//! - **A new feature goes:** a browser tool's page loading and the media fetchers live beside
//!   `fetch`, dialing through the guard.

pub mod cache;
pub mod content;
pub mod fetch;
pub mod hidden;
pub mod search;
pub mod target;

pub use fetch::{FetchConfig, FetchError, Fetched, Fetcher, ProxyRoutes};
