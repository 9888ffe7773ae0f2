//! The log in PostgreSQL: what the database itself refuses, one writer per
//! schema, and a database killed under load. Every other suite of this
//! crate also runs on PostgreSQL when `LEDGER_STORAGE` names a database
//! (`.ci/run` does it); these need one whatever the variable says, and
//! start their own cluster when it names none (`testkit::pg`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ledger::store::pg::{PgAt, PgStore};
use ledger::{Config, Ledger};
use testkit::sample_leaf;

/// A new log in a new schema of `url`, in a new data directory.
fn pg_dir(url: &str) -> (tempfile::TempDir, PgAt) {
    let dir = tempfile::tempdir().expect("tempdir");
    let at = PgAt {
        url: url.to_owned(),
        schema: ledger::store::pg::new_schema_name().expect("name"),
    };
    PgStore::create(&at).expect("create");
    ledger::store::pg::write_storage_file(dir.path(), &at).expect("storage file");
    (dir, at)
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect")
}

/// The statement fails, and PostgreSQL says the ledger's trigger refused it.
fn refused(c: &mut postgres::Client, sql: &str) {
    let e = c.batch_execute(sql).expect_err(sql);
    let msg = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    assert!(msg.starts_with("evidence ledger:"), "{sql}: {msg}");
}

#[test]
fn attack_the_database_refuses_to_change_or_remove_what_the_log_wrote() {
    let url = testkit::pg::url();
    let (dir, at) = pg_dir(&url);
    testkit::build_log(dir.path(), 20);
    let s = &at.schema;
    let mut c = client(&url);
    for sql in [
        format!("UPDATE {s}.entries SET leaf = 'forged' WHERE idx = 3"),
        format!("DELETE FROM {s}.entries WHERE idx = 19"),
        format!("TRUNCATE {s}.entries"),
        format!("UPDATE {s}.hashes SET hash = hash WHERE idx = 0"),
        format!("DELETE FROM {s}.hashes"),
        format!("UPDATE {s}.head SET size = 5"),
        format!("DELETE FROM {s}.head"),
        format!("TRUNCATE {s}.meta CASCADE"),
        format!("DELETE FROM {s}.key_slots"),
    ] {
        refused(&mut c, &sql);
    }
    // What was refused changed nothing: the log verifies at its size.
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, 20);
}

/// A schema created through an owner login, the log written through a
/// login granted only what a writer needs: the log works, and that login
/// can neither disable nor drop a trigger, nor change, delete or truncate
/// what the log wrote.
#[test]
fn attack_the_writers_login_cannot_switch_off_the_schemas_rules() {
    let owner = testkit::pg::url();
    let login = format!(
        "ledger_login_{}",
        &ledger::store::pg::new_schema_name().expect("name")[7..]
    );
    client(&owner)
        .batch_execute(&format!("CREATE ROLE {login} LOGIN"))
        .expect("role");
    let login_url = owner.replacen("postgres@", &format!("{login}@"), 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let at = PgAt {
        url: login_url.clone(),
        schema: ledger::store::pg::new_schema_name().expect("name"),
    };
    PgStore::create_owned(&at, &owner).expect("create through the owner");
    ledger::store::pg::write_storage_file(dir.path(), &at).expect("storage file");
    testkit::build_log(dir.path(), 30);
    let s = &at.schema;
    let mut c = client(&login_url);
    for sql in [
        format!("ALTER TABLE {s}.entries DISABLE TRIGGER ALL"),
        format!("DROP TRIGGER append_only ON {s}.entries"),
        format!("DELETE FROM {s}.entries WHERE idx = 3"),
        format!("TRUNCATE {s}.hashes"),
        format!(
            "CREATE OR REPLACE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE sql AS 'SELECT NULL'"
        ),
        "SET session_replication_role = replica".to_string(),
        format!("UPDATE {s}.entries SET leaf = 'forged' WHERE idx = 3"),
    ] {
        assert!(c.batch_execute(&sql).is_err(), "the login could: {sql}");
    }
    // What it may update, it may update only as the rules say.
    refused(&mut c, &format!("UPDATE {s}.head SET size = 2"));
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, 30);
}

