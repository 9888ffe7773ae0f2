//! A PostgreSQL server for the suites that need one.
//!
//! [`url`] is the database `LEDGER_STORAGE` names when it names one (CI
//! runs the suites once more with it set, so that every log they open is
//! kept in PostgreSQL); otherwise a throwaway cluster of this test process,
//! made with the distribution's `initdb` and started on a free loopback
//! port, owned by the `postgres` user when the tests run as root (initdb
//! refuses root). It stops when the test process ends: the server is
//! started under a shell that waits on a pipe from this process, and kills
//! the server once the pipe closes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A cluster this process started.
pub struct Cluster {
    pub url: String,
    pub data: PathBuf,
    pub port: u16,
    dir: PathBuf,
    /// Server options (`-c name=value`) beyond the ones every cluster gets.
    options: Vec<String>,
    guard: Mutex<Option<Child>>,
}

static SHARED: OnceLock<String> = OnceLock::new();

/// A PostgreSQL database the suites may create schemas in.
pub fn url() -> String {
    SHARED
        .get_or_init(|| {
            if let Some(u) = std::env::var(ledger::store::STORAGE_ENV)
                .ok()
                .filter(|u| ledger::store::pg::is_postgres_url(u))
            {
                return u;
            }
            let c = Cluster::start();
            let url = c.url.clone();
            // Lives as long as the process; the guard stops it then.
            std::mem::forget(c);
            url
        })
        .clone()
}

fn as_postgres(cmd: &str) -> Command {
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", cmd]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", cmd]);
        c
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory of the server binaries (`initdb`, `postgres`, `pg_ctl`).
pub fn bin_dir() -> PathBuf {
    if let Ok(d) = std::env::var("PG_BIN") {
        return PathBuf::from(d);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    found.sort();
    found
        .pop()
        .filter(|d| d.join("initdb").exists())
        .expect("PostgreSQL server binaries: install the postgresql package (bash .ci/run does), or set PG_BIN")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Cluster {
    /// Makes and starts a new cluster in a directory of its own.
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// [`Cluster::start`] with more server options (`name=value`).
    pub fn start_with(options: &[&str]) -> Cluster {
        let dir = new_dir();
        let data = dir.join("data");
        let init = format!(
            "{}/initdb -D {} -U postgres --auth=trust -E UTF8 --no-sync >/dev/null",
            bin_dir().display(),
            data.display()
        );
        let st = as_postgres(&init).status().expect("initdb");
        assert!(st.success(), "initdb failed");
        Cluster::serve(dir, options)
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`: it follows the
    /// primary's WAL, and a primary whose `synchronous_standby_names`
    /// matches it waits for its flush before a commit returns).
    pub fn standby_of(primary: &Cluster) -> Cluster {
        let dir = new_dir();
        let data = dir.join("data");
        let backup = format!(
            "{}/pg_basebackup -h 127.0.0.1 -p {} -U postgres -D {} -R -X stream -c fast --no-sync",
            bin_dir().display(),
            primary.port,
            data.display()
        );
        let st = as_postgres(&backup).status().expect("pg_basebackup");
        assert!(st.success(), "pg_basebackup failed");
        Cluster::serve(dir, &["hot_standby=on"])
    }

    fn serve(dir: PathBuf, options: &[&str]) -> Cluster {
        let port = free_port();
        let c = Cluster {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            data: dir.join("data"),
            port,
            dir,
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            guard: Mutex::new(None),
        };
        c.run();
        c
    }

    /// Promotes a standby to primary and waits until it takes writes.
    pub fn promote(&self) {
        let cmd = format!(
            "{}/pg_ctl promote -w -D {} >/dev/null",
            bin_dir().display(),
            self.data.display()
        );
        let st = as_postgres(&cmd).status().expect("pg_ctl promote");
        assert!(st.success(), "pg_ctl promote failed");
    }

    /// The answer to one query with one text column, row by row.
    pub fn query(&self, sql: &str) -> Vec<String> {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.query(sql, &[])
            .expect("query")
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect()
    }

    /// Starts the server on this cluster's data directory, stopped by a
    /// SIGKILL when [`Cluster::kill`] is called or this process ends.
    pub fn run(&self) {
        let extra: String = self.options.iter().map(|o| format!(" -c {o}")).collect();
        let server = format!(
            "{}/postgres -D {} -p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=300 -c shared_buffers=32MB{extra}",
            bin_dir().display(),
            self.data.display(),
            self.port,
            self.dir.display()
        );
        // `read` returns when this process's end of the pipe closes (then
        // the data directory goes too) or when `kill` writes to it. The
        // shell reaps the server it killed: a zombie would still own the
        // pid in `postmaster.pid`, and the next start would refuse.
        let script = format!(
            "setsid {server} >>{log} 2>&1 & pid=$!; read cmd; kill -9 -$pid 2>/dev/null; wait $pid 2>/dev/null; [ \"$cmd\" = k ] || {{ sleep 1; rm -rf {data}; }}",
            log = self.dir.join("server.log").display(),
            data = self.data.display()
        );
        let child = as_postgres(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start postgres");
        *self.guard.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        self.wait_ready();
    }

    /// Kills the server and every backend it started with SIGKILL (a crash:
    /// no shutdown checkpoint; the server runs in a process group of its
    /// own) and waits until it is gone.
    pub fn kill(&self) {
        let child = self.guard.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = child {
            if let Some(stdin) = child.stdin.as_mut() {
                // "k": kill only; the data directory stays for a restart.
                let _ = stdin.write_all(b"k\n");
            }
            drop(child.stdin.take());
            let _ = child.wait();
        }
        let pid_file = self.data.join("postmaster.pid");
        let deadline = Instant::now() + Duration::from_secs(30);
        while pid_file.exists() && Instant::now() < deadline {
            // The postmaster's children go when it does; its pid file stays
            // after a SIGKILL, so wait for the port to close instead.
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
                if c.batch_execute("SELECT 1").is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not start: {}",
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The cluster's own directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A new directory for a cluster, owned by the user its server runs as.
fn new_dir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("ledger-pg-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("cluster dir");
    chown_to_postgres(&dir);
    dir
}

fn chown_to_postgres(dir: &Path) {
    if !running_as_root() {
        return;
    }
    let st = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir)
        .status()
        .expect("chown");
    assert!(st.success(), "chown {}", dir.display());
}
