//! Backup under load, verified restore, and refusing to restore behind an
//! anchor.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{seed, TestServer};
use events::model::{Event, Isolation};

#[test]
fn backup_under_load_restores_to_a_log_that_verifies_and_matches_the_anchors() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    api::server::publish_anchor(&s.state).expect("anchor before the backup");
    // Writers keep going during the backup.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (base, vkey, op, stop) = (
            s.base.clone(),
            s.vkey.clone(),
            s.operator.clone(),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let client = verifier::client::Client::new(&base, None);
            let mut p = api::demo::Poster::new(&client, vkey, op);
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                p.post(
                    "harness",
                    Event::RunStarted(testkit::world::run(
                        &format!("load-{n}"),
                        Isolation::Microvm,
                    )),
                )
                .expect("write");
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(150));
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ledger.backup");
    let size = verifier::backup::backup(&c, &s.vkey, &file, &mut |_, _| {})
        .expect("backup")
        .size;
    // On a loaded machine the writer may not have landed a write since the
    // backup's checkpoint yet: let it, for up to 30 s, before stopping it.
    common::within_30s(|| s.state.events.ledger().head().size > size);
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().expect("writer");
    assert!(written > 0, "the backup ran under load");
    assert!(
        s.state.events.ledger().head().size > size,
        "writes continued past the backup's checkpoint"
    );

    let restored_dir = dir.path().join("restored");
    let key_file = s.path().join("log.key");
    let anchors_dir = s.path().join("anchors");
    let r = verifier::backup::restore(
        &file,
        &restored_dir,
        &key_file,
        Some(&anchors_dir),
        &[],
        false,
        &mut |_, _| {},
    )
    .expect("restore");
    assert_eq!((r.size, r.anchors_checked, r.behind.len()), (size, 1, 0));
    let v = ledger::verify_dir(&restored_dir, &mut |_, _| {}).expect("the restored log verifies");
    assert_eq!(v.size, size);
    assert_eq!(
        v.root,
        s.state.events.ledger().root_at(size).expect("root"),
        "byte-identical tree"
    );
    assert!(
        verifier::backup::restore(
            &file,
            &restored_dir,
            &key_file,
            None,
            &[],
            false,
            &mut |_, _| {}
        )
        .is_err(),
        "never over an existing log"
    );
}

#[test]
fn an_old_backup_behind_an_anchor_is_refused_unless_allowed_and_the_gap_is_reported() {
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.backup");
    let old_size = verifier::backup::backup(&c, &s.vkey, &old, &mut |_, _| {})
        .expect("backup")
        .size;
    let mut p = s.poster(&c);
    for i in 0..5 {
        p.post(
            "harness",
            Event::RunStarted(testkit::world::run(
                &format!("later-{i}"),
                Isolation::Microvm,
            )),
        )
        .expect("write");
    }
    api::server::publish_anchor(&s.state).expect("anchor after the backup");
    let key_file = s.path().join("log.key");
    let anchors_dir = s.path().join("anchors");
    let err = verifier::backup::restore(
        &old,
        &dir.path().join("r1"),
        &key_file,
        Some(&anchors_dir),
        &[],
        false,
        &mut |_, _| {},
    )
    .expect_err("behind an anchor");
    assert!(err.to_string().contains("behind anchor"), "{err}");
    assert!(
        !dir.path().join("r1").join("ledger.redb").exists(),
        "nothing restored"
    );
    let r = verifier::backup::restore(
        &old,
        &dir.path().join("r2"),
        &key_file,
        Some(&anchors_dir),
        &[],
        true,
        &mut |_, _| {},
    )
    .expect("allowed");
    assert_eq!(r.size, old_size);
    assert_eq!(r.behind.len(), 1);
    assert!(
        r.behind[0].1 >= 5,
        "gap of {} entries reported",
        r.behind[0].1
    );
}

#[test]
fn attack_edited_backup_is_refused_leaves_no_log_and_names_the_root() {
    use base64::Engine as _;
    let s = TestServer::start(|_| {});
    let c = s.client();
    seed(&s, &c);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ledger.backup");
    verifier::backup::backup(&c, &s.vkey, &file, &mut |_, _| {}).expect("backup");
    let key_file = s.path().join("log.key");
    let text = std::fs::read_to_string(&file).expect("read");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // Entry 3's leaf, one byte changed: the same count of entries, another root.
    let mut line: serde_json::Value = serde_json::from_str(&lines[4]).expect("entry line");
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut leaf = b64
        .decode(line["leaf"].as_str().expect("leaf"))
        .expect("base64");
    leaf[10] ^= 1;
    line["leaf"] = b64.encode(&leaf).into();
    lines[4] = line.to_string();
    let edited = dir.path().join("edited.backup");
    std::fs::write(&edited, lines.join("\n") + "\n").expect("write");
    let target = dir.path().join("restored");
    let err = verifier::backup::restore(
        &edited,
        &target,
        &key_file,
        None,
        &[],
        false,
        &mut |_, _| {},
    )
    .expect_err("an edited backup must be refused");
    assert!(err.to_string().contains("root"), "{err}");
    assert!(
        !err.to_string().contains("holds"),
        "the size is right; the refusal must name the root: {err}"
    );
    assert!(
        !target.join("ledger.redb").exists(),
        "a refused restore left a log behind"
    );
    assert!(
        std::fs::read_dir(&target)
            .map(|d| d.count() == 0)
            .unwrap_or(true),
        "a refused restore left files behind"
    );
    // A backup that lost its last entry: the refusal names the size.
    let short = dir.path().join("short.backup");
    std::fs::write(&short, lines[..lines.len() - 1].join("\n") + "\n").expect("write");
    let err =
        verifier::backup::restore(&short, &target, &key_file, None, &[], false, &mut |_, _| {})
            .expect_err("a short backup must be refused");
    assert!(err.to_string().contains("entries"), "{err}");
    assert!(!target.join("ledger.redb").exists());
}
