//! Storage faults, injected under redb through a fault-injecting backend
//! (these logs are in the redb file whatever `LEDGER_STORAGE` says):
//! a failed fsync, a failed write, ENOSPC, and a failure reported after the
//! data was made durable. In every case:
//! - no write whose commit failed is acknowledged;
//! - reads go on during the fault: redb latches after an I/O error and cannot
//!   be reopened until the fault clears, so the log serves verified reads
//!   (entries, inclusion and consistency proofs, the head) from a read-only
//!   view of the last durable commit, and says so in `Stats::read_only`;
//! - writes recover when the fault clears, and the log verifies;
//! - a write that reported failure but persisted is found again by an
//!   idempotent retry, never appended twice.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use ledger::store::BackendFactory;
use ledger::{AppendError, Config, Error, Ledger};
use redb::StorageBackend;

const OK: u8 = 0;
const FAIL_SYNC: u8 = 1;
const FAIL_WRITE: u8 = 2;
const ENOSPC: u8 = 3;
const SYNC_THEN_FAIL: u8 = 4;

#[derive(Debug)]
struct Faulty {
    inner: redb::backends::FileBackend,
    mode: Arc<AtomicU8>,
    syncs: std::sync::atomic::AtomicU32,
}

fn err(kind: std::io::ErrorKind, what: &str) -> std::io::Error {
    std::io::Error::new(kind, format!("injected: {what}"))
}

impl StorageBackend for Faulty {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        if self.mode.load(Ordering::SeqCst) == ENOSPC {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        match self.mode.load(Ordering::SeqCst) {
            FAIL_SYNC => Err(err(std::io::ErrorKind::Other, "fsync failed")),
            SYNC_THEN_FAIL => {
                // redb commits in two phases: data, fsync, header, fsync. The
                // second fsync makes the commit durable; report it as failed.
                self.inner.sync_data()?;
                if self.syncs.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
                    Err(err(
                        std::io::ErrorKind::Other,
                        "fsync reported failure after persisting",
                    ))
                } else {
                    Ok(())
                }
            }
            _ => self.inner.sync_data(),
        }
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        match self.mode.load(Ordering::SeqCst) {
            FAIL_WRITE => Err(err(std::io::ErrorKind::Other, "write failed")),
            ENOSPC => Err(std::io::Error::from_raw_os_error(28)),
            _ => self.inner.write(offset, data),
        }
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
}

fn faulty(mode: &Arc<AtomicU8>) -> Config {
    let mode = Arc::clone(mode);
    Config {
        backend: Some(BackendFactory(Arc::new(move |path: &std::path::Path| {
            let inner = testkit::faults::file_backend(path)?;
            Ok(Box::new(Faulty {
                inner,
                mode: Arc::clone(&mode),
                syncs: std::sync::atomic::AtomicU32::new(0),
            }) as Box<dyn StorageBackend>)
        }))),
        ..Config::default()
    }
}

