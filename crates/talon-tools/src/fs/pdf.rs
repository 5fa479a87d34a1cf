//! PDF text, page by page, for `Read` (with Claude Code's `pages` parameter).

/// Pages read without a `pages` range; longer PDFs must name a range.
pub const MAX_PAGES_WITHOUT_RANGE: usize = 10;
/// Pages per request.
pub const MAX_PAGES_PER_REQUEST: usize = 20;
/// Largest PDF parsed.
pub const MAX_PDF_BYTES: usize = 64 << 20;

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

/// Extracts the text of the requested pages, rendered as `<page number="N">` blocks.
pub fn read(bytes: &[u8], pages: Option<&str>) -> Result<String, String> {
    if bytes.len() > MAX_PDF_BYTES {
        return Err(format!(
            "PDF is too large to read ({} MiB; the limit is {} MiB).",
            bytes.len() >> 20,
            MAX_PDF_BYTES >> 20
        ));
    }
    let range = pages.map(parse_pages).transpose()?;
    // The PDF parser can panic on malformed input; a broken file must be an error, not a crash.
    let extracted = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem_by_pages(bytes))
        .map_err(|_| "This PDF could not be parsed (the file is malformed).".to_string())?
        .map_err(|e| format!("This PDF could not be read: {e}"))?;
    let count = extracted.len();
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
    for (i, text) in extracted.iter().enumerate().take(last).skip(first - 1) {
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
        assert!(read(b"%PDF-1.4 this is not really a pdf", None).is_err());
    }
}
