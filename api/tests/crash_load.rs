//! Crash under load: the real server runs under concurrent write load and is
//! killed with SIGKILL at random moments, 50 times. After each restart:
//! - it becomes ready, which means its startup verification of the whole log
//!   (and its anchors) passed;
//! - every acknowledged write is present with the same index and leaf hash;
//! - it is consistent with every checkpoint it handed out before the crash.
//!
//! The server seals its data file into a segment every 64 entries
//! (`--segment-entries`), so kills also land inside seals: before the new
//! data file is renamed over the old one, and after (a log kept in
//! PostgreSQL has no data file to seal).
//!
//! It prints the distribution of recovery times over the restarts (spawn
//! to `/healthz`, to the event state caught up, to `/readyz`): figures for
//! docs/TESTS.md, never asserted (performance is measured in bench/).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::demo::Poster;
use events::model::{Event, Isolation, Role};
use rand::Rng;
use verifier::client::Client;
use verifier::wire::{ConsistencyProof, EntryView, LogInfo};

const KILLS: usize = 50;
const WRITERS: usize = 4;

/// Times of one start, in ms from spawning the server.
#[derive(Default)]
struct Recovery {
    healthz: Vec<f64>,
    caught_up: Vec<f64>,
    readyz: Vec<f64>,
}

