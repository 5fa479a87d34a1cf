//! Parsers of untrusted bytes run in a helper process, never in the gateway's address space.
//!
//! Why: an outside review fed `Read` a 145 KB PDF that made the PDF library allocate 3 GB (21.9 GB
//! for a 1.5 MB file; a 2 MB file of 20,000 empty pages never finished) and the gateway died for
//! every user. A parser of bytes a model, a web page or a file an agent wrote chose cannot be
//! trusted to stay small, so it runs in a child process that is bounded four ways, and the child
//! dying is an error for this one call:
//!
//! * memory: its address space is capped ([`MEMORY_LIMIT`]);
//! * time: CPU seconds by `RLIMIT_CPU` and wall time by the parent, which kills it
//!   ([`CPU_LIMIT`], [`WALL_LIMIT`]);
//! * work: the parser refuses documents past its own limits before it starts (pages, bytes);
//! * output: at most [`OUTPUT_LIMIT`] bytes are read back.
//!
//! The child also gives up what it does not need: no new privileges, no files (it creates none:
//! `RLIMIT_FSIZE` 0, a handful of descriptors) and, where the kernel has Landlock, no filesystem
//! access and no TCP at all. The error names the limit that was hit, so the model (and the person)
//! know whether to ask for fewer pages or give up on the file.
//!
//! The child is the program that wired Talon (the `talon` binary: `talon __parse-untrusted KIND`),
//! or whatever [`set_helper`] installed (a test's helper binary). Its protocol: the bytes on
//! standard input, the arguments after the kind, the rendered text on standard output with exit
//! 0, or a message for the model on standard output with exit [`REFUSED`].

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The subcommand of the `talon` binary that runs a parser (internal).
pub const SUBCOMMAND: &str = "__parse-untrusted";
/// Address space of the child.
pub const MEMORY_LIMIT: u64 = 1 << 30;
/// CPU seconds of the child.
pub const CPU_LIMIT: u64 = 20;
/// Wall time before the parent kills the child.
pub const WALL_LIMIT: Duration = Duration::from_secs(30);
/// Bytes of output read back.
pub const OUTPUT_LIMIT: usize = 4 << 20;
/// Exit code of a child that refused the input with a message for the model.
pub const REFUSED: i32 = 3;

/// What to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A PDF's text, page by page (`crate::fs::pdf`).
    Pdf,
    /// A web page (decoded HTML): its readable content as Markdown or text, and its title
    /// (`crate::web::html`).
    Html,
    /// A Jupyter notebook's cells and outputs (`crate::claude_code::read`).
    Notebook,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Pdf, Kind::Html, Kind::Notebook];

    fn name(self) -> &'static str {
        match self {
            Kind::Pdf => "pdf",
            Kind::Html => "html",
            Kind::Notebook => "notebook",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Pdf => "PDF",
            Kind::Html => "web page",
            Kind::Notebook => "notebook",
        }
    }

    /// The most input the helper reads; larger input is refused before it gets there.
    fn input_limit(self) -> usize {
        match self {
            Kind::Pdf => crate::fs::pdf::MAX_PDF_BYTES,
            Kind::Html => crate::web::html::MAX_HTML_CHARS,
            Kind::Notebook => crate::claude_code::read::MAX_NOTEBOOK_BYTES,
        }
    }

    /// The parser itself, inside the helper: the text, or a message for the model.
    fn run(self, bytes: &[u8], args: &[String]) -> Result<String, String> {
        match self {
            Kind::Pdf => crate::fs::pdf::extract(bytes, args.first().map(String::as_str)),
            Kind::Html => crate::web::html::convert(bytes, args),
            Kind::Notebook => crate::claude_code::read::notebook_text(bytes),
        }
    }
}

static HELPER: OnceLock<(PathBuf, Vec<OsString>)> = OnceLock::new();

/// Runs the parsers with `program args… KIND …` instead of this program's
/// `__parse-untrusted KIND …`. For a process that is not the `talon` binary (a test); the first
/// call wins.
pub fn set_helper(program: PathBuf, args: Vec<OsString>) {
    let _ = HELPER.set((program, args));
}

fn helper() -> Result<(PathBuf, Vec<OsString>), String> {
    if let Some((program, args)) = HELPER.get() {
        return Ok((program.clone(), args.clone()));
    }
    let program = std::env::current_exe().map_err(|e| {
        format!("the parser helper cannot be started (this program's path is unknown: {e})")
    })?;
    Ok((program, vec![SUBCOMMAND.into()]))
}

