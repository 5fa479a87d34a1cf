//! Prints every distinct line of a file that the scrubber would change, before and after: the
//! tool for reviewing false positives on real output (`cargo run --release -p talon-core
//! --example scrub_report -- FILE`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: scrub_report FILE");
        std::process::exit(2);
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("cannot read {path}: {e}");
        std::process::exit(2);
    });
    let text = String::from_utf8_lossy(&bytes);
    let scrubber = talon_core::scrub::Scrubber::new().unwrap();
    let bag = talon_core::context::ScrubBag::default();
    // Scrub the whole text at once (as the pipeline does), then report changed lines.
    let scrubbed = scrubber.scrub(&text, &bag);
    let mut seen = std::collections::BTreeSet::new();
    for (line, out) in text.lines().zip(scrubbed.lines()) {
        if out != line && seen.insert(line.to_string()) {
            println!("IN : {line}\nOUT: {out}\n");
        }
    }
    eprintln!("{} distinct lines changed", seen.len());
}