impl Recovery {
    fn summary(&self) -> String {
        let q = |v: &[f64], p: f64| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[((v.len() - 1) as f64 * p).round() as usize]
        };
        [
            ("/healthz", &self.healthz),
            ("event state caught up", &self.caught_up),
            ("/readyz", &self.readyz),
        ]
        .iter()
        .map(|(what, v)| {
            format!(
                "{what}: min {:.0} ms, median {:.0}, p90 {:.0}, max {:.0}",
                q(v, 0.0),
                q(v, 0.5),
                q(v, 0.9),
                q(v, 1.0)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
    }
}

/// Starts the server and waits until it is ready, recording how long each
/// stage took.
fn start(data: &str, times: &mut Recovery) -> (std::process::Child, String) {
    let t0 = std::time::Instant::now();
    let ms = || t0.elapsed().as_secs_f64() * 1000.0;
    let (child, base) = common::spawn_ledger_live(&[
        "--data-dir",
        data,
        "--anchor-interval-secs",
        "0",
        "--segment-entries",
        "64",
    ]);
    times.healthz.push(ms());
    let c = Client::new(&base, None);
    while c
        .get("/readyz")
        .map(|r| r.status == 503 && r.text().contains("ledger_unavailable"))
        .unwrap_or(true)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    times.caught_up.push(ms());
    let (child, base) = common::ready_within_30s(child, base);
    times.readyz.push(ms());
    (child, base)
}

#[derive(Clone)]
struct Ack {
    index: u64,
    leaf_hash: String,
    tree_size: u64,
    root: String,
}

fn h(s: &str) -> ledger::Hash {
    ledger::Hash(hex::decode(s).expect("hex").try_into().expect("32"))
}

#[test]
fn sigkill_under_load_50_times_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let d = data.to_str().expect("utf8").to_owned();
    let init = api::init::init(&data, "crash.test/log", "operator", None, None).expect("init");
    let vkey = init.log_key.verifier_key().to_owned();
    let operator = init.operator.clone();
    drop(init);
    let acked: Arc<Mutex<Vec<Ack>>> = Arc::new(Mutex::new(Vec::new()));
    let mut rng = rand::rng();
    let mut times = Recovery::default();
    for round in 0..KILLS {
        let (mut server, base) = start(&d, &mut times);
        let c = Client::new(&base, None);
        if round == 0 {
            let mut p = Poster::new(&c, vkey.clone(), operator.clone());
            p.enrol("harness", Role::Harness).expect("enrol");
            p.post(
                "operator",
                Event::TaskClassRegistered(testkit::world::task_class(testkit::world::TASK_CLASS)),
            )
            .expect("register");
        }
        // Everything acknowledged before the crash is still there, unchanged.
        let info: LogInfo = c.get_json("/v1/log").expect("log");
        let before = acked.lock().expect("lock").clone();
        let recent = before.iter().rev().take(200);
        let earlier: Vec<&Ack> = (0..50.min(before.len()))
            .map(|_| &before[rng.random_range(0..before.len())])
            .collect();
        for a in recent.chain(earlier) {
            let e: EntryView = c
                .get_json(&format!("/v1/entries/{}", a.index))
                .unwrap_or_else(|e| {
                    panic!("round {round}: acknowledged entry {} lost: {e}", a.index)
                });
            assert_eq!(
                e.leaf_hash, a.leaf_hash,
                "round {round}: entry {} changed",
                a.index
            );
        }
        // ...and every checkpoint handed out is a prefix of the current tree.
        for a in before.iter().rev().step_by(97).take(20) {
            let p: ConsistencyProof = c
                .get_json(&format!(
                    "/v1/proofs/consistency?first={}&second={}",
                    a.tree_size, info.tree_size
                ))
                .expect("proof");
            ledger::merkle::verify_consistency(
                a.tree_size,
                &h(&a.root),
                info.tree_size,
                &h(&info.root),
                &p.proof.iter().map(|x| h(x)).collect::<Vec<_>>(),
            )
            .unwrap_or_else(|e| {
                panic!(
                    "round {round}: checkpoint {} inconsistent after restart: {e}",
                    a.tree_size
                )
            });
        }
        // Load, then SIGKILL at a random moment.
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (base, vkey, op, acked) = (
                    base.clone(),
                    vkey.clone(),
                    operator.clone(),
                    Arc::clone(&acked),
                );
                std::thread::spawn(move || {
                    let client = Client::new(&base, None);
                    let mut p = Poster::new(&client, vkey, op);
                    for i in 0.. {
                        let run =
                            testkit::world::run(&format!("r{round}-w{w}-{i}"), Isolation::Microvm);
                        match p.post("harness", Event::RunStarted(run)) {
                            Ok(r) => acked.lock().expect("lock").push(Ack {
                                index: r.index,
                                leaf_hash: r.leaf_hash,
                                tree_size: r.tree_size,
                                root: r.root,
                            }),
                            Err(_) => break,
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.random_range(30..200)));
        server.kill().expect("SIGKILL");
        server.wait().expect("reap");
        for w in writers {
            w.join().expect("writer");
        }
    }
    // A last restart: every acknowledged write, all of them, is present.
    let (mut server, base) = start(&d, &mut times);
    let c = Client::new(&base, None);
    let all = acked.lock().expect("lock").clone();
    let mut lost = 0;
    for a in &all {
        match c.get_json::<EntryView>(&format!("/v1/entries/{}", a.index)) {
            Ok(e) if e.leaf_hash == a.leaf_hash => {}
            _ => lost += 1,
        }
    }
    let mut idx: Vec<u64> = all.iter().map(|a| a.index).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), all.len(), "an index was acknowledged twice");
    server.kill().expect("kill");
    server.wait().expect("reap");
    eprintln!(
        "crash under load: {KILLS} SIGKILLs, {} writes acknowledged, {lost} lost",
        all.len()
    );
    eprintln!(
        "recovery over {} starts after SIGKILL under load: {}",
        times.readyz.len(),
        times.summary()
    );
    assert_eq!(lost, 0);
    assert!(all.len() > KILLS, "too little load to mean anything");
    // A log kept in PostgreSQL (LEDGER_STORAGE) has no data file to seal.
    if matches!(
        ledger::store::Location::of(&data),
        Ok(Some(ledger::store::Location::File))
    ) {
        let sealed = std::fs::read_dir(data.join(ledger::store::SEGMENTS_DIR))
            .map(|d| d.count())
            .unwrap_or(0);
        eprintln!("segments sealed: {sealed}");
        assert!(sealed > 1, "the kills never met a sealed data file");
    }
}
