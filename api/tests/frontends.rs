//! Several frontends on one log kept in PostgreSQL: two real `ledger serve`
//! processes, the second joined with `ledger init --join`, each taking
//! writes. Every batch is decided under the head row's lock after catching
//! up with what the other committed, so the domain rules see exactly the
//! sequenced history, no index is given twice, and the two serve one log.

mod common;

use std::collections::HashSet;

use api::demo::Poster;
use common::{run_ledger as run, spawn_ledger, stop_ledger, within_30s};
use events::model::{Event, Isolation, Role};
use verifier::client::Client;

/// Two data directories on one new schema: `a` made by `init --storage`,
/// `b` joined to it. Returns the directory, the verifier key and the
/// operator's key.
fn two_frontends(url: &str) -> (tempfile::TempDir, String, ed25519_dalek::SigningKey) {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = ledger::store::pg::new_schema_name().expect("name");
    let a = dir.path().join("a");
    let out = run(&[
        "init",
        "--data-dir",
        a.to_str().expect("utf8"),
        "--storage",
        url,
        "--schema",
        &schema,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vkey = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("verifier key:"))
        .map(|k| k.trim().to_owned())
        .expect("verifier key");
    let key = a.join("log.key");
    let out = run(&[
        "init",
        "--join",
        "--data-dir",
        dir.path().join("b").to_str().expect("utf8"),
        "--storage",
        url,
        "--schema",
        &schema,
        "--log-key",
        key.to_str().expect("utf8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let operator = verifier::keys::read_signing_key(&a.join("operator.key")).expect("operator");
    (dir, vkey, operator)
}

fn size_of(c: &Client) -> u64 {
    let r = c.get("/checkpoint").expect("checkpoint");
    let text = String::from_utf8_lossy(&r.body).into_owned();
    text.lines()
        .nth(1)
        .and_then(|l| l.parse().ok())
        .expect("checkpoint size")
}

#[test]
fn two_frontends_on_one_log_decide_against_each_others_writes_and_agree() {
    let url = testkit::pg::url();
    let (dir, vkey, operator) = two_frontends(&url);
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let (server_a, base_a) = spawn_ledger(&["--data-dir", a_dir.to_str().expect("utf8")]);
    let (server_b, base_b) = spawn_ledger(&["--data-dir", b_dir.to_str().expect("utf8")]);
    let (ca, cb) = (Client::new(&base_a, None), Client::new(&base_b, None));
    let mut pa = Poster::new(&ca, vkey.clone(), operator.clone());
    let mut pb = Poster::new(&cb, vkey.clone(), operator.clone());

    // A principal enrolled through A writes through B at once, about a
    // task class registered through A: B's door does not know the key yet,
    // and its committer catches up before it decides.
    pa.enrol("harness", Role::Harness).expect("enrol through a");
    pa.post(
        "operator",
        Event::TaskClassRegistered(testkit::world::task_class(
            &testkit::world::run("run-0", Isolation::Microvm).task_class,
        )),
    )
    .expect("register through a");
    pb.post(
        "harness",
        Event::RunStarted(testkit::world::run("run-1", Isolation::Microvm)),
    )
    .expect("b takes a write signed by a key enrolled through a");
    // A rule across frontends: the run id is taken, whichever frontend
    // is asked.
    let refused = pa
        .post_refused(
            "harness",
            Event::RunStarted(testkit::world::run("run-1", Isolation::Microvm)),
        )
        .expect("refused");
    assert_eq!(
        refused.status,
        409,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert!(String::from_utf8_lossy(&refused.body).contains("\"code\":\"run_exists\""));
    // One envelope posted to both: appended once, acknowledged twice at
    // the same index.
    let env = pa.envelope(
        "harness",
        Event::RunStarted(testkit::world::run("run-2", Isolation::Microvm)),
    );
    let first = verifier::post::post_one(&ca, &vkey, &env).expect("through a");
    let again = verifier::post::post_one(&cb, &vkey, &env).expect("through b");
    assert_eq!(first.index, again.index);

    // Writes through both at once: every index given once.
    let indices = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (t, base) in [(0, &base_a), (1, &base_b), (2, &base_a), (3, &base_b)] {
            let (vkey, operator, indices) = (&vkey, &operator, &indices);
            s.spawn(move || {
                let c = Client::new(base, None);
                let mut p = Poster::new(&c, vkey.clone(), operator.clone());
                for i in 0..25 {
                    let rc = p
                        .post(
                            "operator",
                            Event::TaskClassRegistered(testkit::world::task_class(&format!(
                                "front-{t}-{i}"
                            ))),
                        )
                        .expect("write");
                    indices
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(rc.index);
                }
            });
        }
    });
    let indices = indices.into_inner().unwrap_or_else(|p| p.into_inner());
    let unique: HashSet<u64> = indices.iter().copied().collect();
    assert_eq!(unique.len(), 100, "an index was given twice");

    // Both serve the same log: the same size, and the same checkpoint at it.
    let target = size_of(&ca).max(size_of(&cb));
    assert!(
        within_30s(|| size_of(&ca) >= target && size_of(&cb) >= target),
        "the frontends did not converge"
    );
    let at = |c: &Client| {
        let r = c
            .get(&format!("/v1/proofs/consistency?first=1&second={target}"))
            .expect("proof");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.body
    };
    assert_eq!(at(&ca), at(&cb), "the two frontends prove different trees");

    stop_ledger(server_a);
    stop_ledger(server_b);
    for d in [&a_dir, &b_dir] {
        let out = run(&["verify", "--quiet", "--data-dir", d.to_str().expect("utf8")]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A log key that is not the log's is refused by `init --join`, and the
/// directory is left without a storage file.
#[test]
fn attack_a_frontend_joined_with_another_key_is_refused() {
    let url = testkit::pg::url();
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = ledger::store::pg::new_schema_name().expect("name");
    let a = dir.path().join("a");
    assert!(run(&[
        "init",
        "--data-dir",
        a.to_str().expect("utf8"),
        "--storage",
        &url,
        "--schema",
        &schema
    ])
    .status
    .success());
    let other = dir.path().join("other.key");
    let k = api::init::new_principal_key("localhost/evidence-ledger").expect("key");
    api::init::write_secret(&other, &k.private_key()).expect("write");
    let b = dir.path().join("b");
    let out = run(&[
        "init",
        "--join",
        "--data-dir",
        b.to_str().expect("utf8"),
        "--storage",
        &url,
        "--schema",
        &schema,
        "--log-key",
        other.to_str().expect("utf8"),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not this log's key"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!b.join(ledger::store::STORAGE_FILE).exists());
}

/// Frontend A is SIGKILLed and restarted 20 times while four clients
/// write, two through A and two through B. A client whose post gets no
/// answer (the kill cut it) posts the same envelope through B: an envelope
/// already in the log is acknowledged at its index, never appended again.
/// Every acknowledged envelope is in the log at the index it was given,
/// no index was given to two envelopes, and the log verifies.
#[test]
fn a_frontend_killed_twenty_times_under_writes_through_both_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, RwLock};
    let url = testkit::pg::url();
    let (dir, vkey, operator) = two_frontends(&url);
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let a_arg = a_dir.to_str().expect("utf8").to_owned();
    let (server_b, base_b) = spawn_ledger(&["--data-dir", b_dir.to_str().expect("utf8")]);
    let (mut server_a, base) = spawn_ledger(&["--data-dir", &a_arg]);
    let base_a = RwLock::new(base);
    let acked: Mutex<std::collections::HashMap<u64, String>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let kills = 20;
    std::thread::scope(|s| {
        for w in 0..4 {
            let (vkey, operator, acked, stop, base_a, base_b) =
                (&vkey, &operator, &acked, &stop, &base_a, &base_b);
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let name = format!("killed-{w}-{n}");
                    let env = verifier::post::sign_event(
                        operator,
                        "kill",
                        Event::TaskClassRegistered(testkit::world::task_class(&name)),
                    );
                    let first = if w % 2 == 0 {
                        base_a.read().unwrap_or_else(|p| p.into_inner()).clone()
                    } else {
                        base_b.clone()
                    };
                    let mut rc = verifier::post::post_one(&Client::new(&first, None), vkey, &env);
                    for _ in 0..100 {
                        if rc.is_ok() {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        rc = verifier::post::post_one(&Client::new(base_b, None), vkey, &env);
                    }
                    let rc = rc.expect("acknowledged through b in the end");
                    let prev = acked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(rc.index, name.clone());
                    assert!(prev.is_none(), "index {} given to two envelopes", rc.index);
                }
            });
        }
        for _ in 0..kills {
            std::thread::sleep(std::time::Duration::from_millis(
                150 + rand::random::<u64>() % 250,
            ));
            let _ = server_a.kill();
            let _ = server_a.wait();
            let (next, base) = spawn_ledger(&["--data-dir", &a_arg]);
            server_a = next;
            *base_a.write().unwrap_or_else(|p| p.into_inner()) = base;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
    });
    stop_ledger(server_a);
    stop_ledger(server_b);
    let acked = acked.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(
        acked.len() > 40,
        "too few writes acknowledged: {}",
        acked.len()
    );
    let log = ledger::Ledger::open(&b_dir, ledger::Config::default()).expect("open");
    let class_at = |i: u64| {
        let leaf = log.entry(i).expect("acknowledged entry").leaf;
        let (d, _) = events::envelope::decode_logged_leaf(&leaf).expect("an event");
        match d.payload.event {
            Event::TaskClassRegistered(e) => e.task_class,
            other => format!("{other:?}"),
        }
    };
    for (index, name) in &acked {
        assert_eq!(&class_at(*index), name, "entry {index}");
    }
    drop(log);
    ledger::verify_dir(&b_dir, &mut |_, _| {}).expect("verify");
    eprintln!(
        "frontend a killed {kills} times: {} writes acknowledged through both, 0 lost",
        acked.len()
    );
}

/// The database under two frontends: a primary with a synchronous standby,
/// the frontends' URL naming both (`target_session_attrs=read-write`).
/// While four clients write through both frontends, the primary is
/// SIGKILLed and restarted, then SIGKILLed again and the standby promoted.
/// A client whose post fails tries again, through either frontend, until
/// one acknowledges it. Every acknowledged envelope is at the index it was
/// given on the promoted server, none twice, and the log verifies there.
#[test]
fn the_database_crashed_then_failed_over_under_two_frontends_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let primary = testkit::pg::Cluster::start_with(&["synchronous_standby_names='*'"]);
    let standby = testkit::pg::Cluster::standby_of(&primary);
    let synchronous =
        || primary.query("SELECT sync_state::text FROM pg_stat_replication") == ["sync"];
    assert!(
        within_30s(synchronous),
        "the standby never became synchronous"
    );
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port, standby.port
    );
    let (dir, vkey, operator) = two_frontends(&url);
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let (server_a, base_a) = spawn_ledger(&["--data-dir", a_dir.to_str().expect("utf8")]);
    let (server_b, base_b) = spawn_ledger(&["--data-dir", b_dir.to_str().expect("utf8")]);
    let acked: Mutex<std::collections::HashMap<u64, String>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let count = || acked.lock().unwrap_or_else(|p| p.into_inner()).len();
    let grows = |by: usize| {
        let before = count();
        assert!(
            within_30s(|| count() >= before + by),
            "writes did not resume"
        );
    };
    std::thread::scope(|s| {
        for w in 0..4 {
            let (vkey, operator, acked, stop) = (&vkey, &operator, &acked, &stop);
            let bases = [base_a.clone(), base_b.clone()];
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let name = format!("failover-{w}-{n}");
                    let env = verifier::post::sign_event(
                        operator,
                        "failover",
                        Event::TaskClassRegistered(testkit::world::task_class(&name)),
                    );
                    let mut tries = 0;
                    let rc = loop {
                        let base = &bases[(w + tries) % 2];
                        match verifier::post::post_one(&Client::new(base, None), vkey, &env) {
                            Ok(rc) => break rc,
                            Err(e) => {
                                tries += 1;
                                assert!(tries < 1500, "{name} never acknowledged: {e}");
                                std::thread::sleep(std::time::Duration::from_millis(20));
                            }
                        }
                    };
                    let prev = acked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(rc.index, name);
                    assert!(prev.is_none(), "index {} given twice", rc.index);
                }
            });
        }
        grows(100);
        primary.kill();
        std::thread::sleep(std::time::Duration::from_millis(300));
        primary.run();
        assert!(within_30s(synchronous), "the standby never came back");
        grows(100);
        primary.kill();
        standby.promote();
        grows(100);
        stop.store(true, Ordering::SeqCst);
    });
    stop_ledger(server_a);
    stop_ledger(server_b);
    let acked = acked.into_inner().unwrap_or_else(|p| p.into_inner());
    let log = ledger::Ledger::open(&b_dir, ledger::Config::default()).expect("open");
    for (index, name) in &acked {
        let leaf = log.entry(*index).expect("acknowledged entry").leaf;
        let (d, _) = events::envelope::decode_logged_leaf(&leaf).expect("an event");
        match d.payload.event {
            Event::TaskClassRegistered(e) => assert_eq!(&e.task_class, name, "entry {index}"),
            other => panic!("entry {index} is {other:?}, not {name}"),
        }
    }
    drop(log);
    ledger::verify_dir(&b_dir, &mut |_, _| {}).expect("verify on the promoted server");
    eprintln!(
        "database crashed, then failed over, under two frontends: {} acknowledged, 0 lost",
        acked.len()
    );
}