#[test]
fn attack_a_private_key_can_only_be_overwritten_with_zeros() {
    let url = testkit::pg::url();
    let (dir, at) = pg_dir(&url);
    drop(Ledger::open(dir.path(), Config::default()).expect("open"));
    let s = &at.schema;
    let mut c = client(&url);
    c.batch_execute(&format!(
        "UPDATE {s}.key_slots SET next = 2; INSERT INTO {s}.private_keys VALUES (0, '\\x{k}'), (1, '\\x{k}')",
        k = "11".repeat(32)
    ))
    .expect("keys");
    refused(
        &mut c,
        &format!(
            "UPDATE {s}.private_keys SET key = '\\x{}' WHERE slot = 0",
            "22".repeat(32)
        ),
    );
    refused(
        &mut c,
        &format!("DELETE FROM {s}.private_keys WHERE slot = 0"),
    );
    refused(&mut c, &format!("UPDATE {s}.key_slots SET next = 1"));
    c.batch_execute(&format!(
        "UPDATE {s}.private_keys SET key = '\\x{}' WHERE slot = 1",
        "00".repeat(32)
    ))
    .expect("a key is shredded to zeros");
}

/// Two writers on one schema (two data directories, two `Ledger`s, as two
/// frontends would be) append at once: every index is given once, each
/// entry is where its writer was told, and each writer follows the other's
/// entries without writing (its head reaches the other's).
#[test]
fn two_writers_on_one_schema_append_at_once_and_follow_each_other() {
    let url = testkit::pg::url();
    let (dir, at) = pg_dir(&url);
    let other = tempfile::tempdir().expect("tempdir");
    ledger::store::pg::write_storage_file(other.path(), &at).expect("storage file");
    let a = Arc::new(Ledger::open(dir.path(), Config::default()).expect("open a"));
    let b = Arc::new(Ledger::open(other.path(), Config::default()).expect("open b"));
    let acked: Mutex<HashMap<u64, Vec<u8>>> = Mutex::default();
    std::thread::scope(|s| {
        for (w, log) in [(0, &a), (1, &b), (2, &a), (3, &b)] {
            let acked = &acked;
            s.spawn(move || {
                for i in 0..200 {
                    let leaf = format!("writer {w} entry {i}").into_bytes();
                    let got = log.append(leaf.clone()).expect("append");
                    let prev = acked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(got.index, leaf);
                    assert!(prev.is_none(), "index {} given twice", got.index);
                }
            });
        }
    });
    let acked = acked.into_inner().unwrap_or_else(|p| p.into_inner());
    assert_eq!(acked.len(), 800);
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.head() != b.head() || a.head().size != 800 {
        assert!(Instant::now() < deadline, "the writers did not converge");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (index, leaf) in &acked {
        assert_eq!(&b.entry(*index).expect("entry").leaf, leaf);
    }
    drop((a, b));
    let v = ledger::verify_dir(other.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, 800);
}

#[test]
fn a_log_created_through_ledger_storage_reopens_from_its_data_directory() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    let at = PgAt {
        url: url.clone(),
        schema: ledger::store::pg::new_schema_name().expect("name"),
    };
    PgStore::create(&at).expect("create");
    assert!(PgStore::create(&at).is_err(), "a schema is created once");
    ledger::store::pg::write_storage_file(dir.path(), &at).expect("storage file");
    testkit::build_log(dir.path(), 40);
    assert!(
        !dir.path().join(ledger::store::DB_FILE).exists(),
        "no data file beside a log in PostgreSQL"
    );
    let log = Ledger::open(dir.path(), Config::default()).expect("reopen");
    assert_eq!(log.head().size, 40);
    assert_eq!(log.entry(17).expect("entry").leaf, sample_leaf(17));
    let p = log.inclusion_proof(17, 40).expect("proof");
    assert!(!p.is_empty());
}

