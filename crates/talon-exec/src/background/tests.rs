use super::*;

fn job(script: &str, timeout: Duration) -> Job {
    let mut job = Job::new(
        vec!["/bin/sh".into(), "-c".into(), script.into()],
        std::env::temp_dir(),
        timeout,
    );
    job.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    job
}

fn log_file(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .expect("log")
}

fn start(bg: &Arc<Background>, owner: &str, script: &str) -> (TaskInfo, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("task.output");
    let file = log_file(&log);
    let info = bg
        .start(
            owner,
            new_id(),
            script,
            job(script, Duration::from_secs(60)),
            file,
            log,
            None,
        )
        .expect("starts");
    (info, dir)
}

#[tokio::test]
async fn output_is_read_incrementally_and_the_end_is_seen() {
    let bg = Arc::new(Background::default());
    let (info, _dir) = start(&bg, "s1", "echo one; sleep 0.3; echo two >&2; exit 4");
    assert_eq!(info.status, Status::Running);
    let first = bg
        .read("s1", &info.id, Some(Duration::from_millis(100)))
        .await
        .expect("read");
    assert!(first.wait_expired);
    assert_eq!(first.text, "one\n");
    let second = bg
        .read("s1", &info.id, Some(Duration::from_secs(10)))
        .await
        .expect("read");
    assert!(!second.wait_expired);
    assert_eq!(second.text, "two\n");
    assert_eq!(second.info.status, Status::Finished(Ending::Exited(4)));
    assert_eq!(second.info.status.describe(), "failed (exit code 4)");
}

#[tokio::test]
async fn other_sessions_cannot_see_or_stop_a_command() {
    let bg = Arc::new(Background::default());
    let (info, _dir) = start(&bg, "owner", "sleep 30");
    assert!(bg.list("intruder").is_empty());
    let err = bg.stop("intruder", &info.id).await.expect_err("refused");
    assert!(matches!(err, BackgroundError::Unknown(_)), "{err}");
    let err = bg
        .read("intruder", &info.id, None)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("no background command"), "{err}");
    let stopped = bg.stop("owner", &info.id).await.expect("stops");
    assert_eq!(stopped.status, Status::Finished(Ending::Cancelled));
    let again = bg.stop("owner", &info.id).await.expect_err("not running");
    assert!(again.to_string().contains("stopped"), "{again}");
}

#[tokio::test]
async fn stdin_is_written_and_closed() {
    let bg = Arc::new(Background::default());
    let (info, _dir) = start(
        &bg,
        "s",
        "while read line; do echo got:$line; done; echo eof",
    );
    bg.write("s", &info.id, b"a\nb\n", true)
        .await
        .expect("written");
    let read = bg
        .read("s", &info.id, Some(Duration::from_secs(10)))
        .await
        .expect("read");
    assert_eq!(read.text, "got:a\ngot:b\neof\n");
    assert_eq!(read.info.status, Status::Finished(Ending::Exited(0)));
    let err = bg
        .write("s", &info.id, b"x", false)
        .await
        .expect_err("ended");
    assert!(matches!(err, BackgroundError::NotRunning { .. }), "{err}");
}

#[tokio::test]
async fn a_stop_takes_down_what_the_command_started() {
    let bg = Arc::new(Background::default());
    let marker = tempfile::NamedTempFile::new().expect("temp");
    let path = marker.path().display().to_string();
    let script = format!("(sh -c 'sleep 30; echo late > {path}' &); sleep 30");
    let (info, _dir) = start(&bg, "s", &script);
    tokio::time::sleep(Duration::from_millis(200)).await;
    bg.stop("s", &info.id).await.expect("stops");
    let survivors = std::process::Command::new("pgrep")
        .args(["-f", &format!("echo late > {path}")])
        .output()
        .expect("pgrep");
    assert!(survivors.stdout.is_empty(), "orphans survived");
}

#[tokio::test]
async fn reads_are_bounded_and_report_what_was_skipped() {
    let bg = Arc::new(Background::default());
    let total = READ_CAP + 1000;
    let (info, _dir) = start(&bg, "s", &format!("head -c {total} /dev/zero | tr '\\0' x"));
    let read = bg
        .read("s", &info.id, Some(Duration::from_secs(10)))
        .await
        .expect("read");
    assert_eq!(read.text.len() as u64, READ_CAP);
    assert_eq!(read.skipped, 1000);
    assert_eq!(read.info.output_bytes, total);
}

#[tokio::test]
async fn a_session_cannot_run_too_many() {
    let bg = Arc::new(Background::default());
    let mut dirs = Vec::new();
    for _ in 0..MAX_RUNNING_PER_OWNER {
        dirs.push(start(&bg, "s", "sleep 30"));
    }
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("x");
    let file = log_file(&log);
    let cleaned = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&cleaned);
    let err = bg
        .start(
            "s",
            new_id(),
            "sleep 30",
            job("sleep 30", Duration::from_secs(60)),
            file,
            log,
            Some(Box::new(move || flag.store(true, Ordering::SeqCst))),
        )
        .expect_err("refused");
    assert!(matches!(err, BackgroundError::TooMany), "{err}");
    assert!(
        cleaned.load(Ordering::SeqCst),
        "what the sandbox set up for a refused command is cleaned up at once"
    );
    assert!(bg.check_room("other").is_ok());
    bg.stop_all();
}

/// Owners are callers, and a gateway has as many as there are user names: the total is bounded
/// too.
#[tokio::test]
async fn h21_13_every_owner_together_is_bounded() {
    let bg = Arc::new(Background::default());
    let mut dirs = Vec::new();
    for i in 0..MAX_RUNNING {
        dirs.push(start(&bg, &format!("user-{}", i / 8), "sleep 20"));
    }
    assert!(matches!(
        bg.check_room("someone-new"),
        Err(BackgroundError::TooManyInAll)
    ));
    bg.stop_all_and_wait().await;
    drop(dirs);
}
