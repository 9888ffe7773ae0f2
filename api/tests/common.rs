//! A real server on loopback for the HTTP tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use api::config::ServeConfig;
use api::demo::Poster;
use api::server::AppState;
use events::envelope::format_micros;
use events::model::*;
use testkit::world::{run, sample, score, task_class, T0, TASK_CLASS};
use verifier::client::Client;

/// Whether `cond` comes true within 30 s, asked every 10 ms: the bound for
/// anything these tests wait on, since a loaded 2-core CI machine runs many
/// servers at once.
pub fn within_30s(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..3000 {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cond()
}

/// A metric's value in a server's exposition.
pub fn metric(c: &Client, name: &str) -> f64 {
    let text = c.get("/metrics").expect("metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

pub struct TestServer {
    pub base: String,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub vkey: String,
    pub operator: ed25519_dalek::SigningKey,
    pub state: Arc<AppState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// `api::init::init` on a log kept in the redb data file.
pub fn init_file(dir: &std::path::Path) -> api::init::Initialized {
    api::init::init_with(
        dir,
        "test.example/log",
        "operator@test",
        None,
        None,
        ledger::Config {
            backend: Some(ledger::store::BackendFactory::file()),
            ..ledger::Config::default()
        },
    )
    .expect("init")
}

impl TestServer {
    /// A fresh, initialised data directory served with `tweak`ed settings.
    pub fn start(tweak: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let init = api::init::init(dir.path(), "test.example/log", "operator@test", None, None)
            .expect("init");
        Self::start_on(dir, init.log_key, init.operator, tweak)
    }

    /// [`TestServer::start`] on a log kept in the redb data file whatever
    /// `LEDGER_STORAGE` says: for the suites that read or change the data
    /// directory's files themselves.
    pub fn start_file(tweak: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let init = init_file(dir.path());
        Self::start_on(dir, init.log_key, init.operator, tweak)
    }

    /// A fresh, initialised data directory served on `backend`'s storage.
    pub fn start_with_storage(backend: ledger::store::BackendFactory) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let init = init_file(dir.path());
        Self::start_inner(
            dir,
            init.log_key,
            init.operator,
            |_| {},
            ledger::Config {
                backend: Some(backend),
                ..ledger::Config::default()
            },
        )
    }

    pub fn start_on(
        dir: tempfile::TempDir,
        log_key: anchors::LogKey,
        operator: ed25519_dalek::SigningKey,
        tweak: impl FnOnce(&mut ServeConfig),
    ) -> TestServer {
        Self::start_inner(dir, log_key, operator, tweak, ledger::Config::default())
    }

    fn start_inner(
        dir: tempfile::TempDir,
        log_key: anchors::LogKey,
        operator: ed25519_dalek::SigningKey,
        tweak: impl FnOnce(&mut ServeConfig),
        storage: ledger::Config,
    ) -> TestServer {
        let mut config = ServeConfig {
            data_dir: dir.path().to_path_buf(),
            ..ServeConfig::default()
        };
        tweak(&mut config);
        let vkey = log_key.verifier_key().to_owned();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        config.listen = addr;
        let state = Arc::new(
            AppState::open_with_storage(config, log_key, Arc::new(events::SystemClock), storage)
                .expect("state"),
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            rt.block_on(api::server::run(st, listener, async {
                let _ = rx.await;
            }))
            .expect("server");
        });
        let base = format!("http://{addr}");
        let s = TestServer {
            base,
            addr,
            dir,
            vkey,
            operator,
            state,
            stop: Some(tx),
            thread: Some(thread),
        };
        s.wait_ready();
        s
    }

    /// Waits up to 30 s for `/healthz`, then for the event state to be
    /// caught up and the lookups opened (writes are refused with 503 until
    /// both are).
    pub fn wait_ready(&self) {
        let c = self.client();
        assert!(
            within_30s(|| c.get("/healthz").map(|r| r.status).unwrap_or(0) == 200),
            "server did not start"
        );
        assert!(
            within_30s(|| !self.state.events.catching_up()),
            "the server did not catch up its event state"
        );
        assert!(
            within_30s(
                || self.state.events.ledger().lookups_state() != ledger::LookupsState::Opening
            ),
            "the server did not open its lookups"
        );
    }

    /// Whether `/readyz` answers 200 (the projection loaded and the startup
    /// verify passed), and the background check of derived state has
    /// passed (so recommendations are signed), within 30 s.
    pub fn verified_within_30s(&self) -> bool {
        let c = self.client();
        within_30s(|| {
            c.get("/readyz").map(|r| r.status).unwrap_or(0) == 200
                && metric(&c, "ledger_derived_check_status") == 1.0
        })
    }

    /// Waits up to 30 s for `/readyz`.
    pub fn wait_verified(&self) {
        assert!(self.verified_within_30s(), "server never became ready");
    }

    pub fn client(&self) -> Client {
        Client::new(&self.base, None)
    }

    pub fn poster<'a>(&self, client: &'a Client) -> Poster<'a> {
        Poster::new(client, self.vkey.clone(), self.operator.clone())
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Stops the server (which saves its derived state), runs `between` on
    /// the closed data directory, and serves it again with the same keys.
    pub fn restart(self, between: impl FnOnce(&std::path::Path)) -> TestServer {
        let key_text = std::fs::read_to_string(self.path().join("log.key")).expect("key");
        let operator = self.operator.clone();
        let dir = self.stop();
        between(dir.path());
        TestServer::start_on(
            dir,
            anchors::LogKey::from_private(&key_text).expect("key"),
            operator,
            |_| {},
        )
    }

    /// Stops the server and returns its data directory.
    pub fn stop(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The start-up check runs on its own thread and may still hold the
        // state (and the open data file) after the server stopped: wait
        // until this is the last holder, so the caller can reopen the file.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while Arc::strong_count(&self.state) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let dir = tempfile::tempdir().expect("placeholder");
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Enrols the actors, registers the task class, adds three held-out cases
/// and opens run-1.
pub fn seed(s: &TestServer, c: &Client) {
    seed_with(&mut s.poster(c));
}

/// [`seed`], posting through `p`.
pub fn seed_with(p: &mut Poster<'_>) {
    for (name, role) in [
        ("harness", Role::Harness),
        ("curator-a", Role::Curator),
        ("curator-b", Role::Curator),
        ("promotion-gate", Role::PromotionGate),
    ] {
        p.enrol(name, role).expect("enrol");
    }
    p.post(
        "operator",
        Event::TaskClassRegistered(task_class(TASK_CLASS)),
    )
    .expect("register");
    for i in 1..=3 {
        let (a, b) = (p.key("curator-a"), p.key("curator-b"));
        let case = sample().case_added(
            TASK_CLASS,
            &format!("case-{i}"),
            "held-out",
            &format_micros(T0),
            (&a, &b),
        );
        p.post("curator-a", Event::CaseAdded(case)).expect("case");
    }
    p.post(
        "harness",
        Event::RunStarted(run("run-1", Isolation::Microvm)),
    )
    .expect("run");
    for i in 1..=3 {
        p.post(
            "harness",
            Event::ScoreRecorded(score(&format!("case-{i}"), 0.95)),
        )
        .expect("score");
    }
}

/// Starts the real `ledger serve` binary on a free loopback port with
/// `args`, and waits until it answers `/healthz` (not until it is ready).
pub fn spawn_ledger_live(args: &[&str]) -> (std::process::Child, String) {
    spawn_ledger_live_with(args, |_| {})
}

/// [`spawn_ledger_live`], with the command changed by `configure` before it
/// starts (its environment, where its log goes).
pub fn spawn_ledger_live_with(
    args: &[&str],
    configure: impl FnOnce(&mut std::process::Command),
) -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ledger"));
    command
        .args(["serve", "--listen", &listen])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    configure(&mut command);
    let mut child = command.spawn().expect("serve");
    let base = format!("http://{listen}");
    let client = Client::new(&base, None);
    if within_30s(|| client.get("/healthz").map(|r| r.status).unwrap_or(0) == 200) {
        return (child, base);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not start");
}

/// Starts the real `ledger serve` binary on a free loopback port with
/// `args`, and waits until it is ready (its startup verification passed).
pub fn spawn_ledger(args: &[&str]) -> (std::process::Child, String) {
    let (child, base) = spawn_ledger_live(args);
    ready_within_30s(child, base)
}

/// Waits until the server `child` at `base` is ready (its startup
/// verification passed), killing it and failing otherwise.
pub fn ready_within_30s(
    mut child: std::process::Child,
    base: String,
) -> (std::process::Child, String) {
    let client = Client::new(&base, None);
    if within_30s(|| client.get("/readyz").map(|r| r.status).unwrap_or(0) == 200) {
        return (child, base);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the server did not become ready (startup verification failed?)");
}

/// Runs `git -C dir args` with a test identity, failing the test if git
/// fails; returns its standard output.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@localhost")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@localhost")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Serves `app` on a free loopback port on `rt`; returns its base URL.
pub fn serve_on_loopback(rt: &tokio::runtime::Runtime, app: axum::Router) -> String {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Runs the `ledger` program with `args` and waits for it.
pub fn run_ledger(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(args)
        .output()
        .expect("run ledger")
}

/// [`run_ledger`] with `LEDGER_STORAGE` unset: a data directory `init`
/// makes keeps its log in the redb file (for the suites that copy or
/// change the data file itself).
pub fn run_ledger_file(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ledger"))
        .args(args)
        .env_remove(ledger::store::STORAGE_ENV)
        .output()
        .expect("run ledger")
}

/// Stops a server started by [`spawn_ledger`] as `systemctl stop` would
/// (SIGTERM), and waits for it.
pub fn stop_ledger(mut child: std::process::Child) {
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}
