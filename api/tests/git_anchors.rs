//! Anchors in git history, against a real bare repository: `ledger anchor
//! publish` into a git work tree commits and pushes each anchor; `ledger
//! verify --anchors-repo URL` reads them back from a clone; an anchor
//! rewritten in the repository fails the check; a push the remote refuses
//! is an error, never forced.

mod common;

use common::{git, run_ledger};

fn ok(out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn anchors_are_pushed_to_git_and_verified_from_a_clone() {
    let t = tempfile::tempdir().expect("dir");
    let remote = t.path().join("anchors.git");
    let work = t.path().join("work");
    git(
        t.path(),
        &["init", "-q", "--bare", remote.to_str().expect("utf-8")],
    );
    git(
        t.path(),
        &["clone", "-q", remote.to_str().expect("utf-8"), "work"],
    );
    let data = t.path().join("data");
    let d = data.to_str().expect("utf-8");
    let w = work.to_str().expect("utf-8");
    ok(&run_ledger(&[
        "init",
        "--data-dir",
        d,
        "--origin",
        "git.test/log",
    ]));
    for _ in 0..2 {
        let out = ok(&run_ledger(&[
            "anchor",
            "publish",
            "--data-dir",
            d,
            "--anchors",
            w,
        ]));
        assert!(out.contains("published git:"), "{out}");
    }
    // Both anchors are commits in the remote's history.
    let log = git(&remote, &["log", "--format=%s", "--all"]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["anchor: tree size 3", "anchor: tree size 2"],
        "{log}"
    );
    let url = format!("file://{}", remote.display());
    let out = ok(&run_ledger(&[
        "verify",
        "--data-dir",
        d,
        "--anchors-repo",
        &url,
    ]));
    assert!(out.contains("consistent with 2 anchors"), "{out}");

    // Someone with push access rewrites the first anchor with another root,
    // signed with the real log key: a clone shows it, and the check fails.
    let other = t.path().join("other");
    git(
        t.path(),
        &["clone", "-q", remote.to_str().expect("utf-8"), "other"],
    );
    let key = verifier::keys::local_key(&data).expect("log key");
    let forged = key
        .sign_checkpoint(2, &ledger::Hash([7; 32]))
        .expect("note");
    let first = std::fs::read_dir(&other)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with("000000000002.checkpoint"))
        .expect("the first anchor");
    std::fs::write(other.join(&first), forged).expect("write");
    git(&other, &["commit", "-q", "-am", "rewrite"]);
    git(&other, &["push", "-q"]);
    let out = run_ledger(&["verify", "--data-dir", d, "--anchors-repo", &url]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("was modified in commit"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The server's work tree is now behind the remote: its next push is
    // refused, and nothing is forced over the remote's history.
    let out = run_ledger(&["anchor", "publish", "--data-dir", d, "--anchors", w]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("git push"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = git(&remote, &["log", "--format=%s", "--all"]);
    assert_eq!(log.lines().next(), Some("rewrite"), "{log}");
}
