//! One proxy-mode command's network proxy ([`ProxySession`]) and what it refused
//! ([`NetworkReport`]); see [`super::network`] for the modes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::os::unix::fs::DirBuilderExt;

use talon_net::{Proxy, Violation, Violations};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::SandboxError;
use super::network::{Network, NetworkMode, NetworkPolicy};

/// How long [`ProxySession::finish`] waits for the proxy's connections to close.
const FINISH_WAIT: Duration = Duration::from_secs(2);
/// Distinct refused destinations listed in one report; the rest are counted.
const MAX_REPORTED: usize = 10;

/// What the proxy refused while a command ran, for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkReport {
    /// One line per refused destination, oldest first, repeats counted: "connection to
    /// evil.test:443 refused (not in the allowed domains)".
    pub refused: Vec<String>,
    /// What the sandbox can reach ([`NetworkMode::reach`]).
    pub reach: String,
}

impl NetworkReport {
    /// The report for `violations`, or `None` when nothing was refused.
    pub fn new(violations: Vec<Violation>, reach: String) -> Option<Self> {
        if violations.is_empty() {
            return None;
        }
        let mut distinct: Vec<(String, usize)> = Vec::new();
        for v in violations {
            let line = format!("connection to {} refused ({})", v.target, v.reason);
            match distinct.iter_mut().find(|(l, _)| *l == line) {
                Some((_, n)) => *n += 1,
                None => distinct.push((line, 1)),
            }
        }
        let more = distinct.len().saturating_sub(MAX_REPORTED);
        let mut refused: Vec<String> = distinct
            .into_iter()
            .take(MAX_REPORTED)
            .map(|(line, n)| match n {
                1 => line,
                n => format!("{line}, {n} times"),
            })
            .collect();
        if more > 0 {
            refused.push(format!("{more} more destinations refused"));
        }
        Some(Self { refused, reach })
    }
}

/// What [`plan`] decided for one command: the sandbox's network and, in proxy mode, the proxy
/// serving it.
pub(crate) type Plan = (Network, Option<ProxySession>);

/// The network of one sandboxed command under `mode`; in proxy mode this starts its proxy.
/// Fails closed: proxy mode without a usable helper program refuses the command.
pub(crate) fn plan(mode: &NetworkMode, helper: Option<&Path>) -> Result<Plan, SandboxError> {
    match mode {
        NetworkMode::Off => Ok((Network::None, None)),
        NetworkMode::Host => Ok((Network::Host, None)),
        NetworkMode::Proxy(policy) => {
            let helper = helper.ok_or_else(|| {
                SandboxError::Network(
                    "network = \"proxy\" needs Talon's sandbox helper (the talon binary), and none is \
                     configured"
                        .into(),
                )
            })?;
            if !helper.is_file() {
                return Err(SandboxError::Network(format!(
                    "the sandbox helper {} is not a file",
                    helper.display()
                )));
            }
            let session = ProxySession::start(policy, mode.reach())?;
            let network = Network::Proxy {
                socket: session.socket().to_path_buf(),
                helper: helper.to_path_buf(),
            };
            Ok((network, Some(session)))
        }
    }
}

/// One command's proxy: bound on a fresh socket in a private directory and served until the
/// command ends ([`ProxySession::stop`], or dropping it, which also removes the directory).
/// Its refusals stay readable after it stopped.
#[derive(Debug)]
pub struct ProxySession {
    dir: PathBuf,
    socket: PathBuf,
    cancel: CancellationToken,
    served: Mutex<Option<JoinHandle<()>>>,
    violations: Violations,
    reach: String,
}

/// A directory for one proxy's socket: `$TMPDIR` unless the socket path would be too long for
/// `sun_path` (108 bytes), then `/tmp`.
fn socket_dir() -> PathBuf {
    let name = format!("talon-net-{:016x}", crate::random_u64());
    let base = std::env::temp_dir();
    let room = base.as_os_str().len() + name.len() + "/proxy.sock".len() + 1;
    if room < 100 {
        base.join(name)
    } else {
        Path::new("/tmp").join(name)
    }
}

