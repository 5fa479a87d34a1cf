//! PostgreSQL for the tests that run Talon on it: a fresh schema per test on the database
//! `TALON_TEST_DATABASE_URL` names (`.ci/run` sets it; where it is unset the PostgreSQL variants
//! are not run, and say so).

/// The secrets' key of every Talon process on a test schema: gateways on one database share it.
const KEY: &str = "2222222222222222222222222222222222222222222222222222222222222222";

/// A fresh schema on the test database, dropped when the value is.
pub struct Schema {
    url: String,
    pub name: String,
}

impl Schema {
    pub fn new(url: &str, tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Self {
            url: url.to_string(),
            name: format!("t_{tag}_{nanos}"),
        }
    }

    /// What a Talon process on this schema needs: the database, the schema, the shared key.
    pub fn env(&self) -> [(&'static str, &str); 3] {
        self.env_at(&self.url)
    }

    /// [`Schema::env`] reaching the database at `url` (a [`Relay`]'s).
    pub fn env_at<'a>(&'a self, url: &'a str) -> [(&'static str, &'a str); 3] {
        [
            ("TALON_DATABASE_URL", url),
            ("TALON_DATABASE__SCHEMA", self.name.as_str()),
            ("TALON_ENCRYPTION_KEY", KEY),
        ]
    }

    /// The same as `talon.toml` lines (the key stays in the environment: commands without it
    /// on this schema keep their own in the data directory, as a single process does).
    pub fn toml(&self) -> String {
        format!(
            "[database]\nurl = \"{}\"\nschema = \"{}\"\n",
            self.url, self.name
        )
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            if let Ok(store) =
                talon_store::Store::connect(&talon_store::StoreConfig::url(url)).await
            {
                let _ = store
                    .execute_admin(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                    .await;
            }
        });
    }
}

/// The test database, or `None` (said on stderr) where none is configured.
pub fn database_url() -> Option<String> {
    let url = std::env::var("TALON_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("TALON_TEST_DATABASE_URL is not set; PostgreSQL variant not run here");
    }
    url
}

/// A gateway home whose agents talk to `mock` (OpenAI's format), with one-second leases so a
/// gateway that dies is taken over quickly.
pub fn gateway_home(mock: &super::chat::Mock) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[tools]\npermission_mode = \"bypassPermissions\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n[subagents]\nlease_seconds = 1\n",
            mock.url
        ),
    )
    .unwrap();
    home
}

/// Waits (at most a minute) until `done` holds.
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A TCP relay in front of the test database that can cut every connection and refuse new ones
/// (an outage of the network between a gateway and PostgreSQL), and restore them.
pub struct Relay {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    live: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    /// Relays 127.0.0.1:<port> to the database server of `url` (its host and port).
    pub fn to(url: &str) -> Self {
        let rest = url.split("://").nth(1).unwrap_or(url);
        let host_port = rest
            .split('@')
            .next_back()
            .unwrap_or(rest)
            .split(['/', '?'])
            .next()
            .unwrap_or("127.0.0.1:5432");
        let target = if host_port.contains(':') {
            host_port.to_string()
        } else {
            format!("{host_port}:5432")
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (cut_in, live_in) = (cut.clone(), live.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if cut_in.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let mut streams = live_in.lock().unwrap();
                streams.push(client.try_clone().unwrap());
                streams.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Self { port, cut, live }
    }

    /// `url` with its host and port replaced by the relay's.
    pub fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (user, after) = rest.split_once('@').map_or(("", rest), |(u, a)| (u, a));
        let path = &after[after.find(['/', '?']).unwrap_or(after.len())..];
        let at = if user.is_empty() { "" } else { "@" };
        format!("{scheme}://{user}{at}127.0.0.1:{}{path}", self.port)
    }

    /// Cuts every connection through the relay and refuses new ones until [`Relay::restore`].
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.live.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
