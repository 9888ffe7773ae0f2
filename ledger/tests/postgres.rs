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

#[test]
fn a_second_writer_on_one_schema_is_refused_at_open_and_a_reader_is_not() {
    let url = testkit::pg::url();
    let (dir, at) = pg_dir(&url);
    let first = Ledger::open(dir.path(), Config::default()).expect("open");
    first.append(sample_leaf(0)).expect("append");
    // Another data directory pointed at the same schema.
    let other = tempfile::tempdir().expect("tempdir");
    ledger::store::pg::write_storage_file(other.path(), &at).expect("storage file");
    let e = Ledger::open(other.path(), Config::default())
        .err()
        .expect("a second writer is refused");
    assert!(e.to_string().contains("open to write"), "{e}");
    // Reading (verify) needs no write lock.
    let v = ledger::verify_dir(other.path(), &mut |_, _| {}).expect("verify");
    assert_eq!(v.size, 1);
    // The lock goes with the writer.
    drop(first);
    let second = Ledger::open(other.path(), Config::default()).expect("open after the first");
    assert_eq!(second.append(sample_leaf(1)).expect("append").index, 1);
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
    let acked: Arc<Mutex<HashMap<u64, Vec<u8>>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let (log, acked, stop) = (Arc::clone(&log), Arc::clone(&acked), Arc::clone(&stop));
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
    let count = |acked: &Arc<Mutex<HashMap<u64, Vec<u8>>>>| {
        acked.lock().unwrap_or_else(|p| p.into_inner()).len()
    };
    for kill in 0..3 {
        let before = count(&acked);
        let deadline = Instant::now() + Duration::from_secs(60);
        while count(&acked) < before + 50 {
            assert!(
                Instant::now() < deadline,
                "no appends acknowledged before kill {kill}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        cluster.kill();
        std::thread::sleep(Duration::from_millis(200));
        cluster.run();
    }
    let before = count(&acked);
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&acked) < before + 50 {
        assert!(
            Instant::now() < deadline,
            "appends did not resume after the last restart"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    let failed: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    let acked = Arc::try_unwrap(acked)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_else(|a| a.lock().unwrap_or_else(|p| p.into_inner()).clone());
    drop(log);
    let log = Ledger::open(dir.path(), Config::default()).expect("reopen");
    for (index, leaf) in &acked {
        assert_eq!(&log.entry(*index).expect("acknowledged entry").leaf, leaf);
    }
    drop(log);
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verify");
    assert!(v.size >= acked.len() as u64);
    eprintln!(
        "database killed 3 times: {} acknowledged, {failed} refused while it was down, 0 lost",
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
