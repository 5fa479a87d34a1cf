//! Issue 35, parsers of untrusted bytes: a PDF built to exhaust the reader costs one call an
//! error naming the limit it hit, never the gateway; web pages and notebooks go through the same
//! bounded helper.

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

/// One HTTP answer: `body` as `text/html`, to the first request on a loopback port.
fn one_page(body: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::Read;
        if let Ok((mut socket, _)) = listener.accept() {
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head);
            let _ = write!(
                socket,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/page")
}

/// Web pages and notebooks are parsed by the same bounded helper as PDFs (issue 35: every
/// parser of untrusted bytes), not in the process that serves: `web_fetch` through the shipped
/// binary converts a page there, `Read` renders a notebook there, and the helper refuses a page
/// larger than its input limit, saying so, before parsing any of it.
#[test]
fn h35_web_pages_and_notebooks_are_parsed_in_the_bounded_helper() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let url = one_page(
        "<html><head><title>Helper page</title></head><body><article><p>Converted by the \
         parsers' helper process, with enough words to count as an article for Readability \
         to pick it out of the page.</p></article></body></html>"
            .to_string(),
    );
    let port = url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!("[web]\nallow_private = [\"127.0.0.1\"]\nallowed_ports = [{port}]\n"),
    )
    .unwrap();
    let out = support::command(home.path())
        .args(["tool", "call", "web_fetch", "--workspace"])
        .arg(&ws)
        .args(["--args", &json!({"url": url}).to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Converted by the parsers' helper process"),
        "{stdout}"
    );
    assert!(stdout.contains("Helper page"), "{stdout}");

    let notebook = json!({"cells": [{"cell_type": "code", "source": "print(6*7)",
        "outputs": [{"output_type": "stream", "text": ["42\n"]}]}]});
    std::fs::write(ws.join("nb.ipynb"), notebook.to_string()).unwrap();
    let out = support::command(home.path())
        .args(["tool", "call", "Read", "--workspace"])
        .arg(&ws)
        .args([
            "--args",
            &json!({"file_path": ws.join("nb.ipynb")}).to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("print(6*7)") && stdout.contains("<output>\n42"),
        "{stdout}"
    );

    // The helper itself: more than 16 MiB of page is refused unread.
    let mut helper = std::process::Command::new(support::talon())
        .args(["__parse-untrusted", "html", "markdown", "http://x/"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = helper.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&vec![b'a'; (16 << 20) + 2]);
    });
    let out = helper.wait_with_output().unwrap();
    let _ = feeder.join();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("too large to read"), "{stdout}");
}
