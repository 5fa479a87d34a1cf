//! Okapi BM25 over a handful of short documents held in memory (tool descriptions, skills):
//! GoClaw's parameters (k1 1.2, b 0.75, IDF `ln((N − df + 0.5) / (df + 0.5) + 1)`), with
//! names split into words (`get-sum`, `getSum`, `get_sum` → get, sum) and plurals folded, so a
//! request in words finds a tool or skill by its identifier.

use std::collections::{BTreeSet, HashMap};

/// Splits names and text into lowercase words (`get-sum`, `getSum`, `get_sum` → get, sum),
/// plurals folded (`issues` → issue).
pub fn words(text: &str) -> Vec<String> {
    split(text).into_iter().map(singular).collect()
}

fn singular(mut word: String) -> String {
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word.pop();
    }
    word
}

fn split(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase() || c.is_numeric();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Ranks `documents` (id, text) for `query` with Okapi BM25 (k1 = 1.2, b = 0.75); only
/// documents sharing a word with the query, with their scores, best first, ties by id.
pub fn bm25<'a>(query: &str, documents: &[(&'a str, String)], limit: usize) -> Vec<(&'a str, f64)> {
    let docs: Vec<(&str, Vec<String>)> = documents
        .iter()
        .map(|(id, text)| (*id, words(text)))
        .collect();
    if docs.is_empty() {
        return Vec::new();
    }
    let n = docs.len() as f64;
    let average = docs.iter().map(|(_, w)| w.len()).sum::<usize>() as f64 / n;
    let terms: BTreeSet<String> = words(query).into_iter().collect();
    let mut scored: Vec<(f64, &str)> = docs
        .iter()
        .filter_map(|(id, doc)| {
            let mut counts: HashMap<&str, f64> = HashMap::new();
            for w in doc {
                *counts.entry(w.as_str()).or_default() += 1.0;
            }
            let score: f64 = terms
                .iter()
                .filter_map(|t| counts.get(t.as_str()).map(|tf| (t, *tf)))
                .map(|(t, tf)| {
                    let containing = docs.iter().filter(|(_, d)| d.contains(t)).count() as f64;
                    let idf = ((n - containing + 0.5) / (containing + 0.5) + 1.0).ln();
                    let norm = 1.2 * (0.25 + 0.75 * doc.len() as f64 / average.max(1.0));
                    idf * tf * 2.2 / (tf + norm)
                })
                .sum();
            (score > 0.0).then_some((score, *id))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(limit)
        .map(|(score, id)| (id, score))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_names_and_case() {
        assert_eq!(words("getSum"), ["get", "sum"]);
        assert_eq!(
            words("mcp__gh__create-issue"),
            ["mcp", "gh", "create", "issue"]
        );
        assert_eq!(words("HTTPServer v2"), ["httpserver", "v2"]);
    }

    #[test]
    fn bm25_ranks_rare_matching_words_first() {
        let docs = vec![
            (
                "create_issue",
                "create_issue Create a new issue in a repository".to_string(),
            ),
            (
                "list_issues",
                "list_issues List issues of a repository".to_string(),
            ),
            ("send_mail", "send_mail Send an email message".to_string()),
            (
                "create_file",
                "create_file Create a file in a repository".to_string(),
            ),
        ];
        let names = |q: &str, n: usize| -> Vec<&str> {
            bm25(q, &docs, n).into_iter().map(|(id, _)| id).collect()
        };
        let hits = names("create issue", 3);
        assert_eq!(hits[0], "create_issue");
        assert!(hits.contains(&"create_file") && hits.contains(&"list_issues"));
        assert_eq!(names("email", 5), ["send_mail"]);
        assert!(names("weather", 5).is_empty());
        let scored = bm25("create issue", &docs, 3);
        assert!(scored[0].1 > scored[1].1, "{scored:?}");
    }
}