/// Parses `bytes` as `kind` in a bounded child process; `args` go to the parser. Blocks for up to
/// [`WALL_LIMIT`]: call it off the async threads (see [`parse_async`]).
pub fn parse(kind: Kind, bytes: &[u8], args: &[String]) -> Result<String, String> {
    if bytes.len() > kind.input_limit() {
        return Err(too_large(kind));
    }
    let (program, lead) = helper()?;
    let mut child = Command::new(&program)
        .args(&lead)
        .arg(kind.name())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .spawn()
        .map_err(|e| format!("the {} parser could not be started: {e}", kind.what()))?;
    let started = Instant::now();
    // Feed and drain on threads so neither pipe can fill up and stall the other.
    let input = bytes.to_vec();
    let mut stdin = child.stdin.take();
    let feeder = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&input);
        }
    });
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || read_capped(stdout, OUTPUT_LIMIT + 1));
    let stderr = child.stderr.take();
    let errors = std::thread::spawn(move || read_capped(stderr, 16 << 10));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= WALL_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("the {} parser was lost: {e}", kind.what())),
        }
    };
    let _ = feeder.join();
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    let limit = |which: String| {
        format!(
            "This {} could not be read: parsing it hit the {which}. It is either malformed or built to exhaust the reader; nothing of it was read.",
            kind.what()
        )
    };
    let Some(status) = status else {
        return Err(limit(format!("time limit ({} s)", WALL_LIMIT.as_secs())));
    };
    use std::os::unix::process::ExitStatusExt;
    let err_text = String::from_utf8_lossy(&err);
    match (status.code(), status.signal()) {
        (Some(0), _) if out.len() > OUTPUT_LIMIT => Err(limit(format!(
            "output limit ({} MiB of text)",
            OUTPUT_LIMIT >> 20
        ))),
        (Some(0), _) => Ok(String::from_utf8_lossy(&out).into_owned()),
        (Some(REFUSED), _) => Err(String::from_utf8_lossy(&out).into_owned()),
        // SIGXCPU at the soft limit, SIGKILL at the hard one.
        (_, Some(24 | 9)) if started.elapsed() < WALL_LIMIT => {
            Err(limit(format!("CPU time limit ({CPU_LIMIT} s)")))
        }
        _ if err_text.contains("memory allocation") || err_text.contains("capacity overflow") => {
            Err(limit(format!("memory limit ({} MiB)", MEMORY_LIMIT >> 20)))
        }
        _ => Err(format!(
            "This {} could not be parsed (the file is malformed).",
            kind.what()
        )),
    }
}

/// The refusal of input past `kind`'s limit (by the caller before the helper starts, and by the
/// helper for whatever reaches it otherwise).
fn too_large(kind: Kind) -> String {
    format!(
        "This {} is too large to read (the limit is {} MiB).",
        kind.what(),
        kind.input_limit() >> 20
    )
}

/// [`parse`] on a blocking thread.
pub async fn parse_async(kind: Kind, bytes: Vec<u8>, args: Vec<String>) -> Result<String, String> {
    tokio::task::spawn_blocking(move || parse(kind, &bytes, &args))
        .await
        .unwrap_or_else(|e| Err(format!("the parser's thread failed: {e}")))
}

/// At most `cap` bytes of `from`; the rest is read and dropped, so a child writing more never
/// blocks on a full pipe (and its output limit is reported as that, not as the time limit).
fn read_capped(from: Option<impl Read>, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(mut from) = from {
        let _ = (&mut from).take(cap as u64).read_to_end(&mut out);
        let _ = std::io::copy(&mut from, &mut std::io::sink());
    }
    out
}

/// The child: confines itself, reads standard input and runs the parser named by `args[0]`.
/// Returns the exit code (0, [`REFUSED`], or 2 for a call that is not this protocol's).
pub fn helper_main(args: &[OsString]) -> u8 {
    if let Err(e) = confine() {
        eprintln!("talon {SUBCOMMAND}: cannot confine the parser: {e}");
        return 2;
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some((kind, rest)) = args.split_first() else {
        eprintln!("talon {SUBCOMMAND}: no parser named");
        return 2;
    };
    let Some(kind) = Kind::ALL.into_iter().find(|k| k.name() == kind) else {
        eprintln!("talon {SUBCOMMAND}: no parser {kind:?}");
        return 2;
    };
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(kind.input_limit() as u64 + 1)
        .read_to_end(&mut bytes)
    {
        eprintln!("talon {SUBCOMMAND}: cannot read the input: {e}");
        return 2;
    }
    let result = if bytes.len() > kind.input_limit() {
        Err(too_large(kind))
    } else {
        kind.run(&bytes, rest)
    };
    let (text, code) = match result {
        Ok(text) => (text, 0),
        Err(message) => (message, REFUSED as u8),
    };
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return 2;
    }
    code
}

/// Resource limits, no new privileges and, where the kernel has it, Landlock with nothing
/// allowed.
fn confine() -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    let set = |resource, soft: u64, hard: u64| {
        setrlimit(resource, soft, hard).map_err(|e| format!("{resource:?}: {e}"))
    };
    set(Resource::RLIMIT_AS, MEMORY_LIMIT, MEMORY_LIMIT)?;
    set(Resource::RLIMIT_CPU, CPU_LIMIT, CPU_LIMIT + 1)?;
    set(Resource::RLIMIT_FSIZE, 0, 0)?;
    set(Resource::RLIMIT_CORE, 0, 0)?;
    set(Resource::RLIMIT_NOFILE, 16, 16)?;
    talon_exec::sandbox::deny_all_access()
}