impl ProxySession {
    /// Binds a proxy for `policy` and starts serving it on the current Tokio runtime.
    fn start(policy: &NetworkPolicy, reach: String) -> Result<Self, SandboxError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            SandboxError::Network(format!("cannot start the network proxy ({what}): {e}"))
        };
        let handle = tokio::runtime::Handle::try_current().map_err(|e| fail("runtime", &e))?;
        let dir = socket_dir();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| fail(&dir.display().to_string(), &e))?;
        let socket = dir.join("proxy.sock");
        let proxy = Proxy::new(Arc::clone(policy.guard()));
        let bound = {
            let _runtime = handle.enter();
            proxy.bind(&socket)
        };
        let bound = match bound {
            Ok(bound) => bound,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(fail(&socket.display().to_string(), &e));
            }
        };
        let violations = bound.violations();
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let served = handle.spawn(async move {
            if let Err(e) = bound.serve(token).await {
                tracing::warn!(error = %e, "the sandbox's network proxy failed");
            }
        });
        Ok(Self {
            dir,
            socket,
            cancel,
            served: Mutex::new(Some(served)),
            violations,
            reach,
        })
    }

    /// The proxy's socket on the host.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the proxy refused since the previous report (background commands are read several
    /// times), or `None`.
    pub fn report(&self) -> Option<NetworkReport> {
        NetworkReport::new(self.violations.drain(), self.reach.clone())
    }

    /// Stops serving and removes the socket and its directory. Idempotent.
    pub fn stop(&self) {
        self.cancel.cancel();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// Stops the proxy once the command has ended, lets its connections close, and returns
    /// what it refused.
    pub async fn finish(&self) -> Option<NetworkReport> {
        self.cancel.cancel();
        let served = self
            .served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(served) = served {
            let _ = tokio::time::timeout(FINISH_WAIT, served).await;
        }
        self.stop();
        self.report()
    }
}

impl Drop for ProxySession {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use talon_net::{AddressPolicy, DomainPolicy, Guard, Pattern, StaticResolver};

    fn policy(allow: &[&str]) -> NetworkPolicy {
        NetworkPolicy::new(Guard::new(
            DomainPolicy::allow_only(Pattern::parse_list(allow).expect("patterns")),
            AddressPolicy::public_only(),
            Arc::new(StaticResolver::new()),
        ))
    }

    #[tokio::test]
    async fn proxy_mode_without_a_helper_fails_closed() {
        let mode = NetworkMode::Proxy(Arc::new(policy(&["x.test"])));
        let err = plan(&mode, None).expect_err("no helper");
        assert!(err.to_string().contains("sandbox helper"), "{err}");
        let err = plan(&mode, Some(Path::new("/nonexistent/talon"))).expect_err("missing");
        assert!(err.to_string().contains("not a file"), "{err}");
    }

    #[tokio::test]
    async fn a_session_serves_a_private_socket_and_reports_refusals() {
        let mode = NetworkMode::Proxy(Arc::new(policy(&["x.test"])));
        let helper = std::env::current_exe().expect("test binary");
        let (network, session) = plan(&mode, Some(&helper)).expect("starts");
        let session = session.expect("a proxy");
        let Network::Proxy { socket, .. } = &network else {
            panic!("{network:?}")
        };
        let dir = socket.parent().expect("dir").to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        let mode_bits = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode_bits & 0o777, 0o700);
        // A refused CONNECT through the socket, as a sandboxed curl would send it.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut client = tokio::net::UnixStream::connect(socket)
            .await
            .expect("connects");
        client
            .write_all(b"CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
            .await
            .expect("writes");
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer).await;
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 403"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        let report = session.finish().await.expect("a refusal");
        assert_eq!(
            report.refused,
            ["connection to evil.test:443 refused (not in the allowed domains)"]
        );
        assert!(
            report.reach.contains("these domains: x.test"),
            "{}",
            report.reach
        );
        assert!(!dir.exists(), "the private directory is removed");
    }

    #[test]
    fn reports_count_repeats_and_bound_their_length() {
        let v = |host: &str| Violation {
            host: host.into(),
            port: 80,
            target: format!("{host}:80"),
            reason: "not in the allowed domains".into(),
            at: std::time::SystemTime::now(),
        };
        assert_eq!(NetworkReport::new(Vec::new(), String::new()), None);
        let report = NetworkReport::new(vec![v("a.test"), v("a.test"), v("b.test")], "r".into())
            .expect("some");
        assert_eq!(
            report.refused,
            [
                "connection to a.test:80 refused (not in the allowed domains), 2 times",
                "connection to b.test:80 refused (not in the allowed domains)"
            ]
        );
        let many = (0..15).map(|i| v(&format!("h{i}.test"))).collect();
        let report = NetworkReport::new(many, "r".into()).expect("some");
        assert_eq!(report.refused.len(), MAX_REPORTED + 1);
        assert_eq!(report.refused[MAX_REPORTED], "5 more destinations refused");
    }
}
