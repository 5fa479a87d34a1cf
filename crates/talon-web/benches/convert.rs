//! HTML → Markdown throughput on a 1 MB page: the whole `web_fetch` conversion (hidden parts
//! dropped, main content extracted, Markdown) and htmd's conversion alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use talon_web::content::{self, Mode};

/// A ~1 MB article page: navigation and footer chrome around sections of paragraphs, lists,
/// links, tables and code, plus some hidden elements.
fn page() -> String {
    let mut body = String::from(
        "<!DOCTYPE html><html><head><title>Benchmark article</title><style>p{margin:0}</style></head><body>\
         <nav><ul><li><a href=\"/\">Home</a></li><li><a href=\"/news\">News</a></li></ul></nav><main><article><h1>Benchmark article</h1>",
    );
    let mut section = 0;
    while body.len() < 1_000_000 {
        section += 1;
        body.push_str(&format!(
            "<h2>Section {section}</h2>\
             <p>Paragraph one of section {section} discusses <a href=\"/s/{section}\">a linked topic</a> with <em>emphasis</em> and <strong>strong words</strong>, continuing for a while so that the text looks like prose rather than a list of words.</p>\
             <p>Paragraph two adds detail: the measurements in section {section} were taken at dawn, noon and dusk, and the results agreed within two percent.</p>\
             <ul><li>First point of {section}</li><li>Second point, with <code>inline code</code></li><li>Third point</li></ul>\
             <table><tr><th>Metric</th><th>Value</th></tr><tr><td>alpha</td><td>{section}.5</td></tr><tr><td>beta</td><td>{}</td></tr></table>\
             <pre><code>fn section_{section}() -> u32 {{ {section} }}</code></pre>\
             <div style=\"display:none\">hidden note {section}</div>",
            section * 3
        ));
    }
    body.push_str("</article></main><footer>Copyright. Privacy. Terms.</footer></body></html>");
    body
}

fn convert(c: &mut Criterion) {
    let html = page();
    let mut group = c.benchmark_group("html_1MB");
    group.throughput(Throughput::Bytes(html.len() as u64));
    group.sample_size(10);
    group.bench_function("web_fetch_markdown", |b| {
        b.iter(|| content::html(&html, Some("https://example.com/a"), Mode::Markdown))
    });
    group.bench_function("htmd_only", |b| b.iter(|| content::to_markdown(&html)));
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
