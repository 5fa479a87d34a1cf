//! PDF text, page by page, for `Read` (with Claude Code's `pages` parameter) and web fetches.
//!
//! [`read`] never parses in this process: it hands the bytes to a bounded helper process
//! (`crate::untrusted_parse`), which runs [`extract`]. `extract` loads the document once, refuses
//! one of more than [`MAX_PAGES_IN_DOCUMENT`] pages before it renders anything, and renders only
//! the pages asked for (the library's all-pages call walks the page tree again for every page,
//! which never finished on 20,000 empty pages).

/// Pages read without a `pages` range; longer PDFs must name a range.
pub const MAX_PAGES_WITHOUT_RANGE: usize = 10;
/// Pages per request.
pub const MAX_PAGES_PER_REQUEST: usize = 20;
/// Largest PDF parsed.
pub const MAX_PDF_BYTES: usize = 64 << 20;
/// Most pages a document may have to be read at all.
pub const MAX_PAGES_IN_DOCUMENT: usize = 5_000;

/// A 1-based inclusive page range parsed from "3", "1-5" or "4-".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRange {
    pub first: usize,
    pub last: Option<usize>,
}

/// Parses a `pages` value; the error tells the model the accepted forms.
pub fn parse_pages(raw: &str) -> Result<PageRange, String> {
    let bad = || {
        format!(
            "invalid pages value {raw:?}: use a page number (\"3\") or a range (\"1-5\"); pages start at 1"
        )
    };
    let raw = raw.trim();
    let (first, last) = match raw.split_once('-') {
        Some((a, b)) => {
            let first: usize = a.trim().parse().map_err(|_| bad())?;
            let last = if b.trim().is_empty() {
                None
            } else {
                Some(b.trim().parse::<usize>().map_err(|_| bad())?)
            };
            (first, last)
        }
        None => {
            let page: usize = raw.parse().map_err(|_| bad())?;
            (page, Some(page))
        }
    };
    if first == 0 || last.is_some_and(|l| l < first) {
        return Err(bad());
    }
    Ok(PageRange { first, last })
}

/// Extracts the text of the requested pages, rendered as `<page number="N">` blocks, in a
/// bounded helper process. Blocking: call it off the async threads ([`read_async`]).
pub fn read(bytes: &[u8], pages: Option<&str>) -> Result<String, String> {
    checked(bytes, pages)?;
    let args: Vec<String> = pages.into_iter().map(str::to_string).collect();
    crate::untrusted_parse::parse(crate::untrusted_parse::Kind::Pdf, bytes, &args)
}

/// [`read`] on a blocking thread.
pub async fn read_async(bytes: Vec<u8>, pages: Option<String>) -> Result<String, String> {
    checked(&bytes, pages.as_deref())?;
    let args: Vec<String> = pages.into_iter().collect();
    crate::untrusted_parse::parse_async(crate::untrusted_parse::Kind::Pdf, bytes, args).await
}

/// What can be refused before any parsing: the size and the `pages` value.
fn checked(bytes: &[u8], pages: Option<&str>) -> Result<Option<PageRange>, String> {
    if bytes.len() > MAX_PDF_BYTES {
        return Err(format!(
            "PDF is too large to read ({} MiB; the limit is {} MiB).",
            bytes.len() >> 20,
            MAX_PDF_BYTES >> 20
        ));
    }
    pages.map(parse_pages).transpose()
}

/// The parser itself, run inside the helper process (`crate::untrusted_parse::helper_main`).
pub fn extract(bytes: &[u8], pages: Option<&str>) -> Result<String, String> {
    let range = checked(bytes, pages)?;
    // The PDF parser can panic on malformed input; a broken file must be an error, not a crash.
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut doc = pdf_extract::Document::load_mem(bytes)?;
        if doc.is_encrypted() {
            doc.decrypt("")?;
        }
        Ok::<_, pdf_extract::Error>(doc)
    }))
    .map_err(|_| "This PDF could not be parsed (the file is malformed).".to_string())?
    .map_err(|e| format!("This PDF could not be read: {e}"))?;
    let doc = loaded;
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    let count = numbers.len();
    if count > MAX_PAGES_IN_DOCUMENT {
        return Err(format!(
            "This PDF has {count} pages; documents of more than {MAX_PAGES_IN_DOCUMENT} pages are not read."
        ));
    }
    let (first, last) = match range {
        None if count > MAX_PAGES_WITHOUT_RANGE => {
            return Err(format!(
                "This PDF has {count} pages, which is too many to read at once. Use the pages parameter to read at most {MAX_PAGES_PER_REQUEST} pages per request, e.g. pages=\"1-{MAX_PAGES_PER_REQUEST}\"."
            ));
        }
        None => (1, count),
        Some(r) => (r.first, r.last.unwrap_or(count).min(count)),
    };
    if first > count {
        return Err(format!(
            "pages starts at {first}, but this PDF has {count} pages."
        ));
    }
    if last - first + 1 > MAX_PAGES_PER_REQUEST {
        return Err(format!(
            "At most {MAX_PAGES_PER_REQUEST} pages can be read per request; this PDF has {count} pages."
        ));
    }
    let mut out = format!(
        "PDF with {count} page{}\n",
        if count == 1 { "" } else { "s" }
    );
    for (i, number) in numbers.iter().enumerate().take(last).skip(first - 1) {
        let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut text = String::new();
            {
                let mut output = pdf_extract::PlainTextOutput::new(&mut text);
                pdf_extract::output_doc_page(&doc, &mut output, *number)?;
            }
            Ok::<_, pdf_extract::OutputError>(text)
        }))
        .map_err(|_| {
            format!(
                "Page {} of this PDF could not be parsed (it is malformed).",
                i + 1
            )
        })?
        .map_err(|e| format!("Page {} of this PDF could not be read: {e}", i + 1))?;
        out.push_str(&format!(
            "<page number=\"{}\">\n{}\n</page>\n",
            i + 1,
            text.trim()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges() {
        assert_eq!(
            parse_pages("3"),
            Ok(PageRange {
                first: 3,
                last: Some(3)
            })
        );
        assert_eq!(
            parse_pages(" 1-5 "),
            Ok(PageRange {
                first: 1,
                last: Some(5)
            })
        );
        assert_eq!(
            parse_pages("4-"),
            Ok(PageRange {
                first: 4,
                last: None
            })
        );
        for bad in ["0", "5-2", "x", "1-x", ""] {
            assert!(parse_pages(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(extract(b"%PDF-1.4 this is not really a pdf", None).is_err());
    }
}