/// A write, a fault, writes refused and reads served, the fault cleared,
/// writes again, and a clean verify.
fn fault_round_trip(fault: u8) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = Arc::new(AtomicU8::new(OK));
    let log = Ledger::open(dir.path(), faulty(&mode)).expect("open");
    for i in 0..10u64 {
        log.append(testkit::sample_leaf(i)).expect("append");
    }
    let before = log.head();
    mode.store(fault, Ordering::SeqCst);
    for i in 0..3u64 {
        match log.append(format!("during fault {i}").into_bytes()) {
            Err(Error::Storage(_) | Error::Busy) => {}
            other => {
                panic!("fault {fault}: a write was acknowledged while storage failed: {other:?}")
            }
        }
    }
    // While the fault lasts, every read is served, and checks out against
    // the head from before the fault.
    assert!(
        log.stats().read_only.load(Ordering::SeqCst),
        "fault {fault}: the log does not report that it is read-only"
    );
    assert_eq!(log.head(), before, "fault {fault}: the head moved");
    for i in 0..before.size {
        let e = log.entry(i).unwrap_or_else(|e| {
            panic!("fault {fault}: entry {i} not served during the fault: {e}")
        });
        assert_eq!(e.leaf, testkit::sample_leaf(i), "fault {fault}: entry {i}");
        let proof = log
            .inclusion_proof(i, before.size)
            .unwrap_or_else(|e| panic!("fault {fault}: no inclusion proof for {i}: {e}"));
        ledger::merkle::verify_inclusion(&e.leaf_hash, i, before.size, &proof, &before.root)
            .unwrap_or_else(|e| panic!("fault {fault}: bad inclusion proof for {i}: {e:?}"));
    }
    let consistency = log
        .consistency_proof(4, before.size)
        .unwrap_or_else(|e| panic!("fault {fault}: no consistency proof: {e}"));
    let old_root = log.root_at(4).expect("root at 4");
    ledger::merkle::verify_consistency(4, &old_root, before.size, &before.root, &consistency)
        .unwrap_or_else(|e| panic!("fault {fault}: bad consistency proof: {e:?}"));
    // Writes stay refused while the fault lasts, and the reads go on after.
    assert!(log.append(b"still failing".to_vec()).is_err());
    assert_eq!(log.entry(3).expect("entry 3").leaf, testkit::sample_leaf(3));
    mode.store(OK, Ordering::SeqCst);
    let mut recovered = None;
    for _ in 0..100 {
        match log.append(b"after the fault".to_vec()) {
            Ok(a) => {
                recovered = Some(a);
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    let a = recovered.unwrap_or_else(|| panic!("fault {fault}: writes never recovered"));
    assert!(
        !log.stats().read_only.load(Ordering::SeqCst),
        "fault {fault}: still read-only after recovering"
    );
    assert!(
        a.index >= before.size,
        "fault {fault}: the log went backwards"
    );
    drop(log);
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verifies after the fault");
    assert_eq!(v.size, a.index + 1);
}

#[test]
fn failed_fsync_is_never_acknowledged_and_recovers() {
    fault_round_trip(FAIL_SYNC);
}

#[test]
fn failed_write_is_never_acknowledged_and_recovers() {
    fault_round_trip(FAIL_WRITE);
}

#[test]
fn enospc_is_never_acknowledged_and_recovers() {
    fault_round_trip(ENOSPC);
}

#[test]
fn failure_after_persisting_is_found_again_by_an_idempotent_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = Arc::new(AtomicU8::new(OK));
    let clock = Arc::new(events::ManualClock::new(testkit::world::T0));
    let key = testkit::world::key("ledger");
    let log = events::EventLog::open(dir.path(), faulty(&mode), key, clock).expect("open");
    for env in events::genesis_envelopes(
        &testkit::world::key("operator"),
        "op",
        &testkit::world::key("ledger").verifying_key(),
        "2026-11-01T00:00:00Z",
    ) {
        log.append(&env).expect("genesis");
    }
    let payload = events::Payload {
        schema: events::model::SCHEMA_VERSION,
        id: "enrol-harness-once".into(),
        signer: events::key_id(&testkit::world::key("operator").verifying_key()),
        issued_at: "2026-11-01T00:00:00Z".into(),
        event: events::Event::PrincipalEnrolled(events::model::PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(
                &testkit::world::key("harness").verifying_key(),
            ),
            identity: "harness".into(),
            identity_name: None,
            roles: vec![events::Role::Harness],
        }),
    };
    let env = events::envelope::sign_write(&testkit::world::key("operator"), payload.clone());
    mode.store(SYNC_THEN_FAIL, Ordering::SeqCst);
    match log.append(&env) {
        Err(AppendError::Ledger(_)) => {}
        other => panic!("a commit that reported failure was acknowledged: {other:?}"),
    }
    mode.store(OK, Ordering::SeqCst);
    // The client retries the same envelope: the entry that did persist is
    // returned, and nothing is appended twice.
    let mut receipt = None;
    for _ in 0..100 {
        match log.append(&env) {
            Ok(r) => {
                receipt = Some(r);
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    let r = receipt.expect("the retry succeeds");
    assert!(
        r.existing,
        "the write had persisted: the retry must find it, not append it again"
    );
    assert_eq!(log.ledger().head().size, 3);
    let replayed = log.replay_state().expect("replay");
    assert!(replayed.principals.contains_key(&events::key_id(
        &testkit::world::key("harness").verifying_key()
    )));
    // The door's index of handles kept what persisted: the same identity
    // under a new handle is refused, as after a commit that reported
    // success.
    let again = events::Payload {
        schema: events::model::SCHEMA_VERSION,
        id: "enrol-harness-twice".into(),
        signer: events::key_id(&testkit::world::key("operator").verifying_key()),
        issued_at: "2026-11-01T00:00:00Z".into(),
        event: events::Event::PrincipalEnrolled(events::model::PrincipalEnrolled {
            sigstore: None,
            public_key: events::envelope::public_key_b64(
                &testkit::world::key("harness-2").verifying_key(),
            ),
            identity: "harness".into(),
            identity_name: None,
            roles: vec![events::Role::Harness],
        }),
    };
    let env = events::envelope::sign_write(&testkit::world::key("operator"), again);
    match log.append(&env) {
        Err(AppendError::Rejected { reason, .. }) => {
            assert_eq!(
                reason.code,
                events::RejectCode::HandleValueBound,
                "{reason}"
            )
        }
        other => panic!("a second handle for one identity was not refused: {other:?}"),
    }
}

/// A reader holding the read-only view when the fault clears: the reopen
/// waits for it (redb may reuse pages it reads once writes resume), so the
/// reader's view stays whole, and writes resume once it is done.
#[test]
fn a_reader_of_the_read_only_view_is_never_written_under() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mode = Arc::new(AtomicU8::new(OK));
    let log = Arc::new(Ledger::open(dir.path(), faulty(&mode)).expect("open"));
    for i in 0..20u64 {
        log.append(testkit::sample_leaf(i)).expect("append");
    }
    mode.store(FAIL_WRITE, Ordering::SeqCst);
    assert!(log.append(b"refused".to_vec()).is_err());
    assert!(log.stats().read_only.load(Ordering::SeqCst));
    let snap = log.snapshot().expect("a snapshot of the read-only view");
    mode.store(OK, Ordering::SeqCst);
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            (0..50u64)
                .map(|i| log.append(format!("after {i}").into_bytes()))
                .filter(Result::is_ok)
                .count()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Nothing was written while the reader held the view.
    assert_eq!(log.head().size, 20, "a write landed under a live reader");
    for i in 0..20u64 {
        let stored = snap.entry(i).expect("read").expect("present");
        assert_eq!(stored.leaf, testkit::sample_leaf(i));
    }
    drop(snap);
    let written = writer.join().expect("writer");
    assert!(
        written > 0,
        "writes never resumed after the reader finished"
    );
    assert!(!log.stats().read_only.load(Ordering::SeqCst));
    let log = Arc::try_unwrap(log).ok().expect("sole owner");
    drop(log);
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verifies");
    assert_eq!(v.size, 20 + written as u64);
}

#[test]
fn attack_storage_engine_panic_on_read_or_write_is_a_typed_error_and_the_log_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    testkit::build_file_log(dir.path(), 4000);
    let armed = Arc::new(AtomicU8::new(OK));
    // A fresh open reads O(log n) pages (redb's debug page walk is off,
    // Cargo.toml): the entries are not in redb's cache.
    let log = Ledger::open(
        dir.path(),
        Config {
            backend: Some(testkit::faults::panicky(&armed)),
            ..Config::default()
        },
    )
    .expect("open");
    let size = log.head().size;
    armed.store(testkit::faults::PANIC_READ, Ordering::SeqCst);
    // Reads that redb's cache can answer do not reach the storage engine;
    // every one that does gets a typed error, never a panic or a hang.
    let mut contained = 0;
    for read in [
        log.entry(5).map(|_| ()),
        log.entries(1000, 1020).map(|_| ()),
        log.find_leaf(&ledger::leaf_hash(&testkit::sample_leaf(2000)))
            .map(|_| ()),
        log.entry(3500).map(|_| ()),
        log.inclusion_proof(3000, size).map(|_| ()),
    ] {
        match read {
            Ok(()) => {}
            Err(Error::Corrupt(c)) => {
                assert!(c.to_string().contains("storage engine"), "{c}");
                contained += 1;
            }
            Err(other) => panic!("a storage panic on a read was not contained: {other:?}"),
        }
    }
    assert!(contained > 0, "no read reached the storage engine");
    armed.store(testkit::faults::PANIC_WRITE, Ordering::SeqCst);
    match log.append(b"during the panics".to_vec()) {
        Err(Error::Corrupt(_) | Error::Storage(_) | Error::Busy) => {}
        other => panic!("a storage panic on a write was acknowledged or lost: {other:?}"),
    }
    armed.store(OK, Ordering::SeqCst);
    // The committer lives on: writes resume, and reads are whole.
    let mut resumed = None;
    for _ in 0..100 {
        match log.append(b"after the panics".to_vec()) {
            Ok(a) => {
                resumed = Some(a);
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    let a = resumed.expect("writes never resumed after the storage engine panicked");
    assert!(log.committer_running());
    assert_eq!(a.index, size, "nothing of the panicked batch was appended");
    assert_eq!(log.entry(5).expect("entry").leaf, testkit::sample_leaf(5));
    drop(log);
    ledger::verify_dir(dir.path(), &mut |_, _| {}).expect("verifies after the panics");
}