/// Four threads appending through one log until stopped, each
/// acknowledged index remembered once (a second acknowledgement of an index
/// fails the test); appends refused while the database is away are counted.
struct Writers {
    acked: Arc<Mutex<HashMap<u64, Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Writers {
    fn start(log: &Arc<Ledger>) -> Writers {
        let acked: Arc<Mutex<HashMap<u64, Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..4u64)
            .map(|t| {
                let (log, acked, stop) = (Arc::clone(log), Arc::clone(&acked), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut failed = 0u64;
                    for seq in 0u64.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let leaf = format!("t{t}-{seq}").into_bytes();
                        match log.append(leaf.clone()) {
                            Ok(a) => {
                                let prev = acked
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .insert(a.index, leaf);
                                assert!(prev.is_none(), "index {} acknowledged twice", a.index);
                            }
                            Err(_) => {
                                failed += 1;
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                    failed
                })
            })
            .collect();
        Writers {
            acked,
            stop,
            threads,
        }
    }

    fn count(&self) -> usize {
        self.acked.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Waits until `n` more appends are acknowledged.
    fn wait_for(&self, n: usize, what: &str) {
        let before = self.count();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.count() < before + n {
            assert!(Instant::now() < deadline, "no appends acknowledged {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the threads: every acknowledged append, and how many were
    /// refused.
    fn stop(self) -> (HashMap<u64, Vec<u8>>, u64) {
        self.stop.store(true, Ordering::SeqCst);
        let failed = self
            .threads
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .sum();
        let acked = self.acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (acked, failed)
    }
}

/// Every acknowledged append is at its index with its bytes, and the log
/// verifies.
fn all_there(dir: &std::path::Path, acked: &HashMap<u64, Vec<u8>>) {
    let log = Ledger::open(dir, Config::default()).expect("reopen");
    for (index, leaf) in acked {
        assert_eq!(&log.entry(*index).expect("acknowledged entry").leaf, leaf);
    }
    drop(log);
    let v = ledger::verify_dir(dir, &mut |_, _| {}).expect("verify");
    assert!(v.size >= acked.len() as u64);
}

/// SIGKILL the database three times while four threads append through one
/// log, restarting it each time: every append acknowledged before or after
/// a kill is at its index with its bytes, no index was acknowledged twice,
/// and the log verifies. Appends that fail while the database is down are
/// never acknowledged.
#[test]
fn the_database_killed_during_appends_loses_no_acknowledged_write() {
    let cluster = testkit::pg::Cluster::start();
    let (dir, _at) = pg_dir(&cluster.url);
    let log = Arc::new(Ledger::open(dir.path(), Config::default()).expect("open"));
    let writers = Writers::start(&log);
    for kill in 0..3 {
        writers.wait_for(50, &format!("before kill {kill}"));
        cluster.kill();
        std::thread::sleep(Duration::from_millis(200));
        cluster.run();
    }
    writers.wait_for(50, "after the last restart");
    let (acked, failed) = writers.stop();
    drop(log);
    all_there(dir.path(), &acked);
    eprintln!(
        "database killed 3 times: {} acknowledged, {failed} refused while it was down, 0 lost",
        acked.len()
    );
}

/// Failover: a primary with a synchronous streaming standby, the log's URL
/// naming both (`target_session_attrs=read-write`). Under four appending
/// threads the primary is SIGKILLed and the standby promoted: appends
/// resume through it, and every append acknowledged before or after is at
/// its index with its bytes on the promoted server, none twice, and the
/// log verifies there.
#[test]
fn a_synchronous_standby_promoted_after_the_primary_dies_holds_every_acknowledged_write() {
    let primary = testkit::pg::Cluster::start_with(&["synchronous_standby_names='*'"]);
    let standby = testkit::pg::Cluster::standby_of(&primary);
    let deadline = Instant::now() + Duration::from_secs(60);
    while primary.query("SELECT sync_state::text FROM pg_stat_replication") != ["sync"] {
        assert!(
            Instant::now() < deadline,
            "the standby never became synchronous"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port, standby.port
    );
    let (dir, _at) = pg_dir(&url);
    let log = Arc::new(Ledger::open(dir.path(), Config::default()).expect("open"));
    let writers = Writers::start(&log);
    writers.wait_for(200, "before the primary died");
    primary.kill();
    standby.promote();
    writers.wait_for(200, "after the standby was promoted");
    let (acked, failed) = writers.stop();
    drop(log);
    all_there(dir.path(), &acked);
    eprintln!(
        "failover: {} acknowledged, {failed} refused between the primary's death and the promotion, 0 lost",
        acked.len()
    );
}

/// A source whose entry was changed on disk is not moved: the re-append
/// finds the chain hash that does not follow, names the entry, and the
/// directory stays on its data file with no storage file written.
#[test]
fn attack_a_tampered_log_is_refused_by_migrate_and_stays_where_it_was() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    testkit::build_file_log(dir.path(), 300);
    testkit::RawDisk::open(dir.path()).set_leaf(123, b"forged");
    let to = ledger::migrate::Target::Postgres(PgAt {
        url,
        schema: ledger::store::pg::new_schema_name().expect("name"),
    });
    match ledger::migrate::migrate(dir.path(), to, &mut |_, _| {}) {
        Err(ledger::Error::Corrupt(c)) => {
            assert_eq!((c.index, c.kind), (123, ledger::CorruptionKind::Chain))
        }
        other => panic!("expected a corruption at 123, got {other:?}"),
    }
    assert_eq!(
        ledger::store::Location::of(dir.path()).expect("location"),
        Some(ledger::store::Location::File)
    );
}

/// A raw log moved to PostgreSQL and back keeps every leaf at its index,
/// its head, and its proofs.
#[test]
fn a_log_moved_to_postgres_and_back_keeps_its_head_and_entries() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    testkit::build_file_log(dir.path(), 5000);
    let head = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    let mut seen = Vec::new();
    let to = ledger::migrate::Target::Postgres(PgAt {
        url,
        schema: ledger::store::pg::new_schema_name().expect("name"),
    });
    let moved =
        ledger::migrate::migrate(dir.path(), to, &mut |d, t| seen.push((d, t))).expect("to pg");
    assert_eq!((moved.size, moved.root), (head.size, head.root));
    assert_eq!(seen.last(), Some(&(5000, 5000)));
    let log = Ledger::open(dir.path(), Config::default()).expect("open on pg");
    assert_eq!(log.head().root, head.root);
    assert_eq!(log.entry(4321).expect("entry").leaf, sample_leaf(4321));
    drop(log);
    let back = ledger::migrate::migrate(dir.path(), ledger::migrate::Target::File, &mut |_, _| {})
        .expect("back to the file");
    assert_eq!((back.size, back.root), (head.size, head.root));
    assert_eq!(
        ledger::store::Location::of(dir.path()).expect("location"),
        Some(ledger::store::Location::File)
    );
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!((v.size, v.root), (head.size, head.root));
}

/// A log sealed into segments moves to PostgreSQL whole (the segments'
/// entries, then the live data file's) and back into a data file, with its
/// head, entries and a full verify unchanged; the segments are kept aside
/// with the data file they belonged to.
#[test]
fn a_log_sealed_into_segments_moves_to_postgres_and_back() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let log = Ledger::open(
            dir.path(),
            Config {
                segment_entries: 400,
                ..testkit::file_config()
            },
        )
        .expect("open");
        for chunk in (0..1500u64).collect::<Vec<_>>().chunks(50) {
            let pending: Vec<_> = chunk
                .iter()
                .map(|&i| log.submit(sample_leaf(i)).expect("submit"))
                .collect();
            for p in pending {
                p.wait().expect("append");
            }
        }
    }
    let segments = dir.path().join(ledger::store::SEGMENTS_DIR);
    let sealed = std::fs::read_dir(&segments).expect("segments").count();
    assert!(sealed >= 3, "{sealed} segments");
    let head = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(head.size, 1500);
    let to = ledger::migrate::Target::Postgres(PgAt {
        url,
        schema: ledger::store::pg::new_schema_name().expect("name"),
    });
    let moved = ledger::migrate::migrate(dir.path(), to, &mut |_, _| {}).expect("to pg");
    assert_eq!((moved.size, moved.root), (head.size, head.root));
    assert!(!segments.exists(), "the segments were left in place");
    assert!(dir
        .path()
        .join(format!(
            "{}{}",
            ledger::store::SEGMENTS_DIR,
            ledger::migrate::MOVED_SUFFIX
        ))
        .exists());
    let log = Ledger::open(dir.path(), Config::default()).expect("open on pg");
    assert_eq!(log.head().root, head.root);
    for i in [0, 399, 400, 401, 1234, 1499] {
        assert_eq!(
            log.entry(i).expect("entry").leaf,
            sample_leaf(i),
            "entry {i}"
        );
    }
    drop(log);
    let back = ledger::migrate::migrate(dir.path(), ledger::migrate::Target::File, &mut |_, _| {})
        .expect("back to the file");
    assert_eq!((back.size, back.root), (head.size, head.root));
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert_eq!((v.size, v.root), (head.size, head.root));
}
