//! Issue 35, parsers of untrusted bytes: a PDF built to exhaust the reader costs one call an
//! error naming the limit it hit, never the gateway.

use std::io::Write as _;

use serde_json::json;

use crate::support;

/// A PDF of `objects` (object N is `objects[N-1]`, object 1 the catalog), with a correct xref.
fn pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.5\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// One page whose content stream inflates to `gib` GiB of zeros from about a thousandth of that.
fn inflation_bomb(gib: usize) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut compress = Compress::new(Compression::best(), true);
    let zeros = vec![0u8; 1 << 20];
    let mut chunk = |input: &[u8], flush| {
        let mut out = Vec::with_capacity(64 << 10);
        compress.compress_vec(input, &mut out, flush).unwrap();
        out
    };
    let first = chunk(&zeros, FlushCompress::Sync);
    // Every later MiB of zeros compresses to the same back-references into a window of zeros.
    let repeated = chunk(&zeros, FlushCompress::Sync);
    let mut stream = first;
    for _ in 0..(gib << 10) {
        stream.extend_from_slice(&repeated);
    }
    stream.extend_from_slice(&chunk(&[], FlushCompress::Finish));
    let mut content = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    content.extend_from_slice(&stream);
    content.extend_from_slice(b"\nendstream");
    pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << >> /Contents 4 0 R >>"
            .to_vec(),
        content,
    ])
}

/// `pages` empty pages.
fn many_pages(pages: usize) -> Vec<u8> {
    let kids: Vec<String> = (0..pages).map(|i| format!("{} 0 R", i + 3)).collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        )
        .into_bytes(),
    ];
    for _ in 0..pages {
        objects.push(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>".to_vec());
    }
    pdf(&objects)
}

/// A small real PDF saying `text`.
fn hello(text: &str) -> Vec<u8> {
    let content = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
    pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
            .to_vec(),
        format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()).into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ])
}

/// Through the shipped gateway: a PDF that inflates past the parser's memory and one with
/// 20,000 pages are errors that say which limit they hit; the gateway goes on serving, and an
/// ordinary PDF still reads.
#[tokio::test(flavor = "multi_thread")]
async fn h35_a_pdf_bomb_costs_one_call_not_the_gateway() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::File::create(ws.join("bomb.pdf"))
        .unwrap()
        .write_all(&inflation_bomb(2))
        .unwrap();
    std::fs::write(ws.join("pages.pdf"), many_pages(20_000)).unwrap();
    std::fs::write(ws.join("hello.pdf"), hello("Hello from a PDF")).unwrap();
    let mut serve = support::command(home.path());
    serve
        .args(["serve", "--bind", "127.0.0.1:0", "--workspace"])
        .arg(&ws);
    let server = tokio::task::spawn_blocking(move || support::spawn(serve))
        .await
        .unwrap();
    let read = |file: &str| json!({"tool": "Read", "args": {"file_path": ws.join(file).display().to_string()}});

    let (status, body) = support::invoke(&server.addr, None, read("bomb.pdf")).await;
    let text = body.to_string();
    assert!(status == 200 || status == 400, "{status} {text}");
    assert!(text.contains("memory limit"), "{text}");

    let (_, body) = support::invoke(&server.addr, None, read("pages.pdf")).await;
    let text = body.to_string();
    assert!(
        text.contains("20000 pages") && text.contains("not read"),
        "{text}"
    );

    let health = reqwest::get(format!("http://{}/healthz", server.addr))
        .await
        .expect("the gateway is still up");
    assert_eq!(health.status(), 200);
    let (_, body) = support::invoke(&server.addr, None, read("hello.pdf")).await;
    assert!(body.to_string().contains("Hello from a PDF"), "{body}");
}
