//! A spinner on a terminal for long waits (a model thinking, a server starting, the first
//! migrations), drawn on stderr only when it is a terminal and never over a question being
//! asked there ([`ASKING`]).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Set while a question waits at the terminal (the binary's prompts set it), so a spinner does
/// not draw over it.
pub static ASKING: AtomicBool = AtomicBool::new(false);

/// A spinner on stderr while nothing else is shown (only on a terminal).
pub struct Spinner {
    on: Arc<AtomicBool>,
    /// Whether a frame is on the screen (to be cleared before other output).
    drawn: Arc<AtomicBool>,
    /// One writer at a time: the spinner's frames and the chat's lines must not interleave.
    screen: Arc<Mutex<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    /// A spinner showing `label`, drawing only when stderr is a terminal.
    pub fn new(label: &'static str) -> Self {
        let on = Arc::new(AtomicBool::new(false));
        let drawn = Arc::new(AtomicBool::new(false));
        let screen = Arc::new(Mutex::new(()));
        let task = std::io::stderr().is_terminal().then(|| {
            let (on, drawn, screen) = (Arc::clone(&on), Arc::clone(&drawn), Arc::clone(&screen));
            tokio::spawn(async move {
                let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
                let mut i = 0;
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if !on.load(Ordering::Acquire) || ASKING.load(Ordering::Acquire) {
                        continue;
                    }
                    let _screen = screen.lock().unwrap_or_else(PoisonError::into_inner);
                    if on.load(Ordering::Acquire) {
                        eprint!("\r{} {label}", frames[i % frames.len()]);
                        let _ = std::io::stderr().flush();
                        drawn.store(true, Ordering::Release);
                        i += 1;
                    }
                }
            })
        });
        Self {
            on,
            drawn,
            screen,
            task,
        }
    }

    /// Shows or hides the spinner.
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Release);
        if !on {
            let _screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
            self.clear();
        }
    }

    fn clear(&self) {
        if self.drawn.swap(false, Ordering::AcqRel) {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
    }

    /// Runs `write` with the spinner off the screen.
    pub fn write(&self, write: impl FnOnce()) {
        let _screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
        self.clear();
        write();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.clear();
    }
}

/// Runs `work` with a spinner showing `label` (on a terminal).
pub async fn while_waiting<T>(label: &'static str, work: impl Future<Output = T>) -> T {
    let spinner = Spinner::new(label);
    spinner.set(true);
    let out = work.await;
    spinner.set(false);
    out
}
